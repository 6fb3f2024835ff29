"""One training step at a glance: its time by phase and peak memory; the loss (or the step
time, or the peak memory: `m`) over every recorded step, a plotext plot with this step
marked; what the model predicted for each sample of it, decoded as class names or text
beside the targets; and the selected sample as the data pipeline made it (images drawn).
`[`/`]` walk the steps; Esc goes back to the call."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static
from textual.worker import get_current_worker
from textual_plotext import PlotextPlot

from tvis_tui.store import RunReader, StepRecord
from tvis_tui.store.listing import byte_unit
from tvis_tui.store.model_parts import told_apart
from tvis_tui.store.parameters import optimizer_calls, step_lrs
from tvis_tui.store.samples import batch_tokens_of, predictions, samples
from tvis_tui.store.step_details import (broadcast_shapes, chance_loss, eval_layers, fed_probabilities,
                                         loss_label, loss_seq_of, optimizer_losses, sample_losses,
                                         step_batch)
from tvis_tui.widgets.format import number, time_unit
from tvis_tui.widgets.row_table import RowTable
from tvis_tui.widgets.sample_pane import SamplePane
from tvis_tui.widgets.step_measures import step_measures

TOP_SHOWN = 3
"""Classes shown per sample, most probable first (the record keeps up to five)."""

PLOTTED: dict[str, tuple[str, Callable[[StepRecord], float | None], Callable[[float], tuple[str, float]]]] = {
    "loss": ("loss per step", lambda s: s.loss, lambda _: ("", 1.0)),
    "time": ("step time per step ({unit}, tvis's own time left out)",
             lambda s: s.extra["wall_ns"] if isinstance(s.extra.get("wall_ns"), int) else None,
             lambda most: time_unit(int(most)) if most else ("ms", 1e6)),
    "memory": ("peak memory per step ({unit})", lambda s: s.peak_bytes,
               lambda most: byte_unit(int(most)) if most else ("MiB", 2**20)),
}
"""What `m` cycles the plot through: its title, each complete step's value (an
unfinished step, as the last draw that found the data exhausted, measured no step), and
the unit the largest value reads in (ns and bytes: 308 B is not plotted as 0.000294 MiB)."""

FROM_ZERO = {"time", "memory"}
"""Amounts plotted from 0: on an axis fitted to the values, 5.63 to 5.71 MiB (1%) looked
like a cliff (sweep M). A loss is not an amount: its axis fits its values."""


LOG_SPAN = 1000
"""Positive values whose largest is this many times their smallest are plotted on a
logarithmic axis."""


LONG_LABELS = 1e5
"""From this size on, plotext's own tick labels print every digit (17528994190589952.0)."""


def y_ticks(lo: float, hi: float, log: bool, count: int = 3) -> tuple[list[float], list[str]]:
    """`count` ticks from `lo` to `hi`, evenly spaced (in log10 on a log axis), labelled
    with 3 significant digits, or as many more as tell them apart (120500 to 121300 MiB).
    Few, so that each gets a row of its own in a short plot (plotext puts a tick on the
    nearest row, and one may hide another)."""
    if hi <= lo:
        return [lo], [f"{lo:.3g}"]
    if log:
        a, b = math.log10(lo), math.log10(hi)
        values = [10 ** (a + (b - a) * i / (count - 1)) for i in range(count)]
    else:
        values = [lo + (hi - lo) * i / (count - 1) for i in range(count)]
    for digits in range(3, 16):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(labels):
            break
    return values, labels


@dataclass(frozen=True)
class _Loaded:
    """What `load` read for one step, handed to the UI thread."""

    step: int
    steps: list[StepRecord]
    this: StepRecord | None  # the step's record, if it finished
    record: dict[str, Any] | None  # its decoded predictions
    losses: tuple[dict[int, float], set[int], int | None]  # sample_losses'
    batch: dict[str, Any] | None
    drawn: dict[int, dict[str, Any]]  # the batch's sample records by position
    lrs: list[float]
    evaluating: list[str]  # layers trained in eval mode
    chance: tuple[float, str] | None  # chance_loss'


