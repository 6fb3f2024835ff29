"""Parameters that get a gradient but that no optimizer steps: they never train.

`Adam(model.backbone.parameters())` that leaves out the head, a layer added to the model
after its optimizer was made, a loss module's learnable weight nobody handed to an
optimizer: the forward uses them, backward computes their gradients (the cost of training
them), and no step ever changes them. Each optimizer step's own parameters look fine, so
no single call shows it; this compares the models' parameters with every live optimizer's.

Checked as each optimizer step ends, while the gradients backward made are still there:
a parameter of a model tvis saw called, or a bare `nn.Parameter` the code calling `step()`
sees (a learned temperature or loss weight in its locals, its `self` or its globals),
that requires grad, has a gradient, and is held by no live optimizer. A teacher or
EMA model run under no_grad has no gradients, and a part frozen when training moved to a
new optimizer (its old gradients still there) no longer requires grad: neither is reported.
"""

from __future__ import annotations

import itertools
from types import FrameType
from typing import Any, Iterable

import torch

from tvis_tui.record.names import visible_names


def orphans(roots: Iterable[torch.nn.Module], optimizers: Iterable[Any],
            bare: Iterable[torch.Tensor] = ()) -> list[torch.Tensor]:
    """The parameters of `roots`, and the `bare` ones, that have a gradient and are in
    none of `optimizers`."""
    stepped = {id(p) for opt in optimizers for group in getattr(opt, "param_groups", ())
               for p in group.get("params", ())}
    found: dict[int, torch.Tensor] = {}
    for p in itertools.chain((p for root in roots for p in root.parameters()), bare):
        if p.requires_grad and p.grad is not None and id(p) not in stepped:
            found.setdefault(id(p), p)
    return list(found.values())


def bare_parameters(frame: FrameType | None) -> dict[str, torch.nn.Parameter]:
    """name -> each `nn.Parameter` the code in `frame` sees by a name of its own (a model's
    that it also sees so keeps its model's name: `names_of` prefers that)."""
    if frame is None:
        return {}
    return {name: value for name, value in visible_names(frame).items()
            if issubclass(type(value), torch.nn.Parameter)}
