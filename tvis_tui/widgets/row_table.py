"""A DataTable of rows, moved through as the call tree is: j/k, Home/End."""

from __future__ import annotations

from textual.binding import Binding
from textual.widgets import DataTable


class RowTable(DataTable):
    """A row-cursor table with the call tree's keys: DataTable's Home/End scroll sideways,
    and it has no j/k, while a person who just used them in the tree expects them here."""

    BINDINGS = [
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
