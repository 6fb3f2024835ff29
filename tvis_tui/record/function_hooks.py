"""The recorder's hooks on torch functions the script calls: the functional losses
(`F.cross_entropy`, ...) as calls of the "loss" phase with their per-sample loss, and
gradient clipping (`clip_grad_norm_`, `clip_grad_value_`) as calls of the "optimizer" phase.
"""

from __future__ import annotations

import functools
import itertools
import sys
import time
from typing import Any, Callable

import torch

from tvis_tui.record import per_sample_loss
from tvis_tui.record.calls import OpenCall, call_phase
from tvis_tui.record.hook_base import HookBase
from tvis_tui.record.slots import leaves

LOSS_FUNCTIONS = (
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "ctc_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
)
"""torch.nn.functional losses recorded as calls of the "loss" phase (the loss modules
call them too; inside a loss module they are not recorded twice)."""


class FunctionHooks(HookBase):
    def _loss_function(self, name: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._active():
            self._guard(self.log.close_left, sys._getframe(1))
        stack = self.log.stack
        inside_loss_module = any(c.criterion for c in stack)  # a criterion's own, maybe via a helper
        if not self._active() or inside_loss_module:
            return original(*args, **kwargs)
        self._stop_if_done()
        call = self._guard(self._open_function, name, original, args, kwargs, sys._getframe(2))
        return self._function_call(call, original, args, kwargs,
                                   functools.partial(per_sample_loss.for_function, name[2:], original, args, kwargs))

    def _function_call(self, call: OpenCall | None, original: Callable[..., Any], args: tuple, kwargs: dict,
                       per_sample: Callable[[], Any] | None = None) -> Any:
        """Run a wrapped torch function whose call `call` opened, and close it."""
        try:
            result = original(*args, **kwargs)
        except BaseException as exc:
            self._close_failed(call, exc)
            raise
        if call is not None:
            self._guard(self._close_function, call, time.perf_counter_ns(), result, per_sample)
        return result

    def _clip_grads(self, name: str, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """torch.nn.utils.clip_grad_norm_ / clip_grad_value_: a call in the tree, where the
        script made it. One made before backward (or after zero_grad) clips nothing, and
        says so: no parameter had a gradient."""
        if not self._active():
            return original(*args, **kwargs)
        self._guard(self.log.close_left, sys._getframe(1))
        # The parameters as a list: a generator (`model.parameters()`) is read once, here,
        # and clipping takes the same parameters either way.
        args, kwargs, params = _parameters_listed(args, kwargs)
        call = self._guard(self._open_clip, name, original, args, kwargs, params, sys._getframe(2))
        return self._function_call(call, original, args, kwargs)

    def _open_clip(self, name: str, fn: Any, args: tuple, kwargs: dict, params: list[Any], frame: Any
                   ) -> OpenCall:
        options = itertools.chain(leaves(args[1:], "args"),  # not the parameters: max_norm and such
                                  leaves({k: v for k, v in kwargs.items() if k != "parameters"}, "kwargs"))
        with_grad = sum(1 for p in params if isinstance(p, torch.Tensor) and p.grad is not None)
        return self.log.open(kind="function", name=name, type_="function", phase=call_phase(self.log.stack, "optimizer"),
                             owner=id(fn), call_site=self.sites.call_site(frame),
                             def_site=self.sites.def_site(type(fn), "__call__", fn), inputs=options,
                             extra={"clip_params": len(params), "clip_grads": with_grad})

    def _open_function(self, name: str, fn: Any, args: tuple, kwargs: dict, frame: Any) -> OpenCall:
        inputs = itertools.chain(leaves(args, "args"), leaves(kwargs, "kwargs"))
        return self.log.open(kind="function", name=name, type_="function",
                             phase=call_phase(self.log.stack, "loss"), criterion=True, owner=id(fn),
                             call_site=self.sites.call_site(frame),
                             def_site=self.sites.def_site(type(fn), "__call__", fn), inputs=inputs)

    def _close_function(self, call: OpenCall, ended: int, result: Any,
                        per_sample: Callable[[], Any] | None = None) -> None:
        if self.log.innermost(call.owner) is not None:
            self.log.close(call, ended, leaves(result, "out"))
            if per_sample is not None and not per_sample_loss.is_nested(self.log.stack, call):
                per_sample_loss.attach(self.log, self.steps, call, per_sample, self.warn)


def _parameters_listed(args: tuple, kwargs: dict) -> tuple[tuple, dict, list[Any]]:
    """A clip call's arguments with its `parameters` (first, or by keyword) as a list."""
    if args:
        params = [args[0]] if isinstance(args[0], torch.Tensor) else list(args[0])
        return (params, *args[1:]), kwargs, params
    if "parameters" in kwargs:
        given = kwargs["parameters"]
        params = [given] if isinstance(given, torch.Tensor) else list(given)
        return args, {**kwargs, "parameters": params}, params
    return args, kwargs, []
