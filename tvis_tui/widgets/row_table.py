"""A DataTable of rows, moved through as the call tree is: j/k, Home/End; a column the
pane's edge would cut is left out, with a marker, rather than drawn in part."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.strip import Strip
from textual.widgets import DataTable

CUT_LEFT, CUT_RIGHT = "‹", "›"
"""Drawn where a column was left out: there is more that way (←/→ scroll)."""


class RowTable(DataTable):
    """A row-cursor table with the call tree's keys: DataTable's Home/End scroll sideways,
    and it has no j/k, while a person who just used them in the tree expects them here.

    DataTable crops its lines at the pane's edges wherever they fall: a right-justified
    -1.839e-08 cut after five cells reads as -1.839, a wrong figure that looks right.
    Here a column only partly in view is blanked, and a marker says more lies that way.
    Rows have no labels (the offsets below assume so). The first `fixed_columns` stay in
    view (a row's name); the rest scroll past them, and are what the keys and markers
    count. A column wider than the pane is shown cut, as text still reads cut, unless
    `cut_wide_columns` is False: a table of numbers, where `0.01` cut reads `0.0`."""

    BINDINGS = [
        Binding("k", "cursor_up", "Up", show=False),
        Binding("j", "cursor_down", "Down", show=False),
        Binding("home", "scroll_top", "First row", show=False),
        Binding("end", "scroll_bottom", "Last row", show=False),
    ]

    def __init__(self, *, id: str | None = None, fixed_columns: int = 0, cut_wide_columns: bool = True) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False, fixed_columns=fixed_columns)
        self.cut_wide_columns = cut_wide_columns
        self._drawn_widths: tuple[int, ...] = ()

    def action_cursor_right(self) -> None:
        """One column to the right: the leftmost one (or what shows of it) scrolls away."""
        ends = [end for _, end in self._scrolled_spans() if end > self.scroll_x]
        if ends:
            self.scroll_to(x=min(ends[0], self.max_scroll_x), animate=False)

    def action_cursor_left(self) -> None:
        """One column to the left: the one cut or hidden by the left edge comes in whole."""
        starts = [start for start, _ in self._scrolled_spans() if start < self.scroll_x]
        if starts:
            self.scroll_to(x=starts[-1], animate=False)

    def first_column_in_view(self) -> int:
        """The index of the leftmost scrolling column in view (in part or whole)."""
        spans = self._scrolled_spans()
        return self.fixed_columns + next((i for i, (_, end) in enumerate(spans) if end > self.scroll_x), 0)

    def scroll_to_column(self, index: int) -> None:
        """Scroll sideways so that column `index` is the leftmost scrolling one in view,
        or as near as the table's width lets it."""
        spans = self._scrolled_spans()
        if 0 <= index - self.fixed_columns < len(spans):
            self.scroll_to(x=min(spans[index - self.fixed_columns][0], self.max_scroll_x), animate=False)

    def render_line(self, y: int) -> Strip:
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        if widths != self._drawn_widths:
            # DataTable measures new rows' cells once idle, and keeps the lines it drew
            # before under keys that hold no widths (textual#3533): on a busy machine the
            # run list came back with its newest run cut to `202`.
            # (A private method: a Textual without it draws as Textual does.)
            self._drawn_widths = widths
            getattr(self, "_clear_caches", lambda: None)()
        strip = super().render_line(y)
        if y >= self.header_height and y + int(self.scroll_y) >= self.virtual_size.height:
            return strip  # below the last row: no column there to be cut
        left, right = self.cut_columns()
        if right is not None:
            strip = _blank(strip, right, self._visible_width, CUT_RIGHT, at_end=True)
        if left is not None:
            strip = _blank(strip, self._fixed_width, left, CUT_LEFT, at_end=False)
        return strip

    def cut_columns(self) -> tuple[int | None, int | None]:
        """Where, in the visible width, the blank left of the view ends and the blank right
        of it starts (None: all is in view that way). A column the edge cuts is blanked
        whole, except one wider than the pane where `cut_wide_columns` (blanking it would
        leave nothing to read): then only the marker's cell is given up. The scrolling columns are laid out from
        the fixed ones' right edge, so a scroll of x shows their cells [x, x + room)."""
        fixed = self._fixed_width
        room = self._visible_width - fixed
        first = int(self.scroll_x)
        last = first + room
        spans = self._scrolled_spans()
        left = fixed + 1 if first > 0 else None
        right = self._visible_width - 1 if spans and spans[-1][1] > last else None
        for start, end in spans:
            if end - start > room and self.cut_wide_columns:
                continue  # an LM's predicted text: cut, it still reads; blanked, nothing would
            if start < first < end:  # cut by the left edge
                left = fixed + min(end, last) - first
            if start < last < end:  # cut by the right edge
                right = fixed + max(start, first) - first
        if left is not None and right is not None:
            left = min(left, self._visible_width - 1)  # one column cut by both: both markers
        return left, right

    def _scrolled_spans(self) -> list[tuple[int, int]]:
        """(first cell, end) of each scrolling column, counted from the fixed ones' edge:
        the scroll offset at which it starts at that edge, and past which it is gone."""
        spans, start = [], 0
        for column in self.ordered_columns[self.fixed_columns:]:
            end = start + column.get_render_width(self)
            spans.append((start, end))
            start = end
        return spans

    @property
    def _fixed_width(self) -> int:
        return sum(column.get_render_width(self) for column in self.ordered_columns[:self.fixed_columns])

    @property
    def _visible_width(self) -> int:
        # `size` counts the vertical scrollbar's cells too: lines are cropped under it.
        return self.scrollable_content_region.width


def _blank(strip: Strip, start: int, end: int, marker: str, *, at_end: bool) -> Strip:
    """`strip` with cells [start, end) turned to spaces in their own styles, and `marker`
    in the last of them (`at_end`, the pane's right edge) or the first (its left edge)."""
    if end <= start:
        return strip
    blank = _spaces(strip.crop(start, end))
    style = blank[0].style if blank else None
    mark = Strip([Segment(marker, (style or Style()) + Style(dim=True))], 1)
    gap = Strip(blank, end - start)
    gap = Strip.join([gap.crop(0, end - start - 1), mark]) if at_end else Strip.join([mark, gap.crop(1)])
    # Past the right edge lie the cells under the vertical scrollbar. A terminal that
    # repaints the table's lines without the scrollbar would show them: blank them too.
    after = strip.crop(end)
    return Strip.join([strip.crop(0, start), gap, Strip(_spaces(after), after.cell_length) if at_end else after])


def _spaces(strip: Strip) -> list[Segment]:
    return [Segment(" " * cell_len(text), style) for text, style, _ in strip]
