"""Gradients an optimizer step applies a second time: no `zero_grad()` between steps.

Without a zero_grad, each backward adds to the gradient the last step already applied, so
step N applies the sum of N steps' gradients. The loss may still fall for a while; `tvis
check` finds the missing call in simple loops (TV002), this finds it in the run, whatever
the loop looks like.

A parameter's gradient is followed from the end of each optimizer step that applied it:
- a backward that begins while that gradient is untouched (the same tensor, its version
  unchanged: nothing zeroed it in place or set it to None) adds to it: it is *carried*;
- a `zero_grad()` of a module or optimizer holding the parameter, or a new gradient
  tensor, forgets it;
- at the next step of an optimizer holding it, a gradient still carried is reported.

So a GAN's generator backward, which adds to the discriminator's gradients before
`D.zero_grad()`, reports nothing, while a loop that never zeroes reports every parameter
from its second step on. Gradient accumulation (k backwards, then step, then zero_grad)
carries nothing. Only reads `.grad` and its version counter: never the values.
"""

from __future__ import annotations

import weakref
from typing import Any, Callable, Iterable

import torch

from tvis_tui.record.steps import parameter_ids

LISTED = 64
"""Names listed per step; a model's thousands of parameters are counted, not listed."""


class StaleGrads:
    def __init__(self) -> None:
        # id(param) -> (param, its gradient as the step left it, that gradient's version,
        # carried: a backward began while it was untouched)
        self._applied: dict[int, tuple[weakref.ref, weakref.ref, int, bool]] = {}

    def after_step(self, params: Iterable[torch.Tensor]) -> None:
        """An optimizer step applied these parameters' gradients."""
        for p in params:
            grad = p.grad
            if grad is not None:
                self._applied[id(p)] = (weakref.ref(p), weakref.ref(grad), grad._version, False)
            else:
                self._applied.pop(id(p), None)

    def before_backward(self) -> None:
        """A backward begins: the gradients still untouched since their step are carried."""
        for key, (param, grad, version, carried) in list(self._applied.items()):
            if carried:
                continue
            if _untouched(param, grad, version):
                self._applied[key] = (param, grad, version, True)
            else:
                del self._applied[key]

    def zeroed(self, owner: Any) -> None:
        """`owner.zero_grad()` ran (a module's or an optimizer's): its parameters start afresh."""
        for key in parameter_ids(owner):
            self._applied.pop(key, None)

    def step_extra(self, params: list[torch.Tensor], names: Callable[[], list[str]]) -> dict[str, Any]:
        """`not_zeroed` (at most LISTED names) and `not_zeroed_count` for the call record of
        an optimizer step of `params` that begins now; `names()` names them all."""
        carried = self.carried(params)
        if not carried:
            return {}
        named = names()
        return {"not_zeroed": [named[i] for i in carried[:LISTED]], "not_zeroed_count": len(carried)}

    def carried(self, params: list[torch.Tensor]) -> list[int]:
        """As an optimizer step begins: the indices of `params` whose gradient still holds
        what an earlier step applied."""
        found = []
        for i, p in enumerate(params):
            entry = self._applied.get(id(p))
            if entry is not None and entry[3] and entry[0]() is p and entry[1]() is p.grad:
                found.append(i)
        return found


def _untouched(param: weakref.ref, grad: weakref.ref, version: int) -> bool:
    p, g = param(), grad()
    return p is not None and g is not None and p.grad is g and g._version == version

