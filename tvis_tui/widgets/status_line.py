"""The status line: run, step, phase, call n of N, and how long the call took."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

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


class StatusLine(Widget):
    """One line of fixed height: updating it repaints the line and never re-lays out the
    screen (a `Static.update` would, on every step)."""

    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def render(self) -> Text:
        return self.text

    def show(self, run: str, call: CallRecord, total: int, step: StepRecord | None, status: str) -> None:
        self.update(status_text(run, call, total, step, status))

    def update(self, text: Text | str) -> None:
        self.text = Text(text, no_wrap=True, overflow="ellipsis") if isinstance(text, str) else text
        self.refresh()
