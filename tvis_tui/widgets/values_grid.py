"""A 2-D slice of a tensor's stored values, drawn a screenful at a time (Line API)."""

from __future__ import annotations

import re

import numpy as np
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

FLOAT_WIDTH = 10
"""Characters of the longest `.4g` float below 1e100 in magnitude: `-1.234e+05`, `-0.0001234`."""

GAP = 1
"""Spaces after each value, so right-aligned neighbours never touch."""


def parse_index(text: str, shape: tuple[int, ...]) -> tuple[int | slice, ...]:
    """`0, :, 2:8:2` -> (0, slice(None), slice(2, 8, 2)) for a tensor of `shape`; `...`
    stands for as many `:` as the other indices leave. Never evaluates code. Raises
    ValueError with a one-line reason a person can act on (never numpy's own message)."""
    parts = [p.strip() for p in text.strip().strip("[]()").split(",")] if text.strip() else []
    ndim = len(shape)
    if parts.count("...") > 1:
        raise ValueError("one ... at most")
    if "..." in parts:
        at = parts.index("...")
        parts[at:at + 1] = [":"] * max(ndim - len(parts) + 1, 0)
    if len(parts) > ndim:
        raise ValueError(f"{len(parts)} indices for {ndim} dimensions {list(shape)}")
    return tuple(_index_part(part, dim, size) for dim, (part, size) in enumerate(zip(parts, shape)))


def _index_part(part: str, dim: int, size: int) -> int | slice:
    if ":" in part:
        bits = part.split(":")
        if len(bits) > 3:
            raise ValueError(f"bad slice {part!r}: start:stop or start:stop:step")
        start, stop, step = (*(_integer(b, part) if b.strip() else None for b in bits), None)[:3]
        if step == 0:
            raise ValueError(f"bad slice {part!r}: the step cannot be 0")
        return slice(start, stop, step)
    index = _integer(part, part)
    if not -size <= index < size:
        raise ValueError(f"index {index} is out of range for dimension {dim} of size {size} "
                         f"({-size} to {size - 1})")
    return index


def _integer(text: str, part: str) -> int:
    text = text.strip()
    if not re.fullmatch(r"-?[0-9]{1,18}", text):
        raise ValueError(f"bad index {part!r}: use numbers, slices and ... like 0, :, 2:8, ...")
    return int(text)


def format_index(index: tuple[int | slice, ...], ndim: int) -> str:
    parts = [str(i) if isinstance(i, int) else _slice_text(i) for i in index]
    parts += [":"] * (ndim - len(parts))
    return "[" + ", ".join(parts) + "]"


def _slice_text(s: slice) -> str:
    text = f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}"
    return text + (f":{s.step}" if s.step is not None else "")


def default_index(ndim: int) -> tuple[int | slice, ...]:
    """The first matrix: index every leading dimension at 0."""
    return tuple([0] * max(0, ndim - 2))


def view_labels(index: tuple[int | slice, ...], shape: tuple[int, ...]) -> tuple[range, range]:
    """The tensor's own indices along the grid's rows and columns for `array[index]`, so
    x[2:5] labels its rows 2, 3, 4. A vector is drawn as one column: its indices label the
    rows and the integer index that picked it (x[:, 7] → 7) labels the column; a scalar
    is that vector's cell, labelled by the last two integer indices."""
    kept: list[range] = []
    picked = [range(1), range(1)]  # 0 where no integer index picked the vector or scalar
    for dim, size in enumerate(shape):
        item = index[dim] if dim < len(index) else slice(None)
        if isinstance(item, slice):
            kept.append(range(size)[item])
        else:
            picked.append(range(item % size, item % size + 1))
    if len(kept) >= 2:
        return kept[0], kept[1]
    if kept:
        return kept[0], picked[-1]
    return picked[-1], picked[-2]


def value_width(matrix: np.ndarray) -> int:
    """Characters the widest formatted value of `matrix` takes, without formatting each one
    (a stored tensor can hold millions): ints from their extremes, floats from a bound."""
    if matrix.size == 0:
        return 1
    kind = matrix.dtype.kind
    if kind in "iu":
        return max(len(str(matrix.min())), len(str(matrix.max())))
    if kind == "b":
        return len("False")
    if kind == "f":
        return _float_width(matrix)
    return max(len(_cell(v)) for v in matrix.flat)


