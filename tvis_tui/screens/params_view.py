"""Every parameter across the recorded optimizer steps: a row per parameter, a column per
step, showing its gradient norm, its update/weight ratio or its weight norm (`m` cycles),
with a sparkline of the whole row. What one step cannot show, the row does: a gradient
norm that grows every step (gradients accumulating: no zero_grad), a layer whose updates
are large against its weights (a learning rate too high for it), a parameter that never
gets a gradient. Esc goes back to the call."""

from __future__ import annotations

import math
from typing import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual.worker import get_current_worker

from tvis_tui.store import RunReader
from tvis_tui.store.parameters import ParamHistory, ParamPoint, parameter_history, totals
from tvis_tui.widgets.format import number, short_path
from tvis_tui.widgets.row_table import RowTable
from tvis_tui.widgets.sparkline import sparkline

MEASURES: dict[str, tuple[str, Callable[[ParamPoint], float | None]]] = {
    "grad": ("gradient norm", lambda p: p.grad_norm),
    "ratio": ("update / weight (‖Δ‖ / ‖w‖)", lambda p: p.ratio),
    "weight": ("weight norm after the step", lambda p: p.weight_norm),
}
"""What `m` cycles the cells through: its title and each point's value."""

TREND_WIDTH = 12
SHOWN_STEPS = 50
"""Step columns at most, around the step the view was opened from: a DataTable of 300
columns took a second to lay out on each `m`; the trend column covers every step."""
NAME_WIDTH = 40
"""Cells of a parameter's name at most: a transformer's names (`bert.encoder.layer.11.
attention.self.query.weight`) would leave no room for a single step's figure at 80 columns."""
LOG_SPAN = 100
"""A row whose values span more than this factor draws its trend on a log scale."""


class ParamsScreen(Screen[None]):
    HELP_SECTIONS = ("Parameters view",)  # help lists these first
    BINDINGS = [
        Binding("escape,q,w", "close", "Back to the call"),
        Binding("m", "next_measure", "Gradient norm / update÷weight / weight norm"),
        Binding("left_square_bracket", "shift_steps(-1)", f"The {SHOWN_STEPS} steps before"),
        Binding("right_square_bracket", "shift_steps(1)", f"The {SHOWN_STEPS} steps after"),
    ]

    def __init__(self, reader: RunReader, step: int | None = None) -> None:
        super().__init__()
        self.reader = reader
        self.step = step  # the step the view was opened from: its column is marked
        self.measure = "grad"  # a key of MEASURES
        self.history: ParamHistory | None = None
        self.first_shown: int | None = None  # index of the first step column; None: around `step`

    def compose(self) -> ComposeResult:
        yield Static(id="params-title")
        # The name and trend stay as the steps scroll; a step's figure is never shown cut.
        yield RowTable(id="params", fixed_columns=2, cut_wide_columns=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(RowTable).focus()
        self.query_one("#params-title", Static).update(Text("reading the optimizer steps…", style="dim"))
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        history = parameter_history(self.reader)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show, history)

    def _show(self, history: ParamHistory) -> None:
        self.history = history
        self._title()
        self._table()

    def _title(self) -> None:
        title = Text("parameters × optimizer steps", style="bold")
        if self.history is not None and not self.history.names:
            title.append("  no optimizer step recorded a parameter", style="dim italic")
        else:
            title.append(f"  {MEASURES[self.measure][0]}")
            title.append(f"  (m: {MEASURES[self._next_measure()][0]})", style="dim")
            shown, steps = self._shown_steps(), self.history.steps if self.history is not None else []
            if len(shown) < len(steps):  # the trend column covers them all
                title.append(f"  steps {shown[0]}-{shown[-1]} of {len(steps)} ([ ])",
                             style="dim")
            if self.history is not None and self.history.not_stepped:
                lost, count = list(self.history.not_stepped), max(self.history.not_stepped_count, 1)
                title.append(f"\n{count} parameter{'s' if count > 1 else ''} got gradients that no "
                             f"optimizer steps (they never train): {', '.join(lost[:3])}"
                             + (" …" if len(lost) > 3 else ""), style="bold yellow")
            if self.history is not None and self.history.not_zeroed:
                steps = sorted(self.history.not_zeroed)
                shown = ", ".join(map(str, steps[:5])) + (" …" if len(steps) > 5 else "")
                title.append(f"\ngradients not zeroed before step {shown} (yellow): each step applies the "
                             "earlier steps' gradients again (no zero_grad?)", style="bold yellow")
        self.query_one("#params-title", Static).update(title)

    def _table(self) -> None:
        table = self.query_one(RowTable)
        selected = table.cursor_row  # the same parameter stays selected across `m`, `[`, `]`
        table.clear(columns=True)
        history = self.history
        if history is None or not history.names:
            return
        value_of = MEASURES[self.measure][1]
        shown = self._shown_steps()
        first = history.steps.index(shown[0])
        window = slice(first, first + len(shown))
        table.add_column("parameter")
        table.add_column("trend")
        for step in shown:
            table.add_column(Text(f"step {step}", style="bold reverse" if step == self.step else ""))
        # The learning rates first: a scheduler stepped per batch instead of per epoch
        # shows as a row that falls step after step (sweep N).
        for label, by_step in history.lrs.items():
            lrs = [by_step.get(step) for step in history.steps]
            table.add_row(Text(label, style="cyan", no_wrap=True), _bars(lrs, bad=False),
                          *(Text(number(lr) if lr is not None else "", justify="right", style="cyan")
                            for lr in lrs[window]))
        # All parameters together: the gradient norm people log and clip.
        total = totals(history)
        rows = [("", Text("all parameters", style="bold", no_wrap=True), [total.get(step) for step in history.steps])]
        rows += [(name, Text(short_path(name, NAME_WIDTH), no_wrap=True), [history.points[name].get(step) for step in history.steps])
                 for name in history.names]
        if history.unlisted:  # past the 64 listed of each optimizer: together, not dropped
            most = max(count for count, _ in history.unlisted.values())
            rows.append(("", Text(f"{most} more parameters, together", style="dim", no_wrap=True),
                         [point for _, point in (history.unlisted.get(step, (0, None)) for step in history.steps)]))
        for name, label, points in rows:
            cells = [_cell(p, value_of) for p in points[window]]
            for cell, step in zip(cells, shown):
                if (name, step) in history.carried:  # this step applied earlier steps' gradient too
                    cell.stylize("yellow")
            table.add_row(label, _trend(points, value_of), *cells)
        table.move_cursor(row=selected)

    def _shown_steps(self) -> list[int]:
        """Up to SHOWN_STEPS steps from the first shown one (see `_first_shown`)."""
        steps = self.history.steps if self.history is not None else []
        first = self._first_shown()
        return steps[first:first + SHOWN_STEPS]

    def _first_shown(self) -> int:
        """The first step column's index: at first around the step the view was opened
        from, then where `[` and `]` moved it; never past either end."""
        steps = self.history.steps if self.history is not None else []
        first = self.first_shown
        if first is None:
            first = (steps.index(self.step) if self.step in steps else 0) - SHOWN_STEPS // 2
        return max(0, min(first, len(steps) - SHOWN_STEPS))

    def action_shift_steps(self, direction: int) -> None:
        before = self._first_shown()
        self.first_shown = before + direction * SHOWN_STEPS
        if self._first_shown() != before:
            self._title()
            self._table()

    def _next_measure(self) -> str:
        names = list(MEASURES)
        return names[(names.index(self.measure) + 1) % len(names)]

    def action_next_measure(self) -> None:
        self.measure = self._next_measure()
        self._title()
        self._table()

    def action_close(self) -> None:
        self.dismiss()


