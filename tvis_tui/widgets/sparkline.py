"""A histogram as a one-line sparkline: a Rich renderable, usable in the CLI and the TUI."""

from __future__ import annotations

from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"
"""Nine heights: an empty bin is a space, any non-empty bin at least one eighth."""


def sparkline(counts: tuple[int, ...] | list[int], width: int = 16, style: str = "green") -> Text:
    """`counts` resampled to `width` cells, each as tall as its share of the largest."""
    if not counts or width <= 0:
        return Text("")
    cells = _resample(list(counts), width)
    top = max(cells)
    if top <= 0:
        return Text(" " * len(cells))
    chars = [BLOCKS[0] if c <= 0 else BLOCKS[max(1, round(c / top * 8))] for c in cells]
    return Text("".join(chars), style=style, no_wrap=True)


def _resample(counts: list[int], width: int) -> list[float]:
    """Bins merged down to `width` cells (never stretched), each bin's count shared among
    the cells it overlaps by the overlap: 32 bins in 12 cells would otherwise put three
    bins in some cells and two in others, and a flat histogram would look striped. The
    price: one full bin that straddles two cells draws as two shorter ones (`█▄`)."""
    n = len(counts)
    if n <= width:
        return [float(c) for c in counts]
    out = [0.0] * width
    for i, c in enumerate(counts):
        # Bin i covers [i * width, (i + 1) * width) in units of 1/n of a cell.
        start, end = i * width, (i + 1) * width
        cell = start // n
        while start < end:
            boundary = min((cell + 1) * n, end)
            out[cell] += c * (boundary - start) / width
            start, cell = boundary, cell + 1
    return out
