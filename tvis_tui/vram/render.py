"""The estimate as Rich renderables (breakdown table, GPU bar, verdict, suggestions) and as
the JSON document `--format json` prints."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tvis_tui.vram.estimate import PARTS, Estimate
from tvis_tui.vram.gpus import GIB, GPUS
from tvis_tui.vram.suggest import Suggestion
from tvis_tui.vram.verdict import Verdict

COLOURS = {"parameters": "blue", "gradients": "magenta", "optimizer_state": "yellow",
           "activations": "green", "workspace": "cyan", "cuda_context": "bright_black",
           "allocator_overhead": "white"}
VERDICT_STYLE = {"fits": "bold green", "tight": "bold yellow", "does not fit": "bold red"}
BAR_WIDTH = 60


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def breakdown_table(breakdown: dict[str, int]) -> Table:
    total = sum(breakdown.values()) or 1
    table = Table(box=None, pad_edge=False, header_style="bold")
    table.add_column("part")
    table.add_column("memory", justify="right")
    table.add_column("share", justify="right")
    for part in PARTS:
        value = breakdown.get(part, 0)
        table.add_row(Text("■ ", style=COLOURS[part]) + Text(part.replace("_", " ")), gib(value),
                      f"{100 * value / total:.0f}%")
    table.add_row(Text("peak", style="bold"), Text(gib(total), style="bold"), "")
    return table


def gpu_bar(breakdown: dict[str, int], verdict: Verdict, width: int = BAR_WIDTH) -> Text:
    """The parts laid along the GPU's usable memory; `|` marks the limit when the peak
    goes past it."""
    usable = verdict.gpu.usable_bytes
    scale = max(usable, verdict.peak_bytes) / width
    bar = Text()
    used = 0
    for part in PARTS:
        cells = round((used + breakdown.get(part, 0)) / scale) - round(used / scale)
        bar.append("█" * cells, style=COLOURS[part])
        used += breakdown.get(part, 0)
    free = width - bar.cell_len
    if free > 0:
        bar.append("░" * free, style="bright_black")
    if verdict.peak_bytes > usable:
        limit = round(usable / scale)
        bar = bar[:limit] + Text("|", style="bold red") + bar[limit:]
    return Text(f"{verdict.gpu.name} ", style="bold") + bar + Text(f" {gib(usable)} usable")


def verdict_line(verdict: Verdict, confidence: str) -> Text:
    line = Text(verdict.word, style=VERDICT_STYLE[verdict.word])
    head = verdict.headroom_bytes
    line.append(f": peak {gib(verdict.peak_bytes)} of {gib(verdict.gpu.usable_bytes)} usable, "
                f"{'headroom' if head >= 0 else 'short by'} {gib(abs(head))}"
                f"  (confidence: {confidence})")
    return line


def suggestions_block(suggestions: list[Suggestion], verdict: Verdict) -> RenderableType:
    if not suggestions:
        return Text("no change found that saves memory", style="dim")
    table = Table(box=None, pad_edge=False, header_style="bold", title_justify="left")
    for name, justify in (("#", "right"), ("change", "left"), ("saves", "right"),
                          ("line", "right"), ("peak after", "right")):
        table.add_column(name, justify=justify)
    for i, s in enumerate(suggestions, 1):
        fits = s.peak_after <= verdict.gpu.usable_bytes
        table.add_row(str(i), Text(s.change), gib(s.saves_bytes), str(s.line or "-"),
                      Text(gib(s.peak_after), style="green" if fits else ""))
    return table


def report(estimate: Estimate, verdict: Verdict, suggestions: list[Suggestion],
           title: str) -> Group:
    parts: list[RenderableType] = [Text(title, style="bold"), breakdown_table(estimate.breakdown),
                                   Text(f"peak reached at: {estimate.phase}", style="dim"),
                                   Text(""), gpu_bar(estimate.breakdown, verdict),
                                   verdict_line(verdict, estimate.confidence)]
    parts.extend(Text(f"note: {note}", style="yellow") for note in estimate.notes)
    parts.append(Text(""))
    if estimate.read:
        parts.append(Text("read from the script:", style="bold"))
        parts.extend(Text(f"  {item}") for item in estimate.read)
    if estimate.assumptions:
        parts.append(Text("assumed:", style="bold yellow"))
        parts.extend(Text(f"  {item}") for item in estimate.assumptions)
    parts.append(Text(""))
    parts.append(Text("suggestions:", style="bold"))
    parts.append(suggestions_block(suggestions, verdict))
    return Group(*parts)


def as_json(estimate: Estimate, verdict: Verdict, suggestions: list[Suggestion]) -> dict[str, Any]:
    return {
        "peak_bytes": estimate.peak_bytes,
        "breakdown": {part: estimate.breakdown.get(part, 0) for part in PARTS},
        "fits": verdict.fits,
        "gpu": {"key": verdict.gpu.key, "name": verdict.gpu.name,
                "usable_bytes": verdict.gpu.usable_bytes, "verdict": verdict.word,
                "headroom_bytes": verdict.headroom_bytes},
        "read": list(estimate.read),  # what the text report lists as read from the script
        "assumptions": list(estimate.assumptions),
        "confidence": estimate.confidence,
        "notes": list(estimate.notes),
        "suggestions": [{"change": s.change, "saves_bytes": s.saves_bytes, "line": s.line or None,
                         "peak_after_bytes": s.peak_after} for s in suggestions],
    }


def gpus_table() -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in (("gpu", "left"), ("name", "left"), ("memory", "right"),
                          ("usable", "right"), ("kind", "left"), ("also", "left")):
        table.add_column(name, justify=justify)
    for gpu in GPUS:
        table.add_row(gpu.key, gpu.name, f"{gpu.memory_gib:g} GB", gib(gpu.usable_bytes),
                      gpu.kind, ", ".join(gpu.aliases))
    return table