def _cell(point: ParamPoint | None, value_of: Callable[[ParamPoint], float | None]) -> Text:
    if point is None:  # not in this step's optimizer (another optimizer's step)
        return Text("")
    if point.no_grad:
        return Text("no grad", style="dim", justify="right")
    value = value_of(point)
    text = Text(number(value) if value is not None else "–", justify="right",
                style="" if value is None or math.isfinite(value) else "bold red")
    if point.grad_nonfinite:
        text = Text("NaN/Inf grad", style="bold red", justify="right")
    return text


def _trend(points: list[ParamPoint | None], value_of: Callable[[ParamPoint], float | None]) -> Text:
    """A parameter's row as bars: a step whose gradient held NaN/Inf is a gap, and draws
    the row red."""
    values = [value_of(p) if p is not None and not p.no_grad and not p.grad_nonfinite else None
              for p in points]
    return _bars(values, bad=any(p is not None and p.grad_nonfinite for p in points))


def _bars(values: list[float | None], bad: bool) -> Text:
    """Each value as a bar as tall as its share of the largest; a step without a finite
    value is a gap. Values that span more than LOG_SPAN are drawn on a log scale, marked
    `log`: a diverging run's norms go from 1e2 to 1e29, and all but the last would be
    empty on a linear one."""
    heights = [abs(v) if v is not None and math.isfinite(v) else 0.0 for v in values]
    positive = [h for h in heights if h > 0]
    log = bool(positive) and max(positive) > LOG_SPAN * min(positive)
    if log:
        heights = [math.log10(h / min(positive)) + 1 if h > 0 else 0.0 for h in heights]
    line = sparkline(heights, width=TREND_WIDTH, style="bold red" if bad else "green")
    return line.append(" log", style="dim") if log else line