class StepScreen(Screen[None]):
    HELP_SECTIONS = ("Step view",)  # help lists these first
    BINDINGS = [
        Binding("escape,q,p", "close", "Back to the call"),
        Binding("right_square_bracket", "move(1)", "Next step"),
        Binding("left_square_bracket", "move(-1)", "Previous step"),
        Binding("m", "next_plot", "Plot loss/time/memory"),
    ]

    def __init__(self, reader: RunReader, step: int) -> None:
        super().__init__()
        self.reader = reader
        self.step = step
        self.steps: list[StepRecord] = []  # their records (finished steps)
        self.numbers: list[int] = []  # every step of the run, as the call tree lists them
        self.batch: dict[str, Any] | None = None  # the step's DataLoader batch, when one made it
        self.samples: dict[int, dict[str, Any]] = {}  # its sample records by position
        # Rows of the predictions table per sample of the batch: 1, or a sequence's tokens
        # or an image's pixels; None when the rows do not divide into the batch's samples.
        self.per_sample: int | None = 1
        self.record_leading: int | None = None  # the predictions' logits' first dimension
        self.record: dict[str, Any] | None = None  # the step's decoded predictions
        self.chance: tuple[float, str] | None = None  # the loss of a model that learned nothing
        self.plotted = "loss"  # a key of PLOTTED

    def compose(self) -> ComposeResult:
        yield Static(id="step-title")
        yield Static(id="step-measures")
        yield PlotextPlot(id="loss-plot")
        with Horizontal(id="step-body"):
            yield RowTable(id="predictions")
            yield SamplePane(id="sample")
        yield Footer()

    def on_mount(self) -> None:
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
        loss_seq = record.get("loss_seq") if record is not None else None
        batch = step_batch(self.reader, step, loss_seq if loss_seq is not None else loss_seq_of(this))
        loaded = _Loaded(
            step, steps, this, record,
            losses=sample_losses(self.reader, this, loss_seq) if this is not None else ({}, set(), None),
            batch=batch,
            drawn={s["position"]: s for s in samples(self.reader, batch["seq"])} if batch else {},
            lrs=[lr for _, lr in step_lrs(optimizer_calls(self.reader, step)) if lr is not None],
            evaluating=eval_layers(self.reader, step),
            chance=chance_loss(record, this))
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, loaded)

    def _show(self, loaded: _Loaded) -> None:
        if loaded.step != self.step:
            return  # the person has moved on
        self.steps, self.batch, self.samples, self.chance = loaded.steps, loaded.batch, loaded.drawn, loaded.chance
        record = loaded.record
        self.query_one("#step-title", Static).update(_title(loaded))
        this = loaded.this
        measures = step_measures(this) if this is not None else Text("not finished: nothing measured yet", style="dim")
        self.query_one("#step-measures", Static).update(measures)
        self._plot(self.steps)
        self.per_sample, indices = _rows_and_indices(record, loaded.batch)
        self.record_leading = record.get("leading") if record is not None else None
        self.record = record
        self._table(record, *loaded.losses, indices)
        self.query_one(SamplePane).display = loaded.batch is not None
        self._show_sample(self.query_one(RowTable).cursor_row)

    def _plot(self, steps: list[StepRecord]) -> None:
        widget = self.query_one(PlotextPlot)
        title, value_of, unit_of = PLOTTED[self.plotted]
        series = self._series(steps, value_of)
        values = [v for _, line in series for v in line]
        unit, scale = unit_of(max((abs(y) for _, y in values if y is not None and math.isfinite(y)), default=0))
        series = [(name, [(x, y / scale if y is not None else None) for x, y in line]) for name, line in series]
        values = [v for _, line in series for v in line]
        chance = self.chance if self.plotted == "loss" else None
        widget.border_title = (title.format(unit=unit)
                               + (f", yellow: chance level {number(chance[0])} ({chance[1]})" if chance else "")
                               + f"  (m: {self._next_plotted()})")
        plt = widget.plt
        plt.clear_data()
        plt.clear_figure()
        points = [(x, y) for x, y in values if y is not None and math.isfinite(y)]
        if points and chance:  # drawn first: the loss goes over it where they meet
            plt.hline(chance[0], "yellow")
        for name, line in series:
            drawn = [(x, y) for x, y in line if y is not None and math.isfinite(y)]
            if drawn:
                plt.plot([x for x, _ in drawn], [y for _, y in drawn], marker="braille", label=name or None)
            here = [(x, y) for x, y in drawn if x == self.step]
            if here:
                plt.scatter([here[0][0]], [here[0][1]], marker="●", color="red")
        bad = sorted({x for x, y in values if y is not None and not math.isfinite(y)})
        measured = any(y is not None for _, y in values)
        plt.title(f"no {'finite ' if measured else ''}{self.plotted} recorded" if not points else
                  f"NaN/Inf {self.plotted} at step {', '.join(map(str, bad[:5]))}" if bad else "")
        plt.xlabel("step")
        xs = sorted({x for x, _ in points})
        if xs:  # steps are whole numbers: ticks at some of them, not at 1.50
            every = max(1, math.ceil(len(xs) / 10))
            plt.xticks(xs[::every])
        ys = [y for _, y in points]
        if ys:
            log = min(ys) > 0 and max(ys) >= LOG_SPAN * min(ys)
            if log:  # a diverging loss: on a linear axis every step before the last reads 0
                plt.yscale("log")
            if self.plotted in FROM_ZERO and not log and min(ys) >= 0 and max(ys) > 0:
                plt.ylim(0, max(ys))
                plt.yticks(*y_ticks(0, max(ys), log))
            elif log or max(abs(y) for y in ys) >= LONG_LABELS:
                plt.yticks(*y_ticks(min(ys), max(ys), log))
        widget.refresh()

    def _series(self, steps: list[StepRecord], value_of: Callable[[StepRecord], float | None]
                ) -> list[tuple[str, list[tuple[int, float | None]]]]:
        """The lines plotted, each named: one, or a loss per optimizer where they applied
        their own (a GAN's D and G: their sum is no loss), each through the steps it took."""
        complete = [s for s in steps if s.complete]
        if self.plotted == "loss":
            apart = [(s.step, optimizer_losses(s)) for s in complete]
            names = list(dict.fromkeys(name for _, losses in apart for name, _ in losses))
            if len(names) > 1:
                short = told_apart(names)  # `Generator`, not `Generator.main`
                return [(short[name], [(x, dict(losses)[name]) for x, losses in apart if name in dict(losses)])
                        for name in names]
        return [("", [(s.step, value_of(s)) for s in complete])]

    def _next_plotted(self) -> str:
        names = list(PLOTTED)
        return names[(names.index(self.plotted) + 1) % len(names)]

    def action_next_plot(self) -> None:
        self.plotted = self._next_plotted()
        self._plot(self.steps)

    def _table(self, record: dict[str, Any] | None, losses: dict[int, float], worst: set[int],
               count: int | None, indices: list[Any] | None) -> None:
        table = self.query_one(RowTable)
        table.clear(columns=True)
        table.border_title = "predictions"
        if record is None:
            self._samples_table(table, losses, worst, count, indices)
            return
        if record.get("kind") == "tokens":
            table.add_columns("#", "predicted", "target", "accuracy")
            for i, row in enumerate(record.get("samples", [])):
                table.add_row(str(i), _text(row.get("predicted"), row.get("predicted_ids")),
                              _text(row.get("target"), row.get("target_ids")),
                              _accuracy(row))
            return
        # The prediction before the runners-up: at 80 columns only the first fits beside
        # the sample pane, and the runners-up, whose width varies, run off to the right.
        table.add_columns("#", "sample", "loss", "target", "", "predicted", "runners-up")
        if worst and len(losses) == len(worst) < len(record.get("samples", [])):
            table.border_title = f"predictions (loss of the {len(worst)} worst samples only: values not stored)"
        # A loss per sample beside rows per pixel or token: each row shows its sample's.
        per = self.per_sample if self.per_sample and count != record.get("rows") else 1
        for i, row in enumerate(record.get("samples", [])):
            at = i // per
            loss = Text(number(losses[at]) if at in losses else "", justify="right",
                        style="bold red" if at in worst else "")
            index = indices[i] if indices is not None and i < len(indices) else None
            target, predicted, others, mark = _class_cells(row, record.get("kind") == "labels")
            table.add_row(str(i), Text("" if index is None else str(index), style="dim", justify="right"),
                          loss, target, mark, predicted, others)

    def _samples_table(self, table: RowTable, losses: dict[int, float], worst: set[int],
                       count: int | None, indices: list[Any] | None) -> None:
        """No predictions (a regression loss, say): the batch's samples can still be walked,
        each with its loss where there is one loss per sample."""
        rows = len(indices) if indices is not None else count or (max(losses) + 1 if losses else 0)
        if not rows:
            table.add_column("")
            table.add_row(Text(f"no predictions recorded for step {self.step}", style="dim italic"))
            return
        # The model's outputs are recorded; classes and tokens are what tvis decodes.
        table.border_title = f"samples (no class or token predictions to decode in step {self.step})"
        with_loss = bool(losses) and count in (None, rows)  # not a loss per token or pixel
        table.add_columns("#", *(["sample"] if indices is not None else []), *(["loss"] if with_loss else []))
        for i in range(rows):
            cells: list[Any] = [str(i)]
            if indices is not None:
                cells.append(Text(str(indices[i]), style="dim", justify="right"))
            if with_loss:
                cells.append(Text(number(losses[i]) if i in losses else "", justify="right",
                                  style="bold red" if i in worst else ""))
            table.add_row(*cells)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_sample(event.cursor_row)

    def _show_sample(self, row: int) -> None:
        """The sample of the step's batch that table row `row` belongs to."""
        if self.batch is None:
            return
        pane = self.query_one(SamplePane)
        size, per = _batch_size(self.batch), self.per_sample
        if per is None:
            leading = self.record_leading
            why = "" if leading in (None, size) else f" (the logits' first dimension is {leading}, not {size})"
            pane.show("sample", None, f"which of the batch's {size} samples these prediction rows "
                                      f"belong to is not known{why}")
            return
        position = row // per
        sample = self.samples.get(position)
        tokenized = batch_tokens_of(self.batch, position)  # by the collate_fn, for the batch
        if tokenized:
            sample = {**(sample or {}), "tokens": [*(sample or {}).get("tokens", []), *tokenized]}
        index = _dataset_index(self.batch, sample, position)
        # Named as the table names it: the dataset index under "sample", the position under "#".
        beneath = sample.get("base_index") if sample is not None else None  # under a random_split
        title = ((f"sample {index} " if index is not None else "sample ") + f"(#{position}"
                 + (f"; {beneath} before the split)" if beneath is not None else ")"))
        title += f", row {row % per + 1} of its {per}" if per > 1 else ""
        if sample is not None and any(key in sample for key in ("item", "transforms", "tokens")):
            pane.show(title, {**sample, **_target_class(self.record, row)})
        elif position < size:
            detailed = self.batch.get("detailed")
            pane.show(title, None, "not described: tvis describes the first "
                                   f"{detailed if detailed is not None else 'few'} samples of each batch")
        else:
            pane.show(title, None, f"the batch had {size} samples")

    def action_move(self, delta: int) -> None:
        if self.step + delta not in self.numbers:
            self.app.bell()
            self.notify(f"no {'later' if delta > 0 else 'earlier'} step", timeout=2)
            return
        self.step += delta
        self.load(self.step)

    def action_close(self) -> None:
        self.dismiss()


