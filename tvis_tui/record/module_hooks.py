"""The recorder's hooks on nn.Module calls: torch's global forward pre- and post-hooks.

A call opens in the pre-hook (its name, phase, call and def sites, inputs) and closes in the
post-hook (outputs, error, duration), after the script's own hooks where it has some
(own_hooks.py). A closed call starts watching its outputs' gradients (gradients.py) and, for
a loss, recomputes the per-sample loss (per_sample_loss.py). Modules left out by
--include/--exclude-modules still name the modules they call.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable, Iterator

import torch
from torch.nn.modules import module as module_module
from torch.nn.modules.loss import _Loss

from tvis_tui.record import per_sample_loss
from tvis_tui.record.calls import MODULE_CALL_CODE, OpenCall, call_phase, running_frame
from tvis_tui.record.hook_base import HookBase, functorch_level, untraced
from tvis_tui.record.mode_layers import eval_while_training
from tvis_tui.record.module_config import config_extra
from tvis_tui.record.module_backward import ModuleBackwardTimes
from tvis_tui.record.names import class_name
from tvis_tui.record.slots import leaves
from tvis_tui.record.updates import NAMES_LISTED

FUNC_TRANSFORM_NOTE = ("calls inside torch.func transforms (vmap, grad, jacrev, ...) were not "
                       "recorded: their tensors are batched or wrapped, with no values to read")


class Unrecorded(threading.local):
    """Module calls left out by --include/--exclude-modules that are still running, as
    (module id, root, depth of the call log's stack at their start): the modules they
    call are named under the same root (`encoder.layers.0` with its model not recorded)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, Any, int]] = []


