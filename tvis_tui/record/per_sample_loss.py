"""Per-sample loss: how much each element of the batch contributed to a recorded loss.

When a standard criterion is recorded (a loss module of phase "loss", or a functional loss
recorded as `F.<name>`), the loss is computed again from the same inputs and options with
`reduction="none"`, under `torch.no_grad()`: no autograd graph is built, no random number is
drawn, the inputs are only read. The unreduced loss is then reduced over every dim but the
first, the way the criterion itself reduces:

- cross-entropy / NLL with class targets: a sample's value is the weighted mean over its
  non-ignored positions, sum(l) / sum(w[target]) (the weights are 1 without `weight`); its
  weight is that denominator. Ignored positions count for nothing; a sample whose positions
  are all ignored has value 0 and weight 0.
- MSE / L1 / Huber given an element-wise `weight`: the same, with the element weights.
- everything else (BCE, BCE-with-logits, smooth-L1, unweighted MSE/L1/Huber, CE with
  probability targets): the plain mean over the sample's elements, all weights equal.

With `reduction="sum"` a sample's value is its sum (weight 1), so the values add up to the
loss; with "mean" sum(w_i * l_i) / sum(w_i) gives it back; with "none" the values are means.
The first dim is whatever the shapes give: a language model that flattens logits to
(N*T, C) gets one value per token. Unbatched inputs (a 0-d unreduced loss) get nothing.

An element-wise loss whose input and target broadcast to a bigger shape than the input's
(predictions (N, 1) against targets (N,): torch warns, and compares every prediction with
every target, an (N, N) loss) has no loss per sample: the row means would read as one,
all alike. The step record says so instead (`Broadcast`), with the three shapes.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import math
import threading
import warnings
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn import _reduction

from tvis_tui.record.loss_inputs import fed_probabilities

CLASS_LOSSES = ("cross_entropy", "nll_loss")
"""Class-index targets: weights and ignore_index act per position (see the module doc)."""

ELEMENT_WEIGHTED = ("mse_loss", "l1_loss", "huber_loss")
"""`weight` is element-wise and "mean" divides by its sum."""

FUNCTIONS = (*CLASS_LOSSES, "binary_cross_entropy", "binary_cross_entropy_with_logits",
             *ELEMENT_WEIGHTED, "smooth_l1_loss")

MODULES: dict[type, tuple[str, tuple[str, ...]]] = {
    nn.CrossEntropyLoss: ("cross_entropy", ("weight", "ignore_index", "label_smoothing")),
    nn.NLLLoss: ("nll_loss", ("weight", "ignore_index")),
    nn.BCELoss: ("binary_cross_entropy", ("weight",)),
    nn.BCEWithLogitsLoss: ("binary_cross_entropy_with_logits", ("weight", "pos_weight")),
    nn.MSELoss: ("mse_loss", ()),
    nn.L1Loss: ("l1_loss", ()),
    nn.SmoothL1Loss: ("smooth_l1_loss", ("beta",)),
    nn.HuberLoss: ("huber_loss", ("delta",)),
}
"""Loss module class -> the functional it calls and the attributes it passes along."""


@dataclass(frozen=True, slots=True)
class PerSample:
    """One value per batch element, and the weight each has (what a "mean" reduction
    divides by; 0 for a sample the loss leaves out; None when all weights are equal)."""

    values: torch.Tensor
    weights: torch.Tensor | None
    reduction: str
    trains: bool = False  # its input required grad, autograd on: a training loss, not a metric
    probabilities: str | None = None  # what made the probabilities a logits loss was fed (loss_inputs.py)

    def slots(self) -> list[tuple[str, torch.Tensor]]:
        pairs = [("per_sample", self.values)]
        if self.weights is not None:
            pairs.append(("per_sample.weight", self.weights))
        return pairs


class Broadcast(Exception):
    """The loss broadcast its input against its target to a bigger shape: no per-sample loss."""

    def __init__(self, input: torch.Tensor, target: torch.Tensor, shape: torch.Size, trains: bool) -> None:
        super().__init__(f"input {list(input.shape)} and target {list(target.shape)} broadcast to {list(shape)}")
        self.shapes = {"input": list(input.shape), "target": list(target.shape), "shape": list(shape)}
        self.trains = trains


def _function(name: str) -> Callable[..., Any]:
    """torch's own function, past any wrapper tvis (or anyone) put around it."""
    return inspect.unwrap(getattr(F, name))


