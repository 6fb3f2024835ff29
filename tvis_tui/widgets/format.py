"""How numbers, durations, shapes and phases read on screen (shared by the panes)."""

from __future__ import annotations

PHASE_STYLES = {
    "data": "cyan",
    "forward": "green",
    "loss": "magenta",
    "backward": "yellow",
    "optimizer": "blue",
    "other": "white",
}


def phase_style(phase: str) -> str:
    return PHASE_STYLES.get(phase, "")


def duration(ns: int | None) -> str:
    """`1.5 µs`, `12 ms`, `3.2 s`; `running` for a call that never returned."""
    if ns is None:
        return "—"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            value = ns / scale
            return f"{value:.3g} {unit}"
    return f"{ns} ns"


def number(value: float | None, *, integer: bool = False) -> str:
    """Four significant digits; `—` when there is no finite value. `integer`: a value of
    an integer tensor (a token id, a label, a dtype's limit) in full."""
    if value is None:
        return "—"
    if integer and float(value).is_integer():
        return str(int(value))
    return f"{value:.4g}"


def shape(dims: tuple[int, ...] | None) -> str:
    if dims is None:
        return ""
    return "[" + ", ".join(str(d) for d in dims) + "]"
