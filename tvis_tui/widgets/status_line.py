"""The status line: run, step, phase, call n of N, and how long the call took."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tvis_tui.store import CallRecord, StepRecord
from tvis_tui.widgets.format import duration, phase_style


def status_text(run: str, call: CallRecord, total: int, step: StepRecord | None, status: str) -> Text:
    text = Text(no_wrap=True, overflow="ellipsis")
    text.append(run, style="bold")
    if status != "ok":
        text.append(f" [{status}]", style="bold red" if status == "crashed" else "yellow")
    text.append(f"  step {call.step}")
    if step is not None and step.loss is not None:
        text.append(f" (loss {step.loss:.4g})", style="dim")
    text.append("  ")
    text.append(call.phase, style=phase_style(call.phase))
    text.append(f"  call {call.seq:,} of {total:,}")
    text.append(f"  {duration(call.duration_ns)}")
    if call.nonfinite_output:
        text.append("  NaN/Inf in output", style="bold red")
    if call.error:
        text.append(f"  raised: {call.error}", style="bold red")
    return text


class StatusLine(Static):
    def show(self, run: str, call: CallRecord, total: int, step: StepRecord | None, status: str) -> None:
        self.update(status_text(run, call, total, step, status))
