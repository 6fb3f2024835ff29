"""What an optimizer step did: per-parameter updates, update-to-weight ratios, no-grad params.

Before `Optimizer.step()` runs, each parameter that has a gradient (the only ones torch's
optimizers touch; with a closure, as LBFGS takes, each one that requires grad) is copied; after it, `update = after - before` is computed in the
parameter's own dtype (exactly what a manual copy would give) and written as a slot of role
"update" named like the parameter, with `Slot.ratio` = ‖update‖ / ‖param before‖ (both L2,
in float32/float64 like stats.py; None when the parameter was all zeros).

The step's call record gets in `extra`:
- `lrs`: the learning rate of each param group, in order (`lr` stays the first group's);
  a tensor lr on an accelerator is left as None rather than synchronizing to read it.
- `hyper`: each param group's other settings (momentum, weight_decay, betas, ...): a
  weight decay of 50 or a momentum of 0.99 meant 0.9 is read here.
- `no_grad`: names of the parameters of the optimizer that had no gradient after the step
  (frozen, or unused in the forward); at most NAMES_LISTED, with `no_grad_count` the total,
  and `no_grad_frozen` those of them with `requires_grad=False` (the rest did require grad:
  no backward since their gradient was last set to None reached them), with
  `no_grad_frozen_count` the total.

Like `param_grad`, at most MAX_SLOTS parameters get an update slot (a last slot says more
were left out). The copies are bounded by SNAPSHOT_BUDGET_BYTES per step: parameters past it (in
param-group order) get no update slot, and the run gets a warning naming how many.
Copying only reads the parameters: the step's numerics are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from tvis_tui.record.slots import MAX_SLOTS
from tvis_tui.record.stats import as_float
from tvis_tui.store.records import Slot

if TYPE_CHECKING:
    from tvis_tui.record.recorder import Recorder

SNAPSHOT_BUDGET_BYTES = 1 << 30
"""Bytes of parameter copies per optimizer step (on the parameters' own devices). 1 GiB
covers every parameter of a ~250M-parameter fp32 model; past that, memory spent on the
copies could change whether training fits at all, so the rest go without an update."""

NAMES_LISTED = 64
"""Parameters named in one list of a step's record (no gradient, not zeroed, in no
optimizer); a frozen backbone has thousands: the `_count` beside the list says so."""


def named(key: str, names: list[str], count: int | None = None) -> dict[str, Any]:
    """`key` (the first NAMES_LISTED of `names`) and `key_count` (`count`, else how many)."""
    return {key: names[:NAMES_LISTED], f"{key}_count": len(names) if count is None else count}



class ParamUpdates:
    """Copies parameters before a step and writes their updates after it."""

    def __init__(self, recorder: Recorder) -> None:
        self._recorder = recorder
        # id(optimizer) -> [(index, param, copy before the step)]; replaced at each step, so
        # a step that raised leaves its copies only until that optimizer's next step.
        self._before: dict[int, list[tuple[int, torch.Tensor, torch.Tensor]]] = {}
        self._over_cap: dict[int, int] = {}

    def step_extra(self, opt: Any) -> dict[str, Any]:
        """`lrs` and `hyper` for the step's call record, as the step starts."""
        return {"lrs": [_lr(group.get("lr")) for group in opt.param_groups],
                "hyper": [_hyper(group) for group in opt.param_groups]}

    def _no_grad(self, opt: Any) -> dict[str, Any]:
        """`no_grad` and `no_grad_count`, read after the step: an LBFGS closure computes
        the first gradients inside step()."""
        ps = params(opt)
        missing = [(name, p.requires_grad) for name, p in zip(self._recorder.names.names_of(ps, given_names(opt)), ps)
                   if p.grad is None]
        if not missing:
            return {}
        listed = missing[:NAMES_LISTED]
        frozen = [name for name, wants in missing if not wants]
        return {**named("no_grad", [name for name, _ in listed], len(missing)),
                **named("no_grad_frozen", [name for name, wants in listed if not wants], len(frozen))}

    def before_step(self, opt: Any, closure: bool = False) -> None:
        """Copy each parameter with a gradient (with a closure, that may compute them:
        each one that requires grad), within the budget."""
        copies: list[tuple[int, torch.Tensor, torch.Tensor]] = []
        used = skipped = over_cap = 0
        self._before.pop(id(opt), None)  # free the last step's copies before making new ones
        with torch.no_grad():
            for i, p in enumerate(params(opt)):
                if p.grad is None and not (closure and p.requires_grad):
                    continue
                if len(copies) >= MAX_SLOTS:  # the slots past the cap would not be written
                    over_cap += 1
                    continue
                size = p.numel() * p.element_size()
                if used + size > SNAPSHOT_BUDGET_BYTES:
                    skipped += 1
                    continue
                used += size
                copies.append((i, p, p.detach().clone()))
        self._before[id(opt)] = copies
        self._over_cap[id(opt)] = over_cap
        if skipped:
            self._recorder.warn(f"{type(opt).__name__}: updates of {skipped} parameters were not recorded "
                                f"(copies over {SNAPSHOT_BUDGET_BYTES >> 20} MiB per step)")

    def after_step(self, opt: Any, seq: int) -> dict[str, Any]:
        """Write the "update" slots of step call `seq`, each with its ratio; return the
        `extra` of the step's call (the parameters without a gradient)."""
        self._write_updates(seq, self._before.pop(id(opt), []), self._over_cap.pop(id(opt), 0), opt)
        return self._no_grad(opt)

    def _write_updates(self, seq: int, copies: list[tuple[int, torch.Tensor, torch.Tensor]],
                       over_cap: int, opt: Any) -> None:
        if not copies:
            return
        # Named now, after an LBFGS closure's model call named them.
        names = self._recorder.names.names_of(params(opt), given_names(opt))
        pairs = []
        with torch.no_grad():
            before_norms = _norms([before for _, _, before in copies])
            for i, p, before in copies:
                # after - before, in the copy's own memory so a step never holds twice the
                # budget; p + (-b) rounds exactly as p - b, in the parameter's dtype.
                update = before.neg_().add_(p.detach())
                pairs.append((names[i], update))
        log = self._recorder.log
        slots, _ = log.slots.make(seq, "update", iter(pairs))
        out = []
        for (slot, values), before_norm in zip(slots, before_norms):
            norm = slot.stats.norm if slot.stats else None
            if norm is not None and before_norm:
                slot = replace(slot, ratio=norm / before_norm)
            out.append((slot, values))
        if over_cap:  # as `param_grad` shows it: the slot cap, not the memory budget
            out.append((Slot("update", len(out), "", repr=f"… more not recorded (cap {MAX_SLOTS})"), None))
        log.writer.put_slots(seq, out)


