"""How numbers, durations, shapes and phases read on screen (shared by the panes)."""

from __future__ import annotations

PHASE_STYLES = {
    "data": "cyan",
    "forward": "green",
    "loss": "magenta",
    "backward": "yellow",
    "optimizer": "blue",
    "no_grad": "bright_black",
    "other": "white",
}


def phase_style(phase: str) -> str:
    return PHASE_STYLES.get(phase, "")


def duration(ns: int | None) -> str:
    """`1.5 µs`, `12 ms`, `3.2 s`; `running` for a call that never returned."""
    if ns is None:
        return "—"
    unit, scale = time_unit(ns)
    return f"{ns / scale:.3g} {unit}" if scale > 1 else f"{ns} ns"


def time_unit(ns: int) -> tuple[str, float]:
    """The unit `ns` reads best in. A value that three digits round up to 1000 takes the
    next unit: 999.9 ms is "1 s", never "1e+03 ms"."""
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale * 0.9995:
            return unit, scale
    return "ns", 1.0


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
    return "[" + ", ".join(str(d) if d >= 0 else "ragged" for d in dims) + "]"


def short_path(name: str, width: int) -> str:
    """`name` (`Model.blocks.0.conv1.weight`) within `width`: its last parts, which tell
    the parameters of a layer apart, after a `…`."""
    if len(name) <= width:
        return name
    kept = name[-(width - 1):]
    dot = kept.find(".")
    return "…" + (kept[dot + 1:] if 0 <= dot < len(kept) - 1 else kept)
