"""The local tracer of one run of a user frame (functions.py installs it): the frame as a
call in the tree, with its arguments and return value, and each line it ran reported to
lines.LineShapes.

A frame outside every recorded call is a call only when a user loop called it (maybe
through a decorator's wrapper) and, if it has a loop of its own, that loop holds no step
(`wanted`). A frame left by an exception closes with it as its error; one tvis stopped at
the step limit closes unfinished.
"""

from __future__ import annotations

import dis
import inspect
import itertools
import time
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

import torch

from tvis_tui.record.calls import OpenCall, call_phase
from tvis_tui.record.frame_locals import frame_locals
from tvis_tui.record.lines import bound_entries, rebound, tensor_ids
from tvis_tui.record.loop_head import body_offset
from tvis_tui.record.slots import leaves
from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.tvis_frames import own_work
from tvis_tui.store.records import Site

if TYPE_CHECKING:
    from tvis_tui.record.functions import FunctionTracer

_ARG_FLAGS = inspect.CO_VARARGS | inspect.CO_VARKEYWORDS


@dataclass(frozen=True, slots=True)
class Plan:
    """What to do with frames of one code object."""

    path: str
    calls: bool  # record each run of it as a call
    forward: bool  # a module's forward: a call when run directly, not by the module's call
    lines: bool  # report its lines
    has_loop: bool
    loops: tuple[tuple[int, int], ...]  # bytecode offsets (first, last) of each loop
    def_site: Site


WRAPPER_FRAMES = 2
"""Library frames between a user function and the user loop that called it that still
count it as called from the loop: a decorator's wrapper (torch.no_grad's is one frame)."""


def _wraps(frame: FrameType, code: CodeType) -> bool:
    """Whether `frame` runs a wrapper of the function of `code`: the wrapped function is a
    variable of the wrapper's closure (torch.no_grad's `func`, torch.compile's `fn`)."""
    names = frame.f_code.co_freevars
    if not names:
        return False
    values = frame_locals(frame)  # free variables are among them
    return any(getattr(values.get(name), "__code__", None) is code for name in names)


def _in_loops(loops: tuple[tuple[int, int], ...], offset: int) -> bool:
    return any(first <= offset <= last for first, last in loops)