def _title(loaded: _Loaded) -> Text:
    """The step, its loss and lr, and what looks wrong in it before the predictions' score,
    which a narrow screen cuts first."""
    step, this, record, lrs, evaluating = loaded.step, loaded.this, loaded.record, loaded.lrs, loaded.evaluating
    title = Text(f"step {step}", style="bold")
    loss = loss_label(this)
    if this is not None and loss is not None:
        title.append(f"  loss {loss}")
        left_out = this.extra.get("losses_not_applied")
        if left_out:  # the script's printed loss may be one of these (SAM's first pass)
            title.append(f" (of {len(this.extra.get('losses', ()))} backward losses, "
                         f"{len(left_out)} not applied: gradients zeroed before the step)", style="dim")
    if lrs:  # a scheduler's work, step by step (`w` has them side by side)
        distinct = list(dict.fromkeys(lrs))
        title.append("  lr " + ", ".join(number(lr) for lr in distinct[:3]) + (" …" if len(distinct) > 3 else ""))
    if this is None or not this.complete:
        title.append("  unfinished", style="dim italic")
    elif this.extra.get("optimizer_step_skipped"):
        title.append(f"  no update: {this.extra['optimizer_step_skipped']}", style="bold yellow")
    if evaluating:
        many = len(evaluating) > 1
        title.append(f"  {len(evaluating)} layer{'s' if many else ''} in eval mode", style="bold yellow")
        title.append(f" while training ({evaluating[0]}{', …' if many else ''})", style="yellow")
    made_by = fed_probabilities(this)
    if made_by:  # the loss applies its own softmax or sigmoid: it barely moves
        title.append(f"  the loss was fed probabilities ({made_by} applied twice?)", style="bold yellow")
    broadcast = broadcast_shapes(this)
    if broadcast:  # every prediction compared with every target: no loss per sample
        title.append(f"  loss input {broadcast['input']} and target {broadcast['target']} broadcast "
                     f"to {broadcast['shape']}", style="bold yellow")
    if record is not None:
        title.append(f"  predictions from {record.get('loss', 'the loss')}", style="dim")
        title.append(_score(record))
    return title


