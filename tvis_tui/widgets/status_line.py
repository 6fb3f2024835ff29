"""The status line: run, step, phase, call n of N, and how long the call took."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widget import Widget

from tvis_tui.store import CallRecord, StepRecord
from tvis_tui.store.step_details import graph_cuts, loss_label
from tvis_tui.widgets.format import duration, phase_style


def status_text(run: str, call: CallRecord, total: int, step: StepRecord | None, status: str,
                nonfinite_grad: bool = False) -> Text:
    """Run, status, step, phase, call n of N, NaN/Inf, duration. For a call that raised, its
    message comes right after the call's number and the run's name is left out (the tree's
    title shows it): what does not fit is cut off at the end, and the message and a NaN/Inf
    must not be."""
    text = Text(no_wrap=True, overflow="ellipsis")
    if not call.error:
        text.append(run, style="bold")
    if status != "ok":
        text.append(f"{' ' if text else ''}[{status}]", style="bold red" if status == "crashed" else "yellow")
    if call.error:
        text.append(f"{'  ' if text else ''}call {call.seq:,} of {total:,}")
        text.append(f"  raised: {_first_line(call.error)}", style="bold red")
    text.append(f"  step {call.step}")
    loss = loss_label(step)
    if loss is not None:
        text.append(f" (loss {loss})", style="dim")
    text.append("  ")
    text.append(call.phase, style=phase_style(call.phase))
    if not call.error:
        text.append(f"  call {call.seq:,} of {total:,}")
    if call.nonfinite_output:
        text.append("  NaN/Inf in output", style="bold red")
    elif nonfinite_grad:
        text.append("  NaN/Inf in gradient", style="bold red")
    if call.extra.get("eval_while_training") is True:  # record/mode_layers.py
        text.append("  eval mode while training", style="bold yellow")
    _batch_dim(text, call.extra.get("batch_dim_mismatch"))
    if call.extra.get("graph_cut") is True:  # record/calls.py: detached, or through numpy
        # Not bold: a metric's output needs no gradient. The optimizer step names the cut
        # where parameters got none.
        text.append("  output cut from the graph (its input requires grad)", style="yellow")
    _no_grad(text, call.extra, graph_cuts(step))
    if call.extra.get("clip_grads") == 0 and call.extra.get("clip_params"):  # clip_grad_norm_ too early
        text.append("  no gradient to clip (before backward?)", style="bold yellow")
    # Gradients computed and never applied (they never train); gradients an earlier step
    # applied, applied again.
    for key, noun, what in (("not_stepped_count", "param", "in no optimizer"),
                            ("not_zeroed_count", "grad", "not zeroed")):
        n = call.extra.get(key)
        if isinstance(n, int) and n > 0:
            text.append(f"  {n} {noun}{'s' if n > 1 else ''} {what}", style="bold yellow")
    text.append(f"  {duration(call.duration_ns)}")
    backward_ns = call.extra.get("backward_ns")
    if isinstance(backward_ns, int):
        text.append("  backward ", style=phase_style("backward"))
        text.append(duration(backward_ns))
    if call.error and (status == "crashed" or "error_text" in call.extra):
        text.append("  x: whole exception", style="dim")
    return text


def _no_grad(text: Text, extra: dict, cuts: list[tuple[int, str]]) -> None:
    """An optimizer step's parameters without a gradient: those that required one first (a
    layer the loss does not reach, by mistake; where a call of the step cut the graph, the
    first such call), then the frozen ones (fine-tuning freezes thousands on purpose: said,
    not flagged)."""
    missing, frozen = extra.get("no_grad_count"), extra.get("no_grad_frozen_count")
    if not isinstance(missing, int) or missing <= 0:
        return
    frozen = frozen if isinstance(frozen, int) and 0 <= frozen <= missing else 0
    if missing > frozen:
        n = missing - frozen
        text.append(f"  {n} param{'s' if n > 1 else ''} got no gradient", style="bold yellow")
        if cuts:
            text.append(f" (graph cut at {cuts[0][1]}, call {cuts[0][0]:,}?)", style="yellow")
    if frozen:
        text.append(f"  {frozen} frozen", style="dim")


def _batch_dim(text: Text, mismatch: Any) -> None:
    """A recurrent layer fed its batch on the dimension it reads as time
    (record/module_config.py)."""
    if not isinstance(mismatch, dict) or not isinstance(mismatch.get("shape"), list) \
            or len(mismatch["shape"]) != 3 or type(mismatch.get("batch")) is not int:
        return
    first = mismatch.get("batch_first") is True
    steps, sequences = (mismatch["shape"][1], mismatch["shape"][0]) if first else mismatch["shape"][:2]
    text.append(f"  batch_first={first}, but the batch ({mismatch['batch']}) is dim {1 if first else 0} of "
                f"{mismatch['shape']}: read as {sequences} sequences of {steps} steps", style="bold yellow")


def _first_line(message: str) -> str:
    lines = message.strip().splitlines()
    return lines[0] + (" …" if len(lines) > 1 else "") if lines else "(no message)"


class StatusLine(Widget):
    """One line of fixed height: updating it repaints the line and never re-lays out the
    screen (a `Static.update` would, on every step)."""

    DEFAULT_CSS = "StatusLine { height: 1; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = Text()

    def render(self) -> Text:
        return self.text

    def show(self, run: str, call: CallRecord, total: int, step: StepRecord | None, status: str,
             nonfinite_grad: bool = False) -> None:
        self.update(status_text(run, call, total, step, status, nonfinite_grad))

    def update(self, text: Text | str) -> None:
        self.text = Text(text, no_wrap=True, overflow="ellipsis") if isinstance(text, str) else text
        self.refresh()
