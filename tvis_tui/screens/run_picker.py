"""The run picker: the runs in a folder, newest first; Enter opens one."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tvis_tui.errors import TvisError
from tvis_tui.store.listing import human_bytes
from tvis_tui.store.runs import UNREADABLE, RunSummary, find_runs
from tvis_tui.text import cut, printable
from tvis_tui.widgets.row_table import RowTable

STATUS_STYLES = {"ok": "green", "stopped": "yellow", "crashed": "bold red", "running": "cyan"}


class RunPickerScreen(Screen):
    HELP_SECTIONS = ("Run list",)  # help lists these first
    BINDINGS = [
        Binding("enter", "open", "open", show=True, tooltip="Open the selected run"),
        Binding("ctrl+r", "refresh", "reload", show=True, tooltip="Reload the list of runs"),
    ]

    def __init__(self, folder: Path, runs: list[RunSummary]) -> None:
        super().__init__()
        self.folder = folder
        self.runs = runs

    def compose(self) -> ComposeResult:
        yield Static(Text(f"runs in {self.folder}", style="bold"), id="picker-title")
        yield RowTable(id="runs")
        yield Footer()

    def on_mount(self) -> None:
        self._fill()
        self.query_one(DataTable).focus()

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        table.clear(columns=True)  # widths fit the runs listed now, not a long reason gone
        # Status before the rest: a crashed run must stand out in a narrow terminal.
        table.add_columns("run", "status", "script", "started", "steps", "calls", "size")
        for run in self.runs:
            table.add_row(*_cells(run))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open()

    def action_open(self) -> None:
        row = self.query_one(DataTable).cursor_row
        if 0 <= row < len(self.runs):
            self.app.open_run(self.runs[row].path)  # type: ignore[attr-defined]

    def action_refresh(self) -> None:
        self.reload()

    @work(thread=True, exclusive=True)
    def reload(self) -> None:
        try:
            runs = find_runs(self.folder)
        except TvisError as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="error")
            return
        self.app.call_from_thread(self._reloaded, runs)

    def _reloaded(self, runs: list[RunSummary]) -> None:
        table = next(iter(self.query(DataTable)), None)
        if table is None:  # the list was left before the folder was read (a run opened)
            return
        row = table.cursor_row
        selected = self.runs[row].path if 0 <= row < len(self.runs) else None
        self.runs = runs
        self._fill()
        at = next((i for i, run in enumerate(runs) if run.path == selected), None)
        if at is not None:
            table.move_cursor(row=at)  # the run the user was on, wherever it sits now


SCRIPT_WIDTH = 32
"""Characters of a script's path the list shows; longer paths keep their last folders."""

REASON_WIDTH = 40
"""Characters of why a run is unreadable: a long reason would push the counts of every
run off screen. Enter on the run, and `tvis ls`, say it whole."""


def script_label(script: str) -> str:
    """The script as it was given to `tvis run` (examples/char_lm/train.py: two runs of
    two train.py scripts must read apart), shortened from the left to SCRIPT_WIDTH."""
    if len(script) <= SCRIPT_WIDTH:
        return script
    parts = Path(script).parts
    kept = parts[-1]
    for part in reversed(parts[:-1]):
        if len(part) + len(kept) + 3 > SCRIPT_WIDTH:
            break
        kept = f"{part}/{kept}"
    return f"…/{kept}"


def _cells(run: RunSummary) -> list[Text]:
    """A run's row; an unreadable run says why where its script would be (no counts:
    zeros would read as an empty run)."""
    size = Text(human_bytes(run.size_bytes), justify="right")
    if run.status == UNREADABLE:
        return [Text(printable(run.path.name)), Text(run.status, style="bold red"),
                Text(cut(printable(run.reason or ""), REASON_WIDTH), style="red"),
                Text(""), Text(""), Text(""), size]
    return [Text(printable(run.path.name)),
            Text(run.status_text, style=STATUS_STYLES.get(run.status, "")),
            Text(printable(script_label(run.script))), Text(run.started.replace("T", " ")[:19]),
            Text(str(run.steps), justify="right"), Text(f"{run.calls:,}", justify="right"), size]