def _rows_and_indices(record: dict[str, Any] | None, batch: dict[str, Any] | None
                      ) -> tuple[int | None, list[Any] | None]:
    """The table's rows per sample of the batch (None when they do not divide into its
    samples), and the dataset index of the sample each row belongs to."""
    indices = batch.get("indices") if batch is not None else None
    indices = indices if isinstance(indices, list) else None
    if record is None or batch is None:
        return 1, indices
    shown = len(record.get("samples", []))
    # `rows` counts them before the cap on stored rows (runs before it: only what is stored);
    # `leading` is the logits' first dimension: the batch's samples when it comes first.
    rows, size = record.get("rows", shown), _batch_size(batch)
    by_sample = size and record.get("leading") == size and rows % size == 0
    per = 1 if rows == size else rows // size if by_sample else None
    if per is None or indices is None:
        return per, None
    return per, [indices[r // per] for r in range(shown) if r // per < len(indices)]


def _batch_size(batch: dict[str, Any]) -> int:
    indices = batch.get("indices")
    return int(batch.get("size") or (len(indices) if isinstance(indices, list) else 0))


def _dataset_index(batch: dict[str, Any], sample: dict[str, Any] | None, position: int) -> Any:
    if sample is not None and "index" in sample:
        return sample["index"]
    indices = batch.get("indices")
    return indices[position] if isinstance(indices, list) and position < len(indices) else None


def _target_class(record: dict[str, Any] | None, row: int) -> dict[str, Any]:
    """`target_class` ([index, name]) of prediction row `row`, for the sample pane to name
    the label it shows as a number; nothing where the classes have no names."""
    if record is None or record.get("kind") != "classes" or not record.get("names"):
        return {}
    rows = record.get("samples", [])
    found = rows[row] if 0 <= row < len(rows) and isinstance(rows[row], dict) else {}
    index, name = found.get("target_index"), found.get("target")
    return {"target_class": [index, name]} if type(index) is int and isinstance(name, str) else {}


def _score(record: dict[str, Any]) -> str:
    """How many samples the top prediction got right (classes), or the mean token accuracy;
    of the stored rows, when only the first were stored (a row per pixel)."""
    rows = record.get("samples", [])
    if record.get("kind") == "tokens":
        scores = [r["accuracy"] for r in rows if "accuracy" in r]
        return f"  token accuracy {sum(scores) / len(scores):.0%}" if scores else ""
    judged = [r["correct"] for r in rows if "correct" in r]
    nonfinite = sum(1 for r in rows if r.get("nonfinite"))
    some = record.get("rows", len(rows)) > len(rows)
    of = f"the first {len(rows)} rows" if some else str(len(judged))
    return ((f"  {sum(judged)} of {of} right" if judged else "")
            + (f"  {nonfinite} with NaN/Inf logits" if nonfinite else ""))


def _class_cells(row: dict[str, Any], labels: bool = False) -> list[Text]:
    """Target, the classes predicted (the first class with its probability, or every label
    from 0.5 up for multi-label), the next most probable up to TOP_SHOWN in all, and
    whether the prediction is right."""
    ranked = row.get("top", [])
    labels_said = sum(1 for _, _, prob in ranked if prob >= 0.5) if labels else 0  # all shown
    shown = ranked[:max(TOP_SHOWN, labels_said)]
    said = labels_said if labels else min(1, len(shown))
    predicted = _labels_said(shown[:said]) if labels else \
        Text("  ".join(f"{label} {prob:.0%}" for label, _, prob in shown[:said]), style="bold", no_wrap=True)
    others = Text("  ".join(f"{label} {prob:.0%}" for label, _, prob in shown[said:]),
                  style="dim", no_wrap=True)
    if row.get("nonfinite"):
        predicted.append("NaN/Inf logits", style="bold red")
    if row.get("ignored"):
        return [Text("ignored", style="dim italic"), predicted, others, Text("")]
    target = Text(str(row.get("target", "")))
    if "correct" not in row:
        return [target, predicted, others, Text("")]
    mark = Text("✓", style="green") if row["correct"] else Text("✗", style="bold red")
    return [target, predicted, others, mark]


def _labels_said(said: list[list[Any]]) -> Text:
    """Multi-label: the labels said in index order, as the target lists its labels, then
    their probabilities' range: six labels with a percentage each pushed the column past
    a 120-column screen (sweep O)."""
    if not said:
        return Text("none", style="bold", no_wrap=True)
    ordered = sorted(said, key=lambda entry: entry[1])
    text = Text(", ".join(str(label) for label, _, _ in ordered), style="bold", no_wrap=True)
    low, high = min(p for _, _, p in said), max(p for _, _, p in said)
    text.append(f"  {low:.0%}" if f"{low:.0%}" == f"{high:.0%}" else f"  {low * 100:.0f}–{high:.0%}", style="dim")
    return text


def _accuracy(row: dict[str, Any]) -> Text:
    """Token accuracy, or how many positions had NaN/Inf logits (their argmax means nothing)."""
    if row.get("nonfinite"):
        return Text(f"NaN/Inf at {row['nonfinite']}", style="bold red", justify="right")
    return Text(f"{row['accuracy']:.0%}" if "accuracy" in row else "", justify="right")


def _text(decoded: str | None, ids: list[int] | None) -> Text:
    """Decoded text as it reads (newlines shown as ⏎, and spaces as ␣ where they are all
    of it: a one-character prediction of a space would show as nothing), else the ids."""
    if decoded is not None:
        shown = decoded.replace(" ", "␣") if decoded.isspace() else decoded
        return Text(shown.replace("\n", "⏎"), no_wrap=True)
    return Text(" ".join(map(str, ids or [])), style="dim", no_wrap=True)
