"""A 2-D slice of a tensor's stored values, drawn a screenful at a time (Line API)."""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

CELL = 11
"""Characters per value: `-1.234e+05` plus a space."""


def parse_index(text: str, ndim: int) -> tuple[int | slice, ...]:
    """`0, :, 2:8:2` -> (0, slice(None), slice(2, 8, 2)). Never evaluates code."""
    parts = [p.strip() for p in text.strip().strip("[]()").split(",")] if text.strip() else []
    if len(parts) > ndim:
        raise ValueError(f"{len(parts)} indices for {ndim} dimensions")
    out: list[int | slice] = []
    for part in parts:
        if ":" in part:
            bits = part.split(":")
            if len(bits) > 3:
                raise ValueError(f"bad slice {part!r}")
            out.append(slice(*(int(b) if b.strip() else None for b in bits)))
        elif part.lstrip("-").isdigit():
            out.append(int(part))
        else:
            raise ValueError(f"bad index {part!r}: use numbers and slices like 0, :, 2:8")
    return tuple(out)


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


class ValuesGrid(ScrollView, can_focus=True):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.matrix = np.zeros((0, 0))

    def show(self, view: np.ndarray) -> None:
        """`view` has at most two dimensions; a vector shows as one column."""
        # Explicit shapes: reshape(n, -1) cannot infer -1 for an empty view.
        self.matrix = view if view.ndim == 2 else view.reshape(-1, 1) if view.ndim == 1 else view.reshape(1, 1)
        rows, cols = self.matrix.shape
        self.virtual_size = Size(self._label_width() + cols * CELL, rows + 1)
        self.scroll_to(0, 0, animate=False, immediate=True)
        self.refresh()

    def _label_width(self) -> int:
        return len(str(max(0, self.matrix.shape[0] - 1))) + 2

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        rows, cols = self.matrix.shape
        first_col = int(self.scroll_x) // CELL
        ncols = min(cols - first_col, width // CELL + 1)
        label = self._label_width()
        if y == 0:
            text = Text(" " * label + "".join(f"{c:>{CELL - 1}} " for c in range(first_col, first_col + ncols)),
                        style="bold")
        else:
            row = int(self.scroll_y) + y - 1
            if row >= rows:
                return Strip.blank(width, self.rich_style)
            text = Text(f"{row:>{label - 2}}  ", style="bold")
            for value in self.matrix[row, first_col : first_col + ncols]:
                text.append(f"{_cell(value):>{CELL - 1}} ", style="bold red" if _bad(value) else "")
        text.truncate(width, pad=True)
        return Strip(Segment.apply_style(text.render(self.app.console), self.rich_style), width)


def _cell(value: object) -> str:
    if isinstance(value, (np.floating, float)):
        return f"{float(value):.4g}"
    return str(value)


def _bad(value: object) -> bool:
    return isinstance(value, (np.floating, float)) and not np.isfinite(value)
