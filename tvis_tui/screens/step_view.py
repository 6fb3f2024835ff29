"""One training step at a glance: the loss over every recorded step (a plotext plot, this
step marked) and what the model predicted for each sample of it, decoded as class names
or text beside the targets. `[`/`]` walk the steps; Esc goes back to the call."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from tvis_tui.store import RunReader, StepRecord
from tvis_tui.store.samples import batches, predictions
from tvis_tui.widgets.format import number
from tvis_tui.widgets.row_table import RowTable

TOP_SHOWN = 3
"""Classes shown per sample, most probable first (the record keeps up to five)."""


class StepScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,q,p", "close", "Back to the call"),
        Binding("right_square_bracket", "move(1)", "Next step"),
        Binding("left_square_bracket", "move(-1)", "Previous step"),
    ]

    def __init__(self, reader: RunReader, step: int) -> None:
        super().__init__()
        self.reader = reader
        self.step = step
        self.steps: list[StepRecord] = []  # their records (finished steps)
        self.numbers: list[int] = []  # every step of the run, as the call tree lists them

    def compose(self) -> ComposeResult:
        yield Static(id="step-title")
        yield PlotextPlot(id="loss-plot")
        yield RowTable(id="predictions")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#loss-plot").border_title = "loss per step"
        self.query_one("#predictions").border_title = "predictions"
        self.query_one(RowTable).focus()
        self.load(self.step)

    @work(thread=True, exclusive=True)
    def load(self, step: int) -> None:
        """Everything the screen shows for `step`, read off the UI thread; a load that a
        later key press replaced posts nothing."""
        if not self.numbers:
            self.numbers = self.reader.phase_steps()  # the steps the tree lists, unfinished too
        steps = self.steps or self.reader.steps()
        record = predictions(self.reader, step)
        this = next((s for s in steps if s.step == step), None)
        losses = sample_losses(self.reader, this) if this is not None else ({}, set())
        indices = dataset_indices(self.reader, step)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, step, steps, this, record, losses, indices)

    def _show(self, step: int, steps: list[StepRecord], this: StepRecord | None,
              record: dict[str, Any] | None, losses: tuple[dict[int, float], set[int]],
              indices: list[Any] | None) -> None:
        if step != self.step:
            return  # the person has moved on
        self.steps = steps
        title = Text(f"step {step}", style="bold")
        if this is not None and this.loss is not None:
            title.append(f"  loss {number(this.loss)}")
        if this is None or not this.complete:
            title.append("  unfinished", style="dim italic")
        if record is not None:
            title.append(f"  predictions from {record.get('loss', 'the loss')}", style="dim")
            title.append(_score(record))
        self.query_one("#step-title", Static).update(title)
        self._plot(steps)
        self._table(record, *losses, indices)

    def _plot(self, steps: list[StepRecord]) -> None:
        widget = self.query_one(PlotextPlot)
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        points = [(s.step, s.loss) for s in steps if s.loss is not None and math.isfinite(s.loss)]
        if points:
            plt.plot([x for x, _ in points], [y for _, y in points], marker="braille")
            here = [(x, y) for x, y in points if x == self.step]
            if here:
                plt.scatter([here[0][0]], [here[0][1]], marker="●", color="red")
        bad = [s.step for s in steps if s.loss is not None and not math.isfinite(s.loss)]
        plt.title("no finite loss recorded" if not points else
                  f"NaN/Inf loss at step {', '.join(map(str, bad[:5]))}" if bad else "")
        plt.xlabel("step")
        xs = [x for x, _ in points]
        if xs:  # steps are whole numbers: ticks at some of them, not at 1.50
            every = max(1, math.ceil(len(xs) / 10))
            plt.xticks(xs[::every])
        widget.refresh()

    def _table(self, record: dict[str, Any] | None, losses: dict[int, float], worst: set[int],
               indices: list[Any] | None) -> None:
        table = self.query_one(RowTable)
        table.clear(columns=True)
        if record is None:
            table.add_column("")
            table.add_row(Text(f"no predictions recorded for step {self.step}", style="dim italic"))
            return
        if record.get("kind") == "tokens":
            table.add_columns("#", "predicted", "target", "accuracy")
            for i, row in enumerate(record.get("samples", [])):
                table.add_row(str(i), _text(row.get("predicted"), row.get("predicted_ids")),
                              _text(row.get("target"), row.get("target_ids")),
                              Text(f"{row['accuracy']:.0%}" if "accuracy" in row else "", justify="right"))
            return
        table.add_columns("#", "sample", "target", "predicted", "", "loss")
        for i, row in enumerate(record.get("samples", [])):
            loss = Text(number(losses[i]) if i in losses else "", justify="right",
                        style="bold red" if i in worst else "")
            index = str(indices[i]) if indices is not None and i < len(indices) else ""
            table.add_row(str(i), Text(index, style="dim", justify="right"), *_class_cells(row), loss)

    def action_move(self, delta: int) -> None:
        if self.step + delta not in self.numbers:
            self.app.bell()
            self.notify(f"no {'later' if delta > 0 else 'earlier'} step", timeout=2)
            return
        self.step += delta
        self.load(self.step)

    def action_close(self) -> None:
        self.dismiss()


def sample_losses(reader: RunReader, step: StepRecord) -> tuple[dict[int, float], set[int]]:
    """Each sample's loss by its position in the batch (when the per-sample values were
    stored, else the highest few the step record keeps), and the positions of those."""
    summary = step.extra.get("per_sample_loss")
    if not isinstance(summary, dict):
        return {}, set()
    worst = {int(pos): float(value) for pos, value in summary.get("worst", [])}
    slot = next((s for s in reader.slots(summary["seq"], "per_sample") if s.path == "per_sample"), None)
    values = reader.values(summary["seq"], slot) if slot is not None and slot.has_values else None
    losses = {i: float(v) for i, v in enumerate(values.reshape(-1))} if values is not None else dict(worst)
    return losses, set(worst)


def dataset_indices(reader: RunReader, step: int) -> list[Any] | None:
    """The dataset index of each position of the step's batch, when one DataLoader batch
    made the step (with several, positions no longer say which batch a row came from)."""
    drawn = [b for b in batches(reader, step) if isinstance(b.get("indices"), list)]
    return drawn[0]["indices"] if len(drawn) == 1 else None


def _score(record: dict[str, Any]) -> str:
    """How many samples the top prediction got right (classes), or the mean token accuracy."""
    rows = record.get("samples", [])
    if record.get("kind") == "tokens":
        scores = [r["accuracy"] for r in rows if "accuracy" in r]
        return f"  token accuracy {sum(scores) / len(scores):.0%}" if scores else ""
    judged = [r["correct"] for r in rows if "correct" in r]
    return f"  {sum(judged)} of {len(judged)} right" if judged else ""


def _class_cells(row: dict[str, Any]) -> list[Text]:
    """Target, the top classes with their probabilities, and whether the first is right."""
    top = Text(no_wrap=True)
    for j, (label, _, prob) in enumerate(row.get("top", [])[:TOP_SHOWN]):
        top.append(("  " if j else "") + f"{label} {prob:.0%}", style="bold" if j == 0 else "dim")
    if row.get("ignored"):
        return [Text("ignored", style="dim italic"), top, Text("")]
    target = Text(str(row.get("target", "")))
    if "correct" not in row:
        return [target, top, Text("")]
    mark = Text("✓", style="green") if row["correct"] else Text("✗", style="bold red")
    return [target, top, mark]


def _text(decoded: str | None, ids: list[int] | None) -> Text:
    """Decoded text as it reads (newlines shown as ⏎), else the ids."""
    if decoded is not None:
        return Text(decoded.replace("\n", "⏎"), no_wrap=True)
    return Text(" ".join(map(str, ids or [])), style="dim", no_wrap=True)
