"""The recorder's hooks on backward: `torch.autograd.backward` (what `loss.backward()`
calls), `torch.autograd.grad`, and GradScaler.scale (whose unscaled loss is the step's).

A backward call records its loss as the step's (not a nested one: a reentrant checkpoint
recomputing), runs with the output hooks of gradients.py recording activation gradients,
and, where no optimizer will show them, attaches the parameters' gradients itself.
"""

from __future__ import annotations

import sys
import time
import weakref
from types import FrameType
from typing import Any, Callable, Iterator

import torch

from tvis_tui.record.calls import OpenCall
from tvis_tui.record.hook_base import HookBase
from tvis_tui.record.slots import leaves


class BackwardHooks(HookBase):
    _scaled: tuple[weakref.ref, torch.Tensor] | None  # GradScaler.scale's result and its loss
    _closure_steps: dict[int, Any]  # OptimizerHooks'
    _put_closure_gradients: Callable[[int], None]  # OptimizerHooks'

    def _backward(self, original: Callable[..., Any], tensors: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or not self._active():
            return original(tensors, *args, **kwargs)
        self._before_backward(sys._getframe(1))
        self._guard(self.stale.before_backward)  # backward() adds to .grad; autograd.grad does not
        call = self._guard(self._open_backward, tensors, sys._getframe(2))
        scaled = self._before_scaling(_loss_of(tensors)) is not None
        try:
            result = self.grads.during_backward(original, tensors, *args, scaled=scaled, **kwargs)
        except BaseException as exc:
            self._close_failed(call, exc)
            raise
        if call is not None:
            self._guard(self._close_backward, call, time.perf_counter_ns())
        return result

    def _before_backward(self, here: FrameType) -> None:
        """As a backward begins, called from `here`: the calls left open are closed, a
        complete step waiting for its loop's head ends (a new iteration), the step limit
        is checked."""
        self._guard(self.log.close_left, here)
        if self.steps.pending is not None and not self.steps.tentative and not self._inside_backward():
            self._guard(self.steps.end_pending)
        self._stop_if_done()

    def _open_backward(self, tensors: Any, frame: Any, name: str = "backward", trains: bool = True) -> OpenCall:
        """`trains`: its loss is the step's (not a gradient penalty's torch.autograd.grad)."""
        loss = _loss_of(tensors)
        nested = self._inside_backward()
        call = self.log.open(kind="backward", name=name, type_="backward", phase="backward",
                             owner=id(tensors), call_site=self.sites.call_site(frame),
                             def_site=None, inputs=leaves(loss, "loss"))
        # Several losses at once (`torch.autograd.backward([l1, l2])`) are the step's each.
        losses = loss if isinstance(loss, (tuple, list)) else (loss,)
        if trains and not nested and all(isinstance(t, torch.Tensor) and t.numel() == 1 and not t.is_meta
                                         for t in losses):
            closure = any(c.record.kind == "optimizer" for c in self.log.stack)
            for one in losses:
                unscaled = self._before_scaling(one)
                self.steps.add_loss(float((one if unscaled is None else unscaled).detach()), in_closure=closure)
        return call

    def _before_scaling(self, loss: Any) -> torch.Tensor | None:
        """The loss GradScaler.scale made `loss` of (None: not a scaled loss)."""
        scaled = self._scaled
        return scaled[1] if scaled is not None and scaled[0]() is loss else None

    def _autograd_grad(self, original: Callable[..., Any], outputs: Any, inputs: Any, *args: Any,
                       **kwargs: Any) -> Any:
        """torch.autograd.grad called by the script: a backward whose gradients come back as
        its result. With no torch.optim in use and no graph of the gradients made, it is the
        training's (a loop that updates the parameters itself): its loss is the step's, it
        completes the step as backward() does, and the module outputs' gradients are its.
        Else it is part of the step (a gradient penalty, a meta-learning inner step), and
        the outputs' gradients recorded are backward()'s. Library code's calls
        (torch.autograd.functional) are not the script's: not recorded."""
        caller = sys._getframe(2)
        if (torch.compiler.is_compiling() or not self._active()
                or self.sites.user_path(caller.f_code.co_filename) is None):
            return original(outputs, inputs, *args, **kwargs)
        self._before_backward(caller)
        if isinstance(inputs, Iterator):
            inputs = tuple(inputs)  # as torch does; a generator (model.parameters()) is read once
        create_graph = kwargs.get("create_graph", args[2] if len(args) > 2 else False)
        trains = not (len(self.steps.optimizers) or create_graph or self._inside_backward())
        call = self._guard(self._open_backward, outputs, caller, "autograd.grad", trains)
        try:
            if trains:  # the output hooks record only inside during_backward
                grads = self.grads.during_backward(original, outputs, inputs, *args, **kwargs)
            else:
                grads = original(outputs, inputs, *args, **kwargs)
        except BaseException as exc:
            self._close_failed(call, exc)
            raise
        if call is not None:
            self._guard(self._close_autograd_grad, call, time.perf_counter_ns(), inputs, grads, trains)
        return grads

    def _close_autograd_grad(self, call: OpenCall, ended: int, inputs: Any, grads: Any, trains: bool) -> None:
        """The gradients of parameters are its `param_grad` slots (by the parameters' names),
        the others its outputs."""
        if self.log.innermost(call.owner) is None:
            return
        if isinstance(inputs, dict):  # then torch returns a dict too
            inputs, grads = inputs.values(), grads.values()
        elif isinstance(inputs, (torch.Tensor, torch.autograd.graph.GradientEdge)):
            inputs = (inputs,)
        names = self.names.parameter_names()
        named = [(names.get(id(x)), g) for x, g in zip(inputs, grads)]
        self.log.close(call, ended, ((f"grads[{i}]", g) for i, (name, g) in enumerate(named)
                                     if name is None and g is not None))
        params = [(name, g) for name, g in named if name is not None and g is not None]
        if params:
            self.log.put_slots(call.record.seq, "param_grad", iter(params))
        if trains:
            self.steps.after_backward()

    def _grad_scale(self, original: Callable[..., Any], scaler: Any, outputs: Any) -> Any:
        """GradScaler.scale: remember the loss before scaling, to record it as the loss."""
        result = original(scaler, outputs)
        if isinstance(outputs, torch.Tensor) and isinstance(result, torch.Tensor) and result is not outputs:
            self._scaled = (weakref.ref(result), outputs)
        return result

    def _inside_backward(self) -> bool:
        """True inside another backward() (a reentrant checkpoint recomputing): such a
        call is part of the outer one, neither a loss nor the end of a step."""
        return any(c.record.kind == "backward" for c in self.log.stack)

    def _close_backward(self, call: OpenCall, ended: int) -> None:
        if self.log.innermost(call.owner) is None:
            return
        self.log.close(call, ended)
        if self._inside_backward():
            return
        steps = [c.record.seq for c in self.log.stack if c.record.seq in self._closure_steps]
        if steps:
            self._put_closure_gradients(steps[-1])
        if len(self.steps.optimizers):
            return
        # No optimizer will show the gradients: attach them to the backward call.
        params = [p for root in self.names.roots() for p in root.parameters()]
        self.log.put_slots(call.record.seq, "param_grad", self.names.gradients(params))
        self.steps.after_backward()


def _loss_of(tensors: Any) -> Any:
    """What backward() was called on: one loss, or several (`backward([l1, l2])`)."""
    return tensors[0] if isinstance(tensors, (tuple, list)) and len(tensors) == 1 else tensors