def _float_width(matrix: np.ndarray) -> int:
    """FLOAT_WIDTH, plus one for a three-digit exponent (`-1.235e+100`; float64 only)."""
    finite = matrix[np.isfinite(matrix) & (matrix != 0)]
    if finite.size == 0:
        return FLOAT_WIDTH
    magnitude = np.abs(finite.astype(np.float64))
    # 9.9995e99 rounds up to 1e+100 at 4 significant digits.
    return FLOAT_WIDTH + int(magnitude.max() >= 9.9995e99 or magnitude.min() < 1e-99)


class ValuesGrid(ScrollView, can_focus=True):
    """Rows and columns labelled with the tensor's own indices; every column as wide as the
    widest value of the view, and ←/→ move one column at a time."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.matrix = np.zeros((0, 0))
        self.rows, self.cols = range(0), range(0)
        self.cell = FLOAT_WIDTH + GAP
        self.label_width = 3

    def show(self, view: np.ndarray, rows: range | None = None, cols: range | None = None) -> None:
        """`view` has at most two dimensions; a vector shows as one column. `rows` and `cols`
        are the tensor indices to label them with (0, 1, 2… when not given)."""
        # Explicit shapes: reshape(n, -1) cannot infer -1 for an empty view.
        self.matrix = view if view.ndim == 2 else view.reshape(-1, 1) if view.ndim == 1 else view.reshape(1, 1)
        nrows, ncols = self.matrix.shape
        self.rows = range(nrows) if rows is None else rows
        self.cols = range(ncols) if cols is None else cols
        self.cell = max(value_width(self.matrix), _widest(self.cols)) + GAP
        self.label_width = _widest(self.rows) + 2  # row labels, right-aligned, then two spaces
        self.virtual_size = Size(self.label_width + ncols * self.cell, nrows + 1)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def _columns_that_fit(self) -> int:
        return max(1, (self.scrollable_content_region.width - self.label_width) // self.cell)

    def _first_column(self) -> int:
        """The leftmost column shown. Scrolled fully right, the last column is whole on screen
        (a scroll position in characters would leave it cut at the edge)."""
        last_start = max(0, self.matrix.shape[1] - self._columns_that_fit())
        x = self.scroll_offset.x
        return last_start if x >= self.max_scroll_x else min(x // self.cell, last_start)

    def action_scroll_left(self) -> None:
        self._scroll_to_column(self._first_column() - 1)

    def action_scroll_right(self) -> None:
        self._scroll_to_column(self._first_column() + 1)

    def _scroll_to_column(self, column: int) -> None:
        """One key press moves one tensor column, not one character."""
        last_start = max(0, self.matrix.shape[1] - self._columns_that_fit())
        x = self.max_scroll_x if column >= last_start else max(0, column) * self.cell
        self.scroll_to(x=x, animate=False)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        first = self._first_column()
        # Whole columns only: a value cut at the edge reads as another number (1.927e-05 as
        # 1.927); the scrollbar tells there is more.
        shown = range(first, min(self.matrix.shape[1], first + self._columns_that_fit()))
        # scroll_offset is the rounded position the scrollbar shows; int() of a position caught
        # mid-animation (27.6) drew one row short and hid the last row at the bottom.
        row = self.scroll_offset.y + y - 1
        if y == 0:
            text = self._header(shown)
        elif row < self.matrix.shape[0]:
            text = self._row(row, shown)
        else:
            return Strip.blank(width, self.rich_style)
        text.truncate(width, pad=True)
        return Strip(Segment.apply_style(text.render(self.app.console), self.rich_style), width)

    def _header(self, shown: range) -> Text:
        labels = "".join(f"{self.cols[c]:>{self.cell - GAP}}" + " " * GAP for c in shown)
        return Text(" " * self.label_width + labels, style="bold")

    def _row(self, row: int, shown: range) -> Text:
        text = Text(f"{self.rows[row]:>{self.label_width - 2}}  ", style="bold")
        for value in self.matrix[row, shown.start : shown.stop]:
            cell = f"{_cell(value):>{self.cell - GAP}}" + " " * GAP
            text.append(cell, style="bold red" if _bad(value) else "")
        return text


def _widest(labels: range) -> int:
    """Characters of the longest label; a range's largest value is at one of its ends."""
    return len(str(max(labels[0], labels[-1]))) if labels else 1


def _cell(value: object) -> str:
    if isinstance(value, (np.floating, float)):
        return f"{float(value):.4g}"
    return str(value)


def _bad(value: object) -> bool:
    return isinstance(value, (np.floating, float)) and not np.isfinite(value)
