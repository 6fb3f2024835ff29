"""What a step measured: its time by phase and its peak memory with the phase it peaked
in, then how (tvis's own time left out of the times; what the peak counts). The fields
are the step record's (docs/store-format.md, steps)."""

from __future__ import annotations

from rich.text import Text

from tvis_tui.store import StepRecord
from tvis_tui.store.records import PHASES
from tvis_tui.store.listing import byte_unit, human_bytes
from tvis_tui.widgets.format import duration, phase_style, time_unit


def step_measures(step: StepRecord) -> Text:
    return Text("\n").join([_time_line(step), _memory_line(step), _how(step)])


def _time_line(step: StepRecord) -> Text:
    """`time 37.6 ms  data 3.31  forward 16.9 ... ms`: the phases in the total's unit;
    each in its own where one is too small for it (`time 3 s  forward 117 µs ...`,
    never `forward 0.000117`)."""
    wall = step.extra.get("wall_ns")
    line = Text("time ", style="bold")
    if not isinstance(wall, int):
        return line.append("not measured", style="dim")
    line.append(duration(wall))
    unit, scale = time_unit(wall)
    phases = [(phase, step.phase_ns[phase]) for phase in PHASES if step.phase_ns.get(phase)]
    own_units = any(_too_small(ns / scale) for _, ns in phases)
    for phase, ns in phases:
        line.append("  ")
        line.append(phase, style=phase_style(phase))
        line.append(f" {duration(ns) if own_units else _short(ns / scale)}")
    if not own_units:
        line.append(f" {unit}")
    if step.extra.get("phase_clock"):
        line.append(f" ({step.extra['phase_clock']})", style="dim")
    return line


def _too_small(value: float) -> bool:
    """Below what three digits after the point show without an exponent."""
    return 0 < value < 0.001


def _short(value: float) -> str:
    """Three significant digits, never an exponent: 0.255, 16.9, 1.00, 1234."""
    return f"{value:.0f}" if value >= 99.95 else f"{value:#.3g}"


def _memory_line(step: StepRecord) -> Text:
    """`peak memory 5.6 MiB in backward (data 0.132, forward 5.13 ... MiB)`: the phases
    in the peak's unit (`1.3 KiB ... (forward 0.648 KiB)`, never `0.000648 MiB`)."""
    line = Text("peak memory ", style="bold")
    if step.peak_bytes is None:
        return line.append("not measured", style="dim")
    line.append(human_bytes(step.peak_bytes))
    phases = step.extra.get("peak_phase_bytes")
    if isinstance(phases, dict) and phases:
        top = max(phases, key=lambda p: phases[p])
        line.append(" in ")
        line.append(top, style=phase_style(top))
        unit, scale = byte_unit(step.peak_bytes)
        shown = [p for p in PHASES if p in phases and p != top]
        if shown:
            own_units = any(_too_small(phases[p] / scale) for p in shown)
            others = ", ".join(f"{p} {human_bytes(phases[p]) if own_units else _short(phases[p] / scale)}"
                               for p in shown)
            line.append(f" ({others}{'' if own_units else ' ' + unit})", style="dim")
    return line



def _how(step: StepRecord) -> Text:
    parts = []
    own = step.extra.get("tvis_overhead_ns")
    if isinstance(own, int):
        parts.append(f"tvis's own {duration(own)} left out of the times")
    method = step.extra.get("peak_method")
    if method:  # without its list of what it counts (`tvis export` has it, and the RSS)
        parts.append(f"peak: {str(method).split(':')[0]}")
    return Text("; ".join(parts), style="dim")
