"""Each parameter across the run's optimizer steps, read from the optimizer calls' slots.

An optimizer call holds, per parameter that had a gradient, `param_grad` (the gradient the
step applied), `update` (after - before, with `ratio` = ‖update‖ / ‖weight before‖) and
`param` (the weight after the step); its `extra` names the parameters without a gradient
(docs/store-format.md). Laid side by side, step after step, they show what one step cannot:
a gradient norm that grows every step (gradients accumulating: no zero_grad), a layer whose
updates are far larger than the rest relative to its weights, a weight that keeps growing.
Nothing here imports torch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tvis_tui.store.reader import RunReader
from tvis_tui.store.model_parts import told_apart
from tvis_tui.store.records import CallRecord, Slot


@dataclass(frozen=True, slots=True)
class ParamPoint:
    """One parameter at one optimizer step. Norms are over finite values (None: none; inf
    where the sum of squares passed the dtype's range)."""

    grad_norm: float | None = None
    grad_nonfinite: int = 0  # NaN/Inf values in the gradient
    ratio: float | None = None  # ‖update‖ / ‖weight before the step‖
    update_norm: float | None = None
    weight_norm: float | None = None  # after the step
    no_grad: bool = False  # the step left it alone: it had no gradient


@dataclass
class ParamHistory:
    steps: list[int] = field(default_factory=list)  # steps with an optimizer call, in order
    names: list[str] = field(default_factory=list)  # in the order the optimizers hold them
    points: dict[str, dict[int, ParamPoint]] = field(default_factory=dict)  # name -> step -> point
    # step -> how many gradients its optimizer steps found not zeroed since an earlier step
    not_zeroed: dict[int, int] = field(default_factory=dict)
    carried: set[tuple[str, int]] = field(default_factory=set)  # (name, step) of those named
    # parameters with a gradient that no optimizer steps, by name: the steps they were seen in
    not_stepped: dict[str, list[int]] = field(default_factory=dict)
    not_stepped_count: int = 0  # the most in one step (past the names listed, counted)
    # "lr SGD" (a group: "lr SGD group 1"; a second optimizer of a type: "lr Adam#2") -> step -> lr
    lrs: dict[str, dict[int, float | None]] = field(default_factory=dict)
    # step -> (how many, their figures together) of the parameters past those listed one
    # by one (the first 64 of each optimizer; `extra["unlisted"]`)
    unlisted: dict[int, tuple[int, ParamPoint]] = field(default_factory=dict)


def parameter_history(reader: RunReader) -> ParamHistory:
    """Every parameter an optimizer step of the run saw, at each such step. Where one step
    holds several optimizer calls (a GAN's two optimizers), each names its own parameters;
    a parameter stepped twice in a step shows its last."""
    history = ParamHistory()
    by_step = {step: optimizer_calls(reader, step) for step in reader.phase_steps()}
    # Two optimizers of one type stepped from different lines (a WGAN's critic and
    # generator) are told apart by the line, or their lrs would read as one that changes.
    # Better by what each trains, where the recorder named it (since Dec 2026) and the
    # models differ: `lr Adam Discriminator`, `lr Adam Generator`.
    sites: dict[str, set[int | None]] = {}
    trains: dict[str, set[str | None]] = {}
    for call in (c for calls in by_step.values() for c in calls):
        sites.setdefault(call.name, set()).add(call.call_site.line if call.call_site else None)
        trains.setdefault(call.name, set()).add(_trains(call))
    by_line = {name for name, lines in sites.items() if len(lines) > 1}
    by_model = {name: told_apart(list(models)) for name, models in trains.items()
                if len(models) > 1 and None not in models}
    # One that gains a group (`add_param_group`, unfreezing) names group 0 as it will later.
    grouped = {c.name for calls in by_step.values() for c in calls if len(c.extra.get("lrs") or ()) > 1}
    for step, calls in by_step.items():
        for label, lr in step_lrs(calls, by_line, grouped, by_model):
            history.lrs.setdefault(label, {})[step] = lr
        for call in calls:
            _add(history, step, _points(call, reader.slots(call.seq)))
            _add_findings(history, step, call.extra)
            _add_unlisted(history, step, call.extra.get("unlisted"))
    return history


def optimizer_calls(reader: RunReader, step: int) -> list[CallRecord]:
    """The optimizer steps taken in `step`, in call order."""
    return [c for span in reader.phases(step) if span.phase == "optimizer"
            for c in reader.calls(span.first_seq, span.last_seq) if c.kind == "optimizer"]


def step_lrs(calls: list[CallRecord], by_line: set[str] = frozenset(),
             grouped: set[str] = frozenset(), by_model: dict[str, dict[str, str]] | None = None
             ) -> list[tuple[str, float | None]]:
    """(label, learning rate) of each param group of each optimizer call: `lr SGD`, with
    what it trains for the types in `by_model`, as that names it (`lr Adam Generator`), `line N` (the line of
    its step() call) for those in `by_line`, `group i` where an optimizer has several (or
    is in `grouped`) and `#k` for a second call of one label in the step."""
    by_model = by_model or {}
    out: list[tuple[str, float | None]] = []
    seen: dict[str, int] = {}
    for call in calls:
        lrs = call.extra.get("lrs")
        if not isinstance(lrs, list):
            continue
        base = call.name + (f" {by_model[call.name][_trains(call)]}" if call.name in by_model else
                            f" line {call.call_site.line}" if call.name in by_line and call.call_site else "")
        seen[base] = seen.get(base, 0) + 1
        name = base if seen[base] == 1 else f"{base}#{seen[base]}"
        for i, lr in enumerate(lrs):
            value = float(lr) if isinstance(lr, (int, float)) else None
            out.append((f"lr {name}" + (f" group {i}" if len(lrs) > 1 or call.name in grouped else ""), value))
    return out


def _trains(call: CallRecord) -> str | None:
    """The model, or part of one, an optimizer call trains (the recorder's `trains`)."""
    trains = call.extra.get("trains")
    return trains if isinstance(trains, str) and trains else None


def _add_findings(history: ParamHistory, step: int, extra: dict) -> None:
    """What an optimizer call's record says about parameters beyond its slots."""
    carried = extra.get("not_zeroed_count")
    if isinstance(carried, int) and carried > 0:
        history.not_zeroed[step] = history.not_zeroed.get(step, 0) + carried
    named = extra.get("not_zeroed")
    history.carried.update((str(name), step) for name in (named if isinstance(named, list) else ()))
    count = extra.get("not_stepped_count")
    if isinstance(count, int):
        history.not_stepped_count = max(history.not_stepped_count, count)
    lost = extra.get("not_stepped")
    for name in lost if isinstance(lost, list) else ():
        seen = history.not_stepped.setdefault(str(name), [])
        if step not in seen:
            seen.append(step)


def _add_unlisted(history: ParamHistory, step: int, unlisted: object) -> None:
    """The parameters an optimizer call did not list, together; several calls in a step
    (a GAN's optimizers) add up. A malformed entry is left out, as if not recorded."""
    if not isinstance(unlisted, dict) or not isinstance(unlisted.get("count"), int):
        return
    figures = {key: unlisted.get(key) if isinstance(unlisted.get(key), (int, float)) else None
               for key in ("grad_norm", "weight_norm")}
    bad = unlisted.get("grad_nonfinite")
    count, before = history.unlisted.get(step, (0, ParamPoint()))
    history.unlisted[step] = (count + unlisted["count"], ParamPoint(
        grad_norm=root_sum([before.grad_norm, figures["grad_norm"]]),
        grad_nonfinite=before.grad_nonfinite + (bad if isinstance(bad, int) else 0),
        weight_norm=root_sum([before.weight_norm, figures["weight_norm"]])))


def _points(call: CallRecord, slots: list[Slot]) -> dict[str, ParamPoint]:
    grads = {s.path: s for s in slots if s.role == "param_grad" and s.is_tensor}
    updates = {s.path: s for s in slots if s.role == "update" and s.is_tensor}
    weights = {s.path: s for s in slots if s.role == "param" and s.is_tensor}
    points = {name: ParamPoint(grad_norm=_norm(slot), grad_nonfinite=slot.stats.nonfinite if slot.stats else 0,
                               ratio=updates[name].ratio if name in updates else None,
                               update_norm=_norm(updates.get(name)), weight_norm=_norm(weights.get(name)))
              for name, slot in grads.items()}
    missing = call.extra.get("no_grad")
    for name in missing if isinstance(missing, list) else ():
        if isinstance(name, str):
            points.setdefault(name, ParamPoint(no_grad=True))
    return points


def _norm(slot: Slot | None) -> float | None:
    norm = slot.stats.norm if slot is not None and slot.stats is not None else None
    return norm if norm is not None and not math.isnan(norm) else None


def _add(history: ParamHistory, step: int, points: dict[str, ParamPoint]) -> None:
    if not points:
        return
    if not history.steps or history.steps[-1] != step:
        history.steps.append(step)
    for name, point in points.items():
        if name not in history.points:
            history.names.append(name)
            history.points[name] = {}
        history.points[name][step] = point


def totals(history: ParamHistory) -> dict[int, ParamPoint]:
    """Each step's figures over all its parameters together: the L2 norm of all gradients
    (what `clip_grad_norm_` clips and returns), of all weights, and the ratio of all
    updates to all weights before the step (from each update and its ratio). The
    parameters not listed count in the norms; the ratio, which needs each one's update,
    is None where there are any."""
    out = {}
    for step in history.steps:
        points = [p[step] for p in history.points.values() if step in p and not p[step].no_grad]
        unlisted = history.unlisted.get(step)
        points += [unlisted[1]] if unlisted is not None else []
        # Each weight's norm before the step: ‖Δ‖ / ratio, or, where the step moved it by
        # nothing, its norm after (the same); without a ratio (an all-zero weight), none.
        before = [(p.update_norm, p.update_norm / p.ratio if p.ratio else p.weight_norm) for p in points
                  if p.update_norm is not None and p.ratio is not None
                  and (p.ratio or (p.update_norm == 0 and p.weight_norm is not None))]
        out[step] = ParamPoint(
            grad_norm=root_sum([p.grad_norm for p in points]),
            grad_nonfinite=sum(p.grad_nonfinite for p in points),
            ratio=root_sum([u for u, _ in before]) / root_sum([b for _, b in before])
            if before and unlisted is None else None,
            weight_norm=root_sum([p.weight_norm for p in points]))
    return out


def root_sum(norms: list[float | None]) -> float | None:
    """The L2 norm of several tensors together, from each one's: sqrt(sum of squares)."""
    known = [n for n in norms if n is not None]
    return math.sqrt(math.fsum(n * n for n in known)) if known else None
