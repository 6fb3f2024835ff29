"""RowTable's edges: a column the pane's edge would cut is blanked with a marker, unless
it is wider than the pane in a table of text (then blanking it would leave nothing to read)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult

from tvis_tui.widgets.row_table import RowTable

LONG = " ".join(f"word{i}" for i in range(40))  # ~270 cells: wider than any pane


class TableApp(App):
    def __init__(self, columns: list[str], row: list[str]) -> None:
        super().__init__()
        self.columns, self.row = columns, row

    def compose(self) -> ComposeResult:
        yield RowTable()

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.add_columns(*self.columns)
        table.add_row(*(Text(cell, justify="right") for cell in self.row))


async def _lines(columns: list[str], row: list[str]) -> list[str]:
    app = TableApp(columns, row)
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        return [table.render_line(y).text for y in range(2)]


async def test_a_column_wider_than_the_pane_is_shown_cut_at_the_edge():
    # The predicted text of a language model (sweep N: the table showed only its `#`).
    header, row = await _lines(["#", "predicted"], ["0", LONG])
    assert header.startswith(" #  predicted") and header.rstrip().endswith("›")
    assert row.startswith(" 0  word0 word1 word2") and row.rstrip().endswith("›")


async def test_a_narrower_column_the_edge_would_cut_is_blanked_whole():
    # A right-justified -1.839e-08 cut after five cells would read -1.839.
    header, row = await _lines(["name", "value"], ["x" * 30, "-1.839e-08"])
    assert "value" not in header and "-1.8" not in row and row.rstrip().endswith("›")


async def test_lines_below_the_last_row_have_no_marker():
    """A marker says a row's column is cut; the empty lines under the rows have none to
    cut, and drew `›` all the way down the inspector (sweep Q)."""
    app = TableApp(["name", "value"], ["x" * 30, "-1.839e-08"])
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        lines = [table.render_line(y).text for y in range(5)]
    assert lines[0].rstrip().endswith("›") and lines[1].rstrip().endswith("›")
    assert lines[2:] == [" " * len(lines[2])] * 3


class NumbersApp(App):
    """The params view's shape: a name column fixed, one column of figures wider than
    the room left beside it."""

    def compose(self) -> ComposeResult:
        yield RowTable(fixed_columns=1, cut_wide_columns=False)

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.add_columns("parameter", "step 1", "step 2")
        table.add_row("x" * 33, Text("0.01", justify="right"), Text("0.7347", justify="right"))


async def test_a_table_of_numbers_never_shows_a_figure_cut():
    """At 40 columns the params view showed lr 0.01 as `0.0›` and 0.7347 as `0.734›`
    (sweep Q): a cut figure reads as another figure, so its column is blanked whole."""
    app = NumbersApp()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        header, row = (table.render_line(y).text for y in range(2))
        assert "0.0" not in row and "step" not in header and row.rstrip().endswith("›")
        table.action_cursor_right()  # scrolled: still no part of a figure
        await pilot.pause()
        row = table.render_line(1).text
        assert "0.0" not in row and "0.7" not in row and "‹" in row


async def test_a_row_drawn_before_the_columns_are_measured_is_drawn_again_after():
    """Textual measures new rows' columns when idle, and caches lines drawn before with
    the header's widths (textual#3533): on a busy machine the run list came back with
    its newest run cut to `202` (a flaky test_panes test)."""
    app = TableApp(["run", "status"], ["old", "ok"])
    async with app.run_test(size=(60, 5)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        table.clear(columns=True)
        table.add_columns("run", "status")
        table.add_row("20261202-093000-train", "crashed")
        assert "20261202-093000-train" not in table.render_line(1).text  # drawn before idle
        await pilot.pause()
        assert "20261202-093000-train" in table.render_line(1).text


async def test_a_column_cut_by_both_edges_leaves_both_markers():
    app = NumbersApp()
    async with app.run_test(size=(40, 5)) as pilot:
        await pilot.pause()
        table = app.query_one(RowTable)
        table.columns[table.ordered_columns[1].key].content_width = 30  # wider than the room
        table.refresh()
        table.scroll_to(x=2, animate=False)
        await pilot.pause()
        row = table.render_line(1).text.rstrip()
        assert "‹" in row and row.endswith("›")
