"""An exception in full, scrollable: the one a crashed run ended with (message and
traceback), or one a call raised and the script caught (its whole message).

The status line and the call tree show the message's first line; a message of several
lines (a shape report, a worker's traceback) is read here.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static


class ExceptionScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,x", "dismiss", "Close")]

    def __init__(self, text: str, where: str | None) -> None:
        super().__init__()
        self.text = text
        self.where = where

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="exception"):
            # Its terminal escapes (torch bolds words) drawn as styles, not as characters.
            yield Static(Text.from_ansi(self.text.rstrip("\n"), no_wrap=False))

    def on_mount(self) -> None:
        pane = self.query_one("#exception")
        pane.border_title = f"exception at {self.where} (Esc closes)" if self.where else "exception (Esc closes)"
        pane.focus()
