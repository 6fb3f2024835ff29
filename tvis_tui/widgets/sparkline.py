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


def _resample(counts: list[int], width: int) -> list[int]:
    """Sum neighbouring bins down to `width` (never stretches a short histogram)."""
    if len(counts) <= width:
        return counts
    out = [0] * width
    for i, c in enumerate(counts):
        out[i * width // len(counts)] += c
    return out