def for_module(module: nn.Module, args: tuple, kwargs: dict) -> PerSample | None:
    """Per-sample loss of a standard loss module's call; None for any other module
    (a subclass that overrides `forward` is a custom criterion)."""
    cls = next((c for c in MODULES if isinstance(module, c)), None)
    if cls is None or type(module).forward is not cls.forward:
        return None
    name, attrs = MODULES[cls]
    bound = dict(zip(("input", "target"), args))
    bound.update(kwargs)
    if "input" not in bound or "target" not in bound:
        return None
    options = {a: getattr(module, a) for a in attrs}
    return compute(name, _function(name), bound["input"], bound["target"],
                   reduction=module.reduction, **options)


@functools.lru_cache(maxsize=32)
def _signature(fn: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(fn)


def for_function(name: str, fn: Callable[..., Any], args: tuple, kwargs: dict) -> PerSample | None:
    """Per-sample loss of a call `fn(*args, **kwargs)` of the functional loss `name`."""
    if name not in FUNCTIONS:
        return None
    bound = _signature(fn).bind(*args, **kwargs).arguments
    size_average, reduce = bound.pop("size_average", None), bound.pop("reduce", None)
    reduction = bound.pop("reduction", "mean")
    if size_average is not None or reduce is not None:
        # The script's own call has warned about the deprecated arguments already.
        reduction = _reduction.legacy_get_string(size_average, reduce, emit_warning=False)
    return compute(name, fn, bound.pop("input"), bound.pop("target"), reduction=reduction, **bound)


CHUNK_ELEMENTS = 1 << 22
"""Input elements recomputed at once. The unreduced loss (and cross-entropy's log-softmax)
of a language model's logits is as big as the logits: recomputing all of them at once
could double the memory the loss took. Rows are recomputed in chunks of this size."""


def compute(name: str, fn: Callable[..., Any], input: Any, target: Any, *, reduction: str,
            **options: Any) -> PerSample | None:
    """Recompute loss `name` unreduced and reduce it per sample (see the module doc)."""
    if not isinstance(input, torch.Tensor) or not isinstance(target, torch.Tensor):
        return None
    if input.is_meta or target.is_meta or reduction not in ("mean", "sum", "none"):
        return None
    trains = input.requires_grad and torch.is_grad_enabled()  # not a metric under no_grad
    if name not in CLASS_LOSSES and input.shape != target.shape:
        shape = torch.broadcast_shapes(input.shape, target.shape)
        if shape != input.shape:
            raise Broadcast(input, target, shape, trains)
    with torch.no_grad(), _warnings_unshown():  # the script already saw the call's own
        input, target = input.detach(), target.detach()
        options = {k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in options.items()}
        parts = [_part(name, fn, *chunk) for chunk in _chunks(input, target, options)]
        if any(p is None for p in parts):
            return None
        return replace(_combine(parts, reduction), trains=trains,
                       probabilities=fed_probabilities(name, input, target))


@contextlib.contextmanager
def _warnings_unshown() -> Iterator[None]:
    """Warnings this thread raises in the block are not shown. Not `catch_warnings()`:
    changing the filters makes python forget which warnings it showed once, and the
    script's own then showed again at every step."""
    shown, here = warnings.showwarning, threading.get_ident()

    def show_others(*args: Any, **kwargs: Any) -> None:
        if threading.get_ident() != here:
            shown(*args, **kwargs)

    warnings.showwarning = show_others
    try:
        yield
    finally:
        warnings.showwarning = shown


def _chunks(input: torch.Tensor, target: torch.Tensor, options: dict[str, Any]
            ) -> Iterator[tuple[torch.Tensor, torch.Tensor, dict[str, Any]]]:
    """(input, target, options) for consecutive rows of the batch; per-row option tensors
    (an element-wise weight) are cut the same way, the others (class weights) passed whole."""
    n = input.shape[0] if input.dim() >= 2 and target.dim() >= 1 else 0
    if n < 2 or target.shape[0] != n or input.numel() <= CHUNK_ELEMENTS:
        yield input, target, options
        return
    rows = max(CHUNK_ELEMENTS * n // input.numel(), 1)
    for i in range(0, n, rows):
        cut = {k: v[i:i + rows] if _per_row(v, input) else v for k, v in options.items()}
        yield input[i:i + rows], target[i:i + rows], cut


def _per_row(value: Any, input: torch.Tensor) -> bool:
    return (isinstance(value, torch.Tensor) and value.dim() == input.dim()
            and value.shape[0] == input.shape[0])


def _part(name: str, fn: Callable[..., Any], input: torch.Tensor, target: torch.Tensor,
          options: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor | None, int] | None:
    """Per-sample sums of the unreduced loss of some rows, the sums of their weights
    (None: all 1) and the elements per sample; None for an unbatched call."""
    loss = fn(input, target, reduction="none", **options)
    if loss.dim() == 0:
        return None
    n = loss.shape[0]
    flat = loss.reshape(n, -1)
    denominators = _denominators(name, target, loss, options)
    weights = denominators.reshape(n, -1).sum(1) if denominators is not None else None
    return flat.sum(1), weights, flat.shape[1]


def _denominators(name: str, target: torch.Tensor, loss: torch.Tensor,
                  options: dict[str, Any]) -> torch.Tensor | None:
    """The weight of each unreduced element in a "mean" reduction, shaped like `loss`;
    None when "mean" is a plain mean."""
    weight = options.get("weight")
    if name in CLASS_LOSSES:
        if target.is_floating_point():  # class probabilities: a plain mean over positions
            return None
        ignore = options.get("ignore_index", -100)
        kept = target != ignore
        if weight is None:
            return kept.to(loss.dtype) if not bool(kept.all()) else None
        w = weight.to(loss.dtype)[torch.where(kept, target, 0)]
        return torch.where(kept, w, torch.zeros((), dtype=w.dtype, device=w.device))
    if name in ELEMENT_WEIGHTED and weight is not None:
        return weight.to(loss.dtype).expand_as(loss)
    return None


def _combine(parts: list[tuple[torch.Tensor, torch.Tensor | None, int]], reduction: str) -> PerSample:
    totals = torch.cat([t for t, _, _ in parts])
    if all(w is None for _, w, _ in parts):
        return PerSample(totals if reduction == "sum" else totals / parts[0][2], None, reduction)
    weights = torch.cat([w if w is not None else torch.full_like(t, float(k)) for t, w, k in parts])
    if reduction == "sum":  # the weights still tell which samples the loss left out
        return PerSample(totals, weights, reduction)
    safe = torch.where(weights == 0, torch.ones_like(weights), weights)
    values = torch.where(weights == 0, torch.zeros_like(totals), totals / safe)
    return PerSample(values, weights, reduction)


WORST = 8
"""Samples named in the step's `extra["per_sample_loss"]` (highest losses first)."""


def is_nested(stack: list[Any], call: Any) -> bool:
    """True when `call` runs inside another loss call (a criterion built of criteria):
    only the outermost loss is recomputed."""
    return any(c is not call and c.criterion for c in stack)


def attach(log: Any, steps: Any, call: Any, make: Callable[[], PerSample | None],
           warn: Callable[[str], None]) -> None:
    """Compute the per-sample loss of the closed loss `call` with `make()` and write it
    as slots of role "per_sample" (log: CallLog; steps: StepTracker)."""
    try:
        per_sample = make()
    except Broadcast as broadcast:
        _note(steps, {"seq": call.record.seq, "broadcast": broadcast.shapes, "trains": broadcast.trains})
        return
    except Exception as exc:  # a criterion called in a way tvis did not foresee
        warn(f"per-sample loss of {call.record.name} not recorded: {type(exc).__name__}: {exc}")
        return
    if per_sample is None:
        return
    # Straight to the slot maker, not through CallLog.put_slots: these tensors are tvis's
    # own, and the live-tensor count of the script's memory must not see them.
    slots, _ = log.slots.make(call.record.seq, "per_sample", iter(per_sample.slots()))
    log.writer.put_slots(call.record.seq, slots)
    _note(steps, step_summary(call.record.seq, per_sample))


def _note(steps: Any, summary: dict[str, Any]) -> None:
    """The step's is its last training loss, as for its predictions: a metric on detached
    outputs afterwards (a validation batch) does not replace it."""
    earlier = steps.extra_now("per_sample_loss")
    if summary["trains"] or not (earlier and earlier.get("trains")):
        steps.note_extra("per_sample_loss", summary)


def step_summary(seq: int, per_sample: PerSample) -> dict[str, Any]:
    """What a step record says about its last per-sample loss: which call, how many
    samples, and the highest losses as [[position in the batch, value], ...]."""
    values = per_sample.values.float()
    # A NaN or infinite loss is the worst there is; fully ignored samples have none to rank.
    rank = values.nan_to_num(nan=math.inf, posinf=math.inf, neginf=-math.inf)
    kept = per_sample.weights > 0 if per_sample.weights is not None else torch.ones_like(values, dtype=torch.bool)
    rank = torch.where(kept, rank, torch.full_like(rank, -math.inf))
    k = min(WORST, int(kept.sum()))
    worst = [[int(i), float(values[i])] for i in torch.topk(rank, k).indices] if k else []
    summary = {"seq": seq, "count": int(values.numel()), "reduction": per_sample.reduction, "worst": worst,
               "trains": per_sample.trains}
    if per_sample.probabilities:
        summary["probabilities"], summary["probabilities_from"] = True, per_sample.probabilities
    return summary