class TracedFrame:
    """The local tracer of one run of a user frame."""

    __slots__ = ("tracer", "plan", "call", "snapshot", "line", "line_step", "error")

    def __init__(self, tracer: FunctionTracer, plan: Plan, frame: FrameType) -> None:
        self.tracer = tracer
        self.plan = plan
        self.call: OpenCall | None = None
        self.snapshot = tensor_ids(frame_locals(frame)) if plan.lines else {}
        self.line = 0
        self.line_step = 0  # the step `line` started in
        self.error: BaseException | None = None

    def wanted(self, frame: FrameType) -> bool:
        tracer = self.tracer
        if tracer.recorder.past_limit(tracer.recorder.steps.step):
            return False
        stack = tracer.log.stack
        if stack:
            return True
        # Called from a loop of user code, maybe through a decorator's wrapper
        # (`@torch.no_grad()` on an evaluate function).
        inner, caller = frame, frame.f_back
        for _ in range(WRAPPER_FRAMES + 1):
            if caller is None:
                return False
            loops = tracer.loops(caller.f_code)
            if loops is not None:
                if not _in_loops(loops, body_offset(caller.f_code, caller.f_lasti)):
                    return False
                # A function with a loop of its own (a rollout, a train_step's
                # micro-batches, an evaluation) may instead hold the training loop
                # (train_epoch), or a GAN's k discriminator steps, and wrap many steps:
                # it is recorded once the loop holding the steps is known, and not when
                # its own loop is that one.
                return not self.plan.has_loop or (bool(tracer.step_loops) and not any(
                    code is frame.f_code for code, _ in tracer.step_loops))
            if not _wraps(caller, inner.f_code):
                return False  # library code calling back (Module.apply, AveragedModel's avg_fn)
            inner, caller = caller, caller.f_back
        return False

    def open(self, frame: FrameType) -> OpenCall:
        tracer = self.tracer
        tracer.log.close_left(frame)
        phase = call_phase(tracer.log.stack)
        code = frame.f_code
        call = tracer.log.open(kind="function", name=getattr(code, "co_qualname", code.co_name),
                               type_="function", phase=phase, owner=id(self),
                               call_site=tracer.recorder.sites.call_site(frame.f_back),
                               def_site=self.plan.def_site, inputs=_arguments(frame), extra={"user": True},
                               transparent=True, root=self._model(frame), frame=frame)
        return call

    def _model(self, frame: FrameType) -> torch.nn.Module | None:
        """The module whose forward this frame runs directly (`model.forward(x)`): its
        submodules' calls are named inside it (`enc`), as under `model(x)`."""
        if not self.plan.forward:
            return None
        names = self.tracer.recorder.names
        module = frame.f_locals[frame.f_code.co_varnames[0]]
        inside = names.inside(module)  # the forward of a part of a model already called
        if inside is not None:
            return inside[0]
        names.root_name(module, lambda: frame.f_back)  # names its parameters too
        return module

    @own_work
    def event(self, frame: FrameType, event: str, arg: Any) -> Any:
        tracer = self.tracer
        if not tracer._live:
            return None
        ended = time.perf_counter_ns()
        reentry = tracer.recorder._reentry
        if reentry.inside:
            return self.event
        started = tracer.log.begin_hook()
        reentry.inside = True
        try:
            if event == "line":
                self._line_done(frame)
                self.line = frame.f_lineno
                self.line_step = tracer.recorder.steps.step
            elif event == "return":
                self._line_done(frame)
                self._close(arg, ended, None if _returns(frame) else self.error)
                return None
            elif event == "exception":  # raised here or passing through; maybe caught
                self.error = arg[1]
        except Exception as exc:  # a tvis bug must never break training
            tracer.failed = True
            tracer.warn(exc)
        finally:
            reentry.inside = False
            tracer.log.end_hook(started)
        return self.event

    def _line_done(self, frame: FrameType) -> None:
        """The line `self.line` has run: report the tensors it bound."""
        if not self.plan.lines or self.line == 0:
            return
        tracer = self.tracer
        if not tracer.recorder.in_recording_process() or torch.compiler.is_compiling():
            return
        # The snapshot follows every line, so the first recorded line reports only its own.
        self.snapshot, changed = rebound(frame_locals(frame), self.snapshot)
        if tracer.recording(self.line_step):
            assert tracer.lines is not None
            if tracer.prelude is not None:
                tracer.first_iteration_lines(frame)
            tracer.lines.ran(self.plan.path, self.line, self.line_step, tracer.recorder.steps.step, changed)
        elif tracer.log.last_seq == 0:
            tracer.before_first_call(frame, self.plan.path, self.line, bound_entries(changed))

    def _close(self, result: Any, ended: int, error: BaseException | None) -> None:
        """Close the call: it returned `result`, or `error` left it."""
        call, log = self.call, self.tracer.log
        self.call = None
        if call is None:
            return
        stack = log.stack
        if call not in stack:
            return  # already closed (an abandoned run)
        extra = None
        if isinstance(error, StopRecording):  # tvis stopped the script: no error of its own
            error, extra = None, {"unfinished": True}
        while stack[-1] is not call:
            # Opened inside it and never closed (a BaseException passes torch's module
            # hooks by): closed now, innermost first, so the tree goes on soundly.
            log.close(stack[-1], ended, error=error, extra={"unfinished": True})
        outputs = leaves(result, "out") if error is None and extra is None else iter(())
        log.close(call, ended, outputs, error=error, extra=extra)


_RETURNS = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST") if name in dis.opmap)


def _returns(frame: FrameType) -> bool:
    """Whether a frame that is leaving returns, rather than lets an exception out (the
    trace's "return" event passes None for both): it stands on a return instruction.
    An exception the function caught and the lines run after it (a `with` block's exit)
    do not tell which."""
    return frame.f_code.co_code[frame.f_lasti] in _RETURNS


def _arguments(frame: FrameType) -> Any:
    """(name, value) leaves of the function's parameters, as bound on entry."""
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bin(code.co_flags & _ARG_FLAGS).count("1")
    names = code.co_varnames[:count]
    values = frame_locals(frame)
    return itertools.chain.from_iterable(
        leaves(values[name], name) for i, name in enumerate(names)
        if name in values and not (i == 0 and name in ("self", "cls")))