def params(opt: Any) -> list[torch.Tensor]:
    """The optimizer's parameters, group after group."""
    return [p for group in opt.param_groups for p in group["params"]]


def given_names(opt: Any) -> list[str | None]:
    """The name the script gave each of `params(opt)` (`Adam(model.named_parameters())`),
    None where it gave none; for a parameter no recorded model holds (a torch.func loop's
    own tensors, names.py)."""
    out: list[str | None] = []
    for group in opt.param_groups:
        given = group.get("param_names") or ()
        out += [given[j] if j < len(given) and isinstance(given[j], str) else None
                for j in range(len(group["params"]))]
    return out


def _hyper(group: dict[str, Any]) -> dict[str, Any]:
    """A param group's settings besides its parameters and lr, those a store can hold:
    numbers, flags, text and tuples of numbers (Adam's betas); a tensor setting is read
    only on the CPU, as the lr is (on a GPU, reading it would wait for the device)."""
    out: dict[str, Any] = {}
    for key, value in group.items():
        if key in ("params", "param_names", "lr") or not isinstance(key, str):
            continue
        if isinstance(value, torch.Tensor):
            value = _lr(value)
        if isinstance(value, (bool, int, float, str)) or value is None:
            out[key] = value
        elif isinstance(value, (tuple, list)) and all(type(v) in (int, float) for v in value):
            out[key] = [float(v) for v in value]
    return out


def _lr(lr: Any) -> float | None:
    if isinstance(lr, torch.Tensor):
        return float(lr) if lr.device.type == "cpu" and lr.numel() == 1 else None
    return float(lr) if isinstance(lr, (int, float)) else None


def _norms(tensors: list[torch.Tensor]) -> list[float | None]:
    """L2 norms of the finite values, in float32 (float64 for float64) like stats.py.
    Read with one wait per device rather than one per parameter (on CUDA every read waits
    for all queued work). A complex tensor's is its real and imaginary parts'. None for an
    empty or all-zero tensor."""
    squares = [_square(t) for t in tensors]
    out: list[float | None] = [None] * len(squares)
    by_device: dict[torch.device, list[int]] = {}
    for i, sq in enumerate(squares):
        if sq is not None:
            by_device.setdefault(sq.device, []).append(i)
    for positions in by_device.values():
        # Packed on CUDA (one wait) or the host: MPS has no float64.
        group = [sq if sq.is_cuda else sq.cpu() for sq in (squares[i] for i in positions)]
        values = torch.stack([sq.to(torch.float64) for sq in group]).tolist()
        for i, value in zip(positions, values):
            if not math.isfinite(value):  # NaN/Inf in the weights (or past float32's max)
                value = _finite_square(tensors[i])
            out[i] = math.sqrt(value) if math.isfinite(value) and value > 0 else None
    return out


def _square(t: torch.Tensor) -> torch.Tensor | None:
    """The squared L2 norm as a 0-d tensor on t's device, not read yet: a reduction, no
    copy of t on the device."""
    if t.numel() == 0:
        return None
    f = as_float(_real_view(t)).reshape(-1)
    return torch.dot(f, f)


def _real_view(t: torch.Tensor) -> torch.Tensor:
    """A complex tensor as its (real, imaginary) pairs, a view; others as they are."""
    return torch.view_as_real(t.resolve_conj()) if t.is_complex() else t


def _finite_square(t: torch.Tensor) -> float:
    """The squared norm of t's finite values, computed on the host (rare: a diverged run)."""
    f = as_float(_real_view(t.detach().cpu())).reshape(-1)
    f = f[torch.isfinite(f)]
    return torch.dot(f, f).item() if f.numel() else math.nan
