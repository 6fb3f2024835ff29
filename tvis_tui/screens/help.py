"""The help screen and docs/tui-keys.md, both generated from the BINDINGS themselves.

The help screen lists the keys of the screen it was opened from first (the sections a
screen names in its HELP_SECTIONS), then those that work everywhere, then the rest.

`python -m tvis_tui.screens.help > docs/tui-keys.md` rewrites the doc; a test checks
that the committed doc matches, so the reference never drifts from the keys.
"""

from __future__ import annotations

from typing import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.keys import format_key
from textual.screen import ModalScreen
from textual.widgets import Static

NAMED_KEYS = {"pageup": "PgUp", "pagedown": "PgDn", "enter": "Enter", "space": "Space", "escape": "Esc",
              "tab": "Tab", "up": "↑", "down": "↓", "left": "←", "right": "→"}


def key_display(keys: str) -> str:
    """`n,f10` -> `n  F10`; `shift+f11` -> `Shift+F11`; `question_mark` -> `?`."""
    return "  ".join(_one_key(key.strip()) for key in keys.split(","))


def _one_key(key: str) -> str:
    *mods, base = key.split("+")
    if base in NAMED_KEYS:
        name = NAMED_KEYS[base]
    else:
        shown = format_key(base)
        name = shown if len(shown) == 1 else shown.title()
    if mods and len(name) == 1:
        name = name.upper()  # Ctrl+R, as menus and manuals write it
    return "+".join([*(m.title() for m in mods), name])


def help_text(binding: Binding) -> str:
    """The long description (tooltip) where the footer shows a short one."""
    return binding.tooltip or binding.description


def key_sections() -> list[tuple[str, list[Binding]]]:
    """Every key the app answers to, by where it works."""
    from tvis_tui.app import TvisApp
    from tvis_tui.screens.debugger import DebuggerScreen
    from tvis_tui.screens.params_view import ParamsScreen
    from tvis_tui.screens.run_picker import RunPickerScreen
    from tvis_tui.screens.step_view import StepScreen
    from tvis_tui.screens.values import ValuesScreen
    from tvis_tui.widgets.call_tree import CallTree
    from tvis_tui.widgets.source_pane import SourcePane

    inspector = [Binding("up,k,down,j", "cursor", "Select an input, output or gradient"),
                 Binding("home,end", "cursor", "First or last row"),
                 Binding("left,right", "scroll", "One column left or right (‹ › mark columns out of view)"),
                 Binding("enter", "select", "Open the values of the selected tensor (when stored)")]
    scrolling = Binding("up,down,left,right,pageup,pagedown,home,end", "scroll",
                        "Scroll the values a line, a column or a page at a time")
    return [
        ("Stepping (from any pane)", list(DebuggerScreen.BINDINGS)),
        ("Call tree", list(CallTree.BINDINGS)),
        ("Source pane", list(SourcePane.BINDINGS)),
        ("Inspector", inspector),
        ("Values view", [*ValuesScreen.BINDINGS, scrolling]),
        ("Step view", list(StepScreen.BINDINGS)),
        ("Parameters view", [Binding("up,k,down,j,home,end", "cursor", "Select a parameter"),
                             Binding("left,right", "scroll", "Scroll the steps (‹ › mark columns out of view)"),
                             *ParamsScreen.BINDINGS]),
        ("Run list", [Binding("up,k,down,j,home,end", "cursor", "Select a run"),
                      Binding("left,right", "scroll", "Scroll the columns (‹ › mark columns out of view)"),
                      *RunPickerScreen.BINDINGS]),
        (EVERYWHERE, [*TvisApp.BINDINGS, Binding("tab", "focus_next", "Next pane")]),
    ]


EVERYWHERE = "Everywhere"


Sections = list[tuple[str, list[Binding]]]


def sections_for(here: Sequence[str]) -> tuple[Sections, Sections]:
    """(the sections titled in `here`, in that order, then the keys that work everywhere;
    the rest)."""
    sections = dict(key_sections())
    first = [title for title in here if title in sections] + [EVERYWHERE]
    return ([(title, sections[title]) for title in first],
            [item for item in sections.items() if item[0] not in first])


def key_reference_markdown() -> str:
    lines = ["# tvis tui: keys", "",
             "Generated from the key bindings by `python -m tvis_tui.screens.help`; do not edit.", ""]
    for title, bindings in key_sections():
        lines += [f"## {title}", "", "| keys | what it does |", "|---|---|"]
        lines += [f"| `{key_display(b.key)}` | {help_text(b)} |" for b in bindings]
        lines.append("")
    return "\n".join(lines)


def key_table(title: str, bindings: list[Binding]) -> Table:
    table = Table(title=title, title_justify="left", title_style="bold", box=None, show_header=False,
                  pad_edge=False, expand=True)
    table.add_column("keys", style="bold", no_wrap=True, min_width=12)
    table.add_column("what it does", ratio=1)
    for binding in bindings:
        table.add_row(Text(key_display(binding.key)), Text(help_text(binding)))
    return table


class HelpScreen(ModalScreen[None]):
    """`here`: the titles of the sections for the screen help was opened from."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close help")]

    def __init__(self, here: Sequence[str] = ()) -> None:
        super().__init__()
        self.here = tuple(here)

    def compose(self) -> ComposeResult:
        here, elsewhere = sections_for(self.here)
        with VerticalScroll(id="help"):
            for title, bindings in here:
                yield Static(key_table(title, bindings))
            if self.here:
                yield Static(Text("On other screens", style="dim italic"), classes="help-elsewhere")
            for title, bindings in elsewhere:
                yield Static(key_table(title, bindings))

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "keys (Esc closes)"
        self.query_one("#help").focus()

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


if __name__ == "__main__":
    print(key_reference_markdown(), end="")