class ModuleHooks(HookBase):
    modules_recorded: bool  # whether --include/--exclude-modules left any module
    _unrecorded: Unrecorded

    @untraced
    def _module_pre(self, module: torch.nn.Module, args: tuple) -> None:
        here = sys._getframe(1)
        running = running_frame(here, MODULE_CALL_CODE)  # the frame this call runs in
        self._fast_path.call_starts(module, running)
        if not self._active():
            if functorch_level() is not None and self.in_recording_process():
                self.warn(FUNC_TRANSFORM_NOTE)
            return
        self._stop_if_done()
        self._guard(self._open_module, module, args, here, running)

    def _open_module(self, module: torch.nn.Module, args: tuple, frame: Any, running: Any) -> None:
        self.log.close_left(frame)
        stack = self.log.stack
        enclosing_root = self._enclosing_root(stack)
        if enclosing_root is None:
            caller = lambda: self.sites.user_frame(frame)  # walked on a first call only
            root, name = self.names.inside(module, caller) or (module, self.names.root_name(module, caller))
        else:
            root, name = enclosing_root, self.names.name(enclosing_root, module)
        cls = type(module)
        # Asked only under --include/--exclude-modules: every module call passes here. A part
        # of a model called with no module call open (a checkpointed block recomputed in
        # backward, `D[0](x)`) is still inside it: filtered by its name, as an enclosed call is.
        if self.options.filters_modules and not self.options.module_recorded(
                name, cls.__name__, None if root is module else self.names.root_name(root)):
            self._unrecorded.calls.append((id(module), root, len(stack)))
            return
        self.modules_recorded = True
        criterion = isinstance(module, _Loss)
        phase = call_phase(stack, "loss" if criterion or _own_loss(module) else None)
        opaque = _opaque_kind(module)
        if opaque is not None:
            self.warn(f"{opaque}: the calls inside it were not recorded (its own inputs and outputs were)")
        inputs = leaves(args, "args")
        kwargs = _passed_kwargs(module, running)
        if kwargs is not None:
            inputs = itertools.chain(inputs, leaves(kwargs, "kwargs"))
        extra = config_extra(module, args, self.data.batch_size)
        if eval_while_training(module, root):
            extra = {**(extra or {}), "eval_while_training": True}
            # The step view's title lists them: no viewer scans the step's calls.
            self._guard(self.steps.list_extra, "eval_while_training", name, NAMES_LISTED)
        call = self.log.open(kind="module", name=name, type_=cls.__name__, phase=phase, owner=id(module),
                             call_site=self.sites.call_site(frame), def_site=self.sites.def_site(cls),
                             inputs=inputs, root=root, criterion=criterion, frame=running, extra=extra)
        call.kwargs_at_open = kwargs is not None
        if module._forward_pre_hooks or len(module_module._global_forward_pre_hooks) > 1:  # the script's
            call.passed = (args, kwargs)
        if self.memory.follows_nodes() and torch.is_grad_enabled():
            call.node_low = ModuleBackwardTimes.low()
        self._after_own_hooks.enter(module, call)

    def _enclosing_root(self, stack: list[OpenCall]) -> Any:
        """The root module of the innermost module call running, recorded or not, or of a
        forward run directly (`model.forward(x)`, a function call with a root)."""
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].root is not None), None)
        unrecorded = self._unrecorded.calls
        if unrecorded and (at is None or unrecorded[-1][2] > at):
            return unrecorded[-1][1]
        return None if at is None else stack[at].root

    @untraced
    def _module_post(self, module: torch.nn.Module, args: tuple, *rest: Any) -> None:
        self._fast_path.call_ends(module)
        if not self._active():
            return
        if self._after_own_hooks.closes(module):
            # Closed after the script's hooks, which may replace the output (own_hooks.py).
            self._after_own_hooks.global_hook_ran(module, failed=len(rest) == 1)
            return
        ended = time.perf_counter_ns()
        # Registered with kwargs, the hook gets (kwargs, result); torch's always_call path,
        # run while the forward's exception propagates, passes (result) alone.
        if len(rest) == 2:
            (kwargs, result), error = rest, None
        else:
            kwargs, result, error = {}, rest[0], sys.exc_info()[1]
        self._guard(self._close_module, module, kwargs, result, error, ended, args)

    @untraced
    def _module_post_last(self, module: torch.nn.Module, args: tuple, kwargs: dict, result: Any,
                          error: BaseException | None) -> None:
        """Close a call after the script's hooks (own_hooks.py)."""
        ended = time.perf_counter_ns()
        self._guard(self._close_module, module, kwargs, result, error, ended, args)

    def _close_module(self, module: torch.nn.Module, kwargs: dict, result: Any,
                      error: BaseException | None, ended: int, args: tuple = ()) -> None:
        call = self.log.innermost(id(module))
        if call is None:
            unrecorded = self._unrecorded.calls
            if unrecorded and unrecorded[-1][0] == id(module):
                unrecorded.pop()
            return
        start = call.inputs
        if kwargs and not call.kwargs_at_open:
            passed = list(leaves(kwargs, "kwargs"))
            self.log.put_slots(call.record.seq, "input", iter(passed), start)
            start += len(passed)
        if call.passed is not None:
            self.log.put_slots(call.record.seq, "input", _after_own_pre_hooks(call.passed, args, kwargs), start)
        outputs = list(leaves(result, "out")) if error is None else []
        if _stops_recomputation(error):  # torch ending a checkpoint's recompute early
            self.log.close(call, ended, extra={"recompute_stopped": True})
            return
        record = self.log.close(call, ended, iter(outputs), error=error)
        if error is None and call.node_low is not None and call.gpu_start is None:  # CPU nodes only
            self.memory.node_times.closed(record, call.node_low)
        if error is None and self.options.grads:
            self.grads.watch(call.record.seq, iter(outputs), record.nonfinite_output)
        if error is None and call.criterion and not per_sample_loss.is_nested(self.log.stack, call):
            per_sample_loss.attach(self.log, self.steps, call,
                                   lambda: per_sample_loss.for_module(module, args, kwargs), self.warn)

    def _compile(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        target = args[0] if args else kwargs.get("model")
        label = type(target).__name__ if isinstance(target, torch.nn.Module) else \
            getattr(target, "__qualname__", "a function")
        self.warn(f"torch.compile was used on {label}: code it compiles runs without tvis's "
                  "hooks, so calls inside it are not recorded")
        return original(*args, **kwargs)


_NOTHING = object()
AFTER_PRE_HOOKS = " after pre-hooks"
"""Names the inputs a module's forward received where its own pre-hooks replaced them."""


def _after_own_pre_hooks(passed: tuple[tuple, dict | None], args: tuple,
                         kwargs: dict) -> Iterator[tuple[str, Any]]:
    """What the module's forward received, where a pre-hook of its own (or a global one of
    the script's) replaced what the caller passed (a reshape, a cast, a move to another
    device): the inputs recorded are the caller's, and these beside them (sweep T: a
    Linear(6, 3) read as given [4, 2, 3] float64, when its own hook had made it [4, 6]
    float32)."""
    passed_args, passed_kwargs = passed
    for given, received, root in ((passed_args, args, "args"), (passed_kwargs, kwargs, "kwargs")):
        if given is None or received is given:
            continue
        before = dict(leaves(given, root))
        # Only what a hook replaced: a tensor it passed on as it was is recorded once.
        yield from ((path + AFTER_PRE_HOOKS, value) for path, value in leaves(received, root)
                    if before.get(path, _NOTHING) is not value)


def _opaque_kind(module: torch.nn.Module) -> str | None:
    """What hides the calls inside `module` from module hooks, if anything (not a
    torch.compile'd one: the call to torch.compile warned already)."""
    if isinstance(module, torch.jit.ScriptModule):
        return f"{class_name(module)} is TorchScript (torch.jit)"
    return None


def _stops_recomputation(error: BaseException | None) -> bool:
    """Non-reentrant checkpointing stops recomputing a forward in backward, once it has the
    tensors it needs, by raising this through the modules it ran: not a failure."""
    return type(error).__name__ == "_StopRecomputationError" and \
        type(error).__module__ == "torch.utils.checkpoint"


def _own_loss(module: torch.nn.Module) -> bool:
    """A loss module of the script's own (FocalLoss, DiceLoss: an nn.Module, not a _Loss):
    named so and without parameters (a model that returns its loss, `ModelWithLoss`, has)."""
    return type(module).__name__.endswith("Loss") and next(module.parameters(), None) is None


def _passed_kwargs(module: torch.nn.Module, running: FrameType | None) -> dict[str, Any] | None:
    """The keyword arguments the caller passed, where a pre-hook of the module's own may
    replace them before forward (`with_kwargs=True`): read from the call's frame, as the
    global pre-hook (tvis's) runs before it. Keyword inputs are otherwise read after the
    hooks, from the global forward hook; positional ones are the caller's either way."""
    if not module._forward_pre_hooks_with_kwargs or running is None:
        return None
    kwargs = running.f_locals.get("kwargs")
    return kwargs if type(kwargs) is dict else None
