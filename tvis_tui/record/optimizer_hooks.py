"""The recorder's hooks on optimizers: construction, step() (torch's global step pre- and
post-hooks), zero_grad(), and GradScaler.step.

A step opens with each parameter's gradient (`param_grad`), its param groups' settings and
the gradients left from the last step (stale_grads.py); it closes with the parameters as
they are after it and their updates (updates.py), and names the parameters with a gradient
that no optimizer steps (orphan_params.py). A step taken with a closure (LBFGS) records the
gradients its closure's first backward made.
"""

from __future__ import annotations

import sys
import time
from types import FrameType
from typing import Any, Callable, Iterator

import torch

from tvis_tui.record.calls import OPTIMIZER_STEP_CODE, running_frame
from tvis_tui.record.hook_base import HookBase, eager
from tvis_tui.record.orphan_params import bare_parameters, orphans
from tvis_tui.record.param_totals import norm_together
from tvis_tui.record.slots import MAX_SLOTS
from tvis_tui.store.model_parts import common_part
from tvis_tui.record.updates import NAMES_LISTED, given_names, named, params as optimizer_params


class OptimizerHooks(HookBase):
    _named_in_step: int  # the step whose parameters were last named (names.py)
    # Steps taken with a closure (LBFGS): seq -> optimizer, until the closure's first
    # backward has made the gradients this step starts from.
    _closure_steps: dict[int, Any]
    _step_loop: Callable[[FrameType], Any]  # Recorder's
    # id(optimizer) -> the bare nn.Parameters the code calling its open step() sees, by
    # name (orphan_params); per optimizer: a wrapper's step() steps an inner one.
    _bare_params: dict[int, dict[str, torch.nn.Parameter]]
    # seq of an open optimizer call -> its parameters past the slots' cap, together
    # (param_totals.py): `extra["unlisted"]` once it closes.
    _unlisted: dict[int, dict[str, Any]]

    def _optimizer_init(self, original: Callable[..., Any], opt: Any, *args: Any, **kwargs: Any) -> None:
        original(opt, *args, **kwargs)
        if self._active():
            self.steps.add_optimizer(opt)

    @eager
    def _optimizer_pre(self, opt: Any, args: tuple, kwargs: dict) -> None:
        if not self._active():
            return
        self._stop_if_done()
        if self._guard(self.steps.before_optimizer_step, opt):
            self._stop_if_done()  # nothing of this step() has run yet
        # torch hands the pre-hook step()'s own args: the optimizer first, then a closure.
        closure = args[1] if len(args) > 1 else kwargs.get("closure")
        self._guard(self._open_optimizer, opt, sys._getframe(1), closure)

    def _open_optimizer(self, opt: Any, frame: Any, closure: Any = None) -> None:
        self.log.close_left(frame)
        if self._named_in_step != self.steps.step:  # once a step: a GAN steps twice
            self.names.parameters_may_have_moved()
            self._named_in_step = self.steps.step
        self.steps.add_optimizer(opt)  # one made before tvis started, or bypassing __init__
        extra = self.updates.step_extra(opt)
        ps = optimizer_params(opt)
        extra.update(self.stale.step_extra(ps, lambda subset: self._names_in(opt, subset)))
        lrs = extra["lrs"]
        if lrs and lrs[0] is not None:  # a CUDA tensor lr is not read: that would sync
            extra["lr"] = lrs[0]
        call = self.log.open(kind="optimizer", name=type(opt).__name__, type_=type(opt).__qualname__,
                             phase="optimizer", owner=id(opt), call_site=self.sites.call_site(frame),
                             def_site=self.sites.def_site(type(opt), "step"), extra=extra,
                             frame=running_frame(frame, OPTIMIZER_STEP_CODE))
        self._bare_params[id(opt)] = bare_parameters(self.sites.user_frame(frame))  # checked as it ends
        if closure is None:
            self._put_gradients(call.record.seq, opt)
        else:  # .grad still holds the last step's: the closure computes this step's
            self._closure_steps = {s: o for s, o in self._closure_steps.items() if o is not opt}
            self._closure_steps[call.record.seq] = opt
        self.updates.before_step(opt, closure is not None)
        if self.functions.live:  # a step the repeat rule ends is not watched to its loop's head
            self._step_loop(frame)

    def _names_in(self, opt: Any, subset: list[torch.Tensor]) -> list[str]:
        """The names of `subset` of the optimizer's parameters (those it was given count)."""
        ps = optimizer_params(opt)
        by_id = dict(zip(map(id, ps), self.names.names_of(ps, given_names(opt))))
        return [by_id[id(p)] for p in subset]

    @eager
    def _optimizer_post(self, opt: Any, args: tuple, kwargs: dict) -> None:
        if not self._active():
            return
        self._guard(self._close_optimizer, opt, time.perf_counter_ns())

    def _close_optimizer(self, opt: Any, ended: int) -> None:
        call = self.log.innermost(id(opt))
        ps = optimizer_params(opt)
        site, who = None, None
        if call is not None:
            self._put_closure_gradients(call.record.seq)  # a closure that never ran backward
            extra = self.updates.after_step(opt, call.record.seq)
            bare = self._bare_params.pop(id(opt), {})
            lost = orphans(self.names.roots(), self.steps.optimizers, bare.values())
            if lost:
                called = {id(p): name for name, p in bare.items()}
                shown = lost[:NAMES_LISTED]
                extra.update(named("not_stepped", self.names.names_of(
                    shown, [called.get(id(p)) for p in shown]), len(lost)))
            stepped = list(self.names.with_gradients(ps, given_names(opt)))
            unlisted = self._unlisted.pop(call.record.seq, None)
            if unlisted is not None:  # their weights as the step left them, together too
                unlisted["weight_norm"] = (self._together([p for _, p in stepped[MAX_SLOTS:]]) or (None,))[0]
                extra["unlisted"] = unlisted
            model = common_part([name for name, _ in stepped])
            if model:  # what it trains: a GAN's two Adams read apart
                extra["trains"] = model
            # The step's result: the parameters it updated, as they are now.
            self.log.close(call, ended, iter(stepped), role="param", extra=extra)
            site, who = call.record.call_site, {"seq": call.record.seq, **({"model": model} if model else {})}
        self.stale.after_step(ps)
        self.steps.after_optimizer_step(opt, site, who)

    def _gradients(self, opt: Any) -> Iterator[tuple[str, torch.Tensor]]:
        """(name, .grad) of the optimizer's parameters that have one."""
        return self.names.gradients(optimizer_params(opt), given_names(opt))

    def _put_closure_gradients(self, seq: int) -> None:
        """The `param_grad` of a step taken with a closure: the gradients its first
        backward made, at the parameters the step started from (as a plain step's are)."""
        opt = self._closure_steps.pop(seq, None)
        if opt is not None:
            self._put_gradients(seq, opt)

    def _put_gradients(self, seq: int, opt: Any) -> None:
        """The `param_grad` slots of optimizer call `seq`; NaN/Inf among them marks the call
        (as its output, the parameters it leaves, does once it returns, if they hold any).
        The parameters past the slots' cap are taken together (param_totals.py)."""
        grads = list(self._gradients(opt))
        nonfinite = self.log.put_slots(seq, "param_grad", iter(grads))
        if len(grads) > MAX_SLOTS:
            unlisted = [g for _, g in grads[MAX_SLOTS:]]
            together = self._together(unlisted)
            if together is not None:
                norm, bad = together
                self._unlisted[seq] = {"count": len(unlisted), "grad_norm": norm, "grad_nonfinite": bad}
                nonfinite = nonfinite or bad > 0
        if nonfinite:
            self.log.writer.put_nonfinite_grad(seq)

    def _together(self, tensors: list[torch.Tensor]) -> tuple[float | None, int] | None:
        """`norm_together(tensors)`; None, with a warning, where it fails (a device whose
        values cannot be read): on its own, as the step's updates and the rest of its
        record come after it."""
        try:
            return norm_together(tensors)
        except Exception as exc:
            self.warn(f"recording error in the parameters past the {MAX_SLOTS} listed: "
                      f"{type(exc).__name__}: {exc}")
            return None

    def _zero_grad(self, original: Callable[..., Any], owner: Any, *args: Any, **kwargs: Any) -> Any:
        """An optimizer's or a module's zero_grad(): the losses whose gradients it drops."""
        result = original(owner, *args, **kwargs)
        if self._active():
            self._guard(self.steps.zeroed, owner)
            self._guard(self.stale.zeroed, owner)
        return result

    def _grad_scaler_step(self, original: Callable[..., Any], scaler: Any, optimizer: Any,
                          *args: Any, **kwargs: Any) -> Any:
        """GradScaler.step: when it skips `optimizer.step()` (inf/NaN gradients), the loop
        pass is still a training step, only one whose update was skipped; without this the
        skipped passes read as gradient accumulation, their losses summed."""
        taken = self.steps.steps_taken
        result = original(scaler, optimizer, *args, **kwargs)
        if self.steps.steps_taken == taken and self._active():
            self._guard(self._skipped_step, optimizer)
        return result

    def _skipped_step(self, optimizer: Any) -> None:
        self.steps.add_optimizer(optimizer)
        self.steps.note_extra("optimizer_step_skipped", "GradScaler: inf/NaN gradients")
        self.steps.after_optimizer_step(optimizer)
