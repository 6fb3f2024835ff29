"""Gradients an optimizer step applies a second time: no `zero_grad()` between steps.

Without a zero_grad, each backward adds to the gradient the last step already applied, so
step N applies the sum of N steps' gradients. The loss may still fall for a while; `tvis
check` finds the missing call in simple loops (TV002), this finds it in the run, whatever
the loop looks like.

A parameter's gradient is followed from the end of each optimizer step that applied it:
- a backward that begins while that gradient is untouched (the same tensor, its version
  unchanged: nothing zeroed it in place or set it to None) adds to it: it is *carried*,
  unless its values are all zero (`p.grad.data.zero_()` zeroes without moving the version:
  the only values read, once per step and device, only of gradients suspected so);
- a `zero_grad()` of a module or optimizer holding the parameter, or a new gradient
  tensor, forgets it;
- at the next step of an optimizer holding it, a gradient still carried is reported.

So a GAN's generator backward, which adds to the discriminator's gradients before
`D.zero_grad()`, reports nothing, while a loop that never zeroes reports every parameter
from its second step on. Gradient accumulation (k backwards, then step, then zero_grad)
carries nothing. Nothing is written: gradients are only read.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable, NamedTuple

import torch

from tvis_tui.record.steps import parameter_ids
from tvis_tui.record.updates import NAMES_LISTED, named


class _Applied(NamedTuple):
    param: weakref.ref
    grad: weakref.ref  # the gradient tensor as the step left it
    version: int  # its version counter then: an in-place zero_() moves it
    carried: bool = False  # a backward began while it was untouched

    def holds(self, p: torch.Tensor) -> bool:
        """Whether `p` still has the gradient tensor the step applied."""
        return self.param() is p and p.grad is not None and self.grad() is p.grad


class StaleGrads:
    """Follows each applied gradient from its step to the next (see the module doc)."""

    def __init__(self) -> None:
        self._applied: dict[int, _Applied] = {}  # by id(param)

    def after_step(self, params: Iterable[torch.Tensor]) -> None:
        """An optimizer step applied these parameters' gradients."""
        for p in params:
            if p.grad is not None:
                self._applied[id(p)] = _Applied(weakref.ref(p), weakref.ref(p.grad), p.grad._version)
            else:
                self._applied.pop(id(p), None)

    def before_backward(self) -> None:
        """A backward begins: the gradients still untouched since their step are carried;
        the others are forgotten."""
        suspects: list[tuple[int, _Applied, torch.Tensor]] = []
        for key, entry in list(self._applied.items()):
            if entry.carried:
                continue
            p = entry.param()
            if p is not None and entry.holds(p) and p.grad._version == entry.version:
                suspects.append((key, entry, p.grad))
            else:
                del self._applied[key]
        for (key, entry, _), zero in zip(suspects, _all_zero([g for _, _, g in suspects])):
            # `p.grad.data.zero_()` zeroes without moving the version counter: the values say.
            if zero:
                del self._applied[key]
            else:
                self._applied[key] = entry._replace(carried=True)

    def zeroed(self, owner: Any) -> None:
        """`owner.zero_grad()` ran (a module's or an optimizer's): its parameters start afresh."""
        for key in parameter_ids(owner):
            self._applied.pop(key, None)

    def step_extra(self, params: list[torch.Tensor], names: Callable[[list[torch.Tensor]], list[str]]
                   ) -> dict[str, Any]:
        """`not_zeroed` and `not_zeroed_count` for the call record of an optimizer step of
        `params` that begins now; `names` names parameters."""
        carried = [p for p in params if (e := self._applied.get(id(p))) is not None and e.carried and e.holds(p)]
        return named("not_zeroed", names(carried[:NAMES_LISTED]), len(carried)) if carried else {}


def _all_zero(grads: list[torch.Tensor]) -> list[bool]:
    """Whether each gradient is all zeros, read with one wait per device (on CUDA, each
    read waits for the queued work)."""
    if not grads:
        return []
    by_device: dict[torch.device, list[int]] = {}
    for i, g in enumerate(grads):
        by_device.setdefault(g.device, []).append(i)
    out = [False] * len(grads)
    with torch.no_grad():
        for indices in by_device.values():
            nonzero = torch.stack([grads[i].detach().any() for i in indices]).tolist()
            for i, any_nonzero in zip(indices, nonzero):
                out[i] = not any_nonzero
    return out
