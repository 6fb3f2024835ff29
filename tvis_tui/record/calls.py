"""The call stack of the recorder: opening and closing calls, in order, on every thread.

A call is written when it opens (so a killed run still shows it) and again when it
closes, with its duration, outputs and error. Each thread has its own stack; sequence
numbers are global. `duration_ns` leaves out the time tvis itself spent in hooks of the
call and of everything inside it.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from dataclasses import dataclass
from types import CodeType, FrameType
from typing import Any, Callable, Iterator

import torch

from tvis_tui.record.memory import PeakMemory
from tvis_tui.record.placement import PhasePlacer
from tvis_tui.record.slots import SlotMaker
from tvis_tui.record.steps import StepTracker
from tvis_tui.record.timing import CudaTimer, put_timed_call
from tvis_tui.store.records import CallRecord, Site, Slot
from tvis_tui.record.sink import WriterThread
from tvis_tui.text import without_ansi


def call_phase(stack: list["OpenCall"], own: str | None = None) -> str:
    """The phase of a call opening on `stack`: its `own` ("loss" for a criterion), else its
    caller's (a transform inside a batch is "data", a recompute inside backward is
    "backward"), else "forward"; so is an LBFGS closure's model call inside
    optimizer.step(). A forward or loss call made with autograd off (torch.no_grad,
    inference_mode) and no other call around it but user functions is "no_grad": an
    evaluation, a shape probe, a frozen part of the model, whose time is not the
    training forward's; so is everything inside it, a criterion too."""
    parent = stack[-1] if stack else None
    # No call around it but user functions (an optimizer step's closure has the step).
    top = parent is None or (parent.top and parent.transparent and parent.step_call is None)
    if parent is None or parent.record.phase == "optimizer" or (top and parent.record.phase == "no_grad"):
        inherited = "forward"  # under a no_grad user function, grad may be on again (enable_grad)
    else:
        inherited = parent.record.phase
    if inherited == "no_grad":
        return inherited
    phase = own or inherited
    if top and phase in ("forward", "loss") and not torch.is_grad_enabled() and not _in_autograd_function():
        return "no_grad"
    return phase


_FUNCTION_APPLY = torch.autograd.Function.apply.__func__.__code__  # type: ignore[attr-defined]


def _in_autograd_function() -> bool:
    """Whether an autograd.Function's forward is running for training: autograd is off
    inside it, and a reentrant checkpoint runs the training forward there. Without an input
    that requires grad (a checkpointed model evaluated under no_grad) it builds no graph."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code is _FUNCTION_APPLY:
            args = frame.f_locals.get("args", ())
            return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
        frame = frame.f_back
    return False


@dataclass(slots=True)
class OpenCall:
    """A call that has started and not yet returned."""

    record: CallRecord
    owner: int  # id() of the module/optimizer, to pair a post-hook with its pre-hook
    root: Any = None  # the root module whose names this call's children use
    started_ns: int = 0
    overhead_at_start: int = 0
    inputs: int = 0  # input slots written at open; keyword inputs are numbered after them
    kwargs_at_open: bool = False  # keyword inputs were among them (a pre-hook may replace them)
    # The arguments as passed (positional, keyword), where the module has pre-hooks of its
    # own: they run after tvis's (global) pre-hook and may replace them (module_hooks.py).
    passed: tuple[tuple, dict | None] | None = None
    # A user function (record/functions.py): a step's phase times count the calls inside
    # it, not it, so a `train_step()` wrapping them does not hide the phases.
    transparent: bool = False
    # Every call enclosing it is transparent, or an optimizer step: its time is a phase time.
    top: bool = True
    # The optimizer step it runs in (an LBFGS or SAM closure's forward and backward): their
    # time goes to their own phases, and the step's to "optimizer" less theirs.
    step_call: "OpenCall | None" = None
    nested_ns: int = 0  # phase time of the calls run inside this optimizer step
    nested_overhead_ns: int = 0
    gpu_start: Any = None  # a CUDA event where its clock started (timing.py), if on CUDA
    criterion: bool = False  # a loss module or functional loss, whatever its phase
    grad_inputs: bool = False  # an input tensor requires grad (graph_cut below)
    node_low: int | None = None  # the autograd node number its own nodes come after (module_backward.py)
    # The frame a call closed by a hook runs in (a module's Module._call_impl, an optimizer
    # step's wrapper): on the stack exactly as long as the call runs.
    frame: FrameType | None = None
    # The phase it is listed in, where it is not the one it opened with (placement.py).
    placed: str | None = None


GRAPH_CUTS_LISTED = 8


def cuts_graph(kind: str, phase: str, outputs: list[Slot]) -> bool:
    """Whether a forward's module or function call, run with autograd on and given an input
    that requires grad, returned floating-point tensors none of which does: `.detach()`,
    `.data`, a round trip through numpy or `torch.tensor(...)` cut the graph there, and
    nothing before the call gets a gradient through it (sweep O). An integer result
    (argmax) needs none; under `torch.no_grad()` no output does, by design."""
    if kind not in ("module", "function") or phase != "forward" or not torch.is_grad_enabled():
        return False
    floating = [s for s in outputs if s.dtype is not None and s.dtype.startswith(("float", "bfloat", "complex"))]
    return bool(floating) and not any(s.requires_grad for s in floating)


class Interrupted(BaseException):
    """What closes a call left by an exception no hook saw, where the script's handler is
    over: torch runs its closing hooks on an Exception only, so a KeyboardInterrupt or
    SystemExit the script caught left the call open."""


MODULE_CALL_CODE = torch.nn.Module._call_impl.__code__
OPTIMIZER_STEP_CODE = torch.optim.Optimizer.profile_hook_step(lambda: None).__code__
"""The code a module call and an optimizer step run in while their hooks run."""


def running_frame(start: FrameType | None, code: CodeType, limit: int = 24) -> FrameType | None:
    """The innermost frame from `start` outward that runs `code`, if near."""
    frame = start
    for _ in range(limit):
        if frame is None or frame.f_code is code:
            return frame
        frame = frame.f_back
    return None


def on_stack(frame: FrameType, here: FrameType | None) -> bool:
    """Whether `frame` is `here` or one of its callers: a call runs while its frame is."""
    while here is not None:
        if here is frame:
            return True
        here = here.f_back
    return False


class _ThreadState(threading.local):
    def __init__(self) -> None:
        self.stack: list[OpenCall] = []
        self.overhead_ns = 0
        self.hook_started_ns = 0
        self.hook_depth = 0
        self.collecting = False  # a garbage collection is running (timing.py counts it whole)


class CallLog:
    """Numbers, nests and writes calls; knows nothing about what kind of call it is."""

    def __init__(self, writer: WriterThread, steps: StepTracker, max_bytes: int,
                 memory: PeakMemory, warn: Callable[[str], None]) -> None:
        self.writer = writer
        self.memory = memory
        self.steps = steps
        self.slots = SlotMaker(max_bytes, warn)
        self._seq = itertools.count(1)
        self._thread = _ThreadState()
        self.last_seq = 0
        self.failing_seq: int | None = None
        self._failing_exc: BaseException | None = None
        self.timer = CudaTimer()
        self._placer = PhasePlacer(writer, self._write_closed)
        steps.overhead_clock = self.overhead_so_far

    @property
    def stack(self) -> list[OpenCall]:
        return self._thread.stack

    def begin_hook(self) -> int:
        """Mark the start of tvis's own work in a hook; pair with `end_hook`."""
        now = time.perf_counter_ns()
        self._thread.hook_started_ns = now
        self._thread.hook_depth += 1
        return now

    def end_hook(self, started_ns: int) -> None:
        self._thread.overhead_ns += time.perf_counter_ns() - started_ns
        self._thread.hook_depth -= 1

    def charge_outside_hooks(self, started_ns: int) -> None:
        """Count tvis's work since `started_ns` as overhead when it ran in the script's own
        code on this thread (a callback where a tensor died); inside a hook it is counted."""
        state = self._thread
        if state.hook_depth == 0 and not state.collecting:
            state.overhead_ns += time.perf_counter_ns() - started_ns

    def overhead_done(self) -> int:
        """tvis's time on this thread in the hooks that have ended."""
        return self._thread.overhead_ns

    def overhead_so_far(self) -> int:
        """tvis's time on this thread so far, the hook running now included."""
        state = self._thread
        running = time.perf_counter_ns() - state.hook_started_ns if state.hook_depth > 0 else 0
        return state.overhead_ns + running

    def open(self, *, kind: str, name: str, type_: str, phase: str, owner: int,
             call_site: Site | None, def_site: Site | None, inputs: Iterator[tuple[str, Any]] = iter(()),
             root: Any = None, extra: dict[str, Any] | None = None,
             transparent: bool = False, criterion: bool = False, frame: FrameType | None = None) -> OpenCall:
        """`frame`: the frame the call runs in, for a call that a hook closes. The caller
        has closed the calls left open (`close_left`) before reading the stack."""
        stack = self._thread.stack
        parent = stack[-1].record if stack else None
        seq = next(self._seq)
        self.last_seq = max(self.last_seq, seq)
        record = CallRecord(
            seq=seq, parent=parent.seq if parent else 0, depth=len(stack),
            step=self.steps.step, phase=phase, kind=kind, name=name, type=type_,
            call_site=call_site, def_site=def_site, start_ns=time.time_ns(), extra=extra or {})
        outer = stack[-1] if stack else None
        call = OpenCall(record, owner, root, transparent=transparent, criterion=criterion, frame=frame)
        if outer is not None:
            call.top = outer.top and (outer.transparent or outer.record.kind == "optimizer")
            call.step_call = outer if outer.record.kind == "optimizer" else outer.step_call
        # On the stack before anything is written: a Ctrl-C from here on still finds it.
        stack.append(call)
        # A user function the loop calls itself takes its phase from what it runs.
        self._placer.opened(call, placed=not (transparent and call.top and phase == "forward"))
        self.steps.note_call(seq, phase)
        on_cuda = [False]
        inputs = self.timer.watch(self.memory.watch(inputs, phase, backward=kind == "backward"), on_cuda)
        slots, _ = self.slots.make(seq, "input", inputs)
        self.writer.put_slots(seq, slots)
        call.inputs = len(slots)
        call.grad_inputs = any(slot.requires_grad for slot, _ in slots)
        # The hook's work so far is counted as overhead when the hook ends; the call's
        # clock starts now, so only the rest of the hook may be taken off its duration.
        call.started_ns = time.perf_counter_ns()
        if on_cuda[0]:
            call.gpu_start = self.timer.mark()
        call.overhead_at_start = self._thread.overhead_ns + call.started_ns - self._thread.hook_started_ns
        return call

    def close_left(self, here: FrameType) -> None:
        """Close the calls whose frame is not among `here` and its callers: an exception no
        hook saw left them (a Ctrl-C the script caught, to save a checkpoint and evaluate,
        say). Left open, every later call would nest in them. Closed with that exception
        while the script handles it, else with `Interrupted`. Every opener calls it first,
        before it reads the stack (its phase, its names, the parent)."""
        stack = self._thread.stack
        framed = next((c for c in reversed(stack) if c.frame is not None), None)
        if framed is None or on_stack(framed.frame, here):  # type: ignore[arg-type]
            return
        running = set()
        while here is not None:
            running.add(id(here))  # a left frame is held by its call: no live frame has its id
            here = here.f_back
        left = next(i for i, c in enumerate(stack) if c.frame is not None and id(c.frame) not in running)
        handled = sys.exc_info()[1]
        error = handled if handled is not None and not isinstance(handled, Exception) else Interrupted(
            "left by an exception no hook saw (a KeyboardInterrupt or SystemExit the script caught)")
        self.close_above(left, time.perf_counter_ns(), error)

    def close_above(self, depth: int, ended_ns: int, error: BaseException | None) -> None:
        """Close this thread's open calls above the first `depth`, innermost first, as
        unfinished: no hook or tracer is left to close them, and every later call would
        nest in them."""
        stack = self._thread.stack
        while len(stack) > depth:
            self.close(stack[-1], ended_ns, error=error, extra={"unfinished": True})

    def innermost(self, owner: int) -> OpenCall | None:
        """The innermost open call if it belongs to `owner` (else None: a pre-hook was
        skipped, e.g. while torch.compile traced). `close` takes it off the stack."""
        stack = self._thread.stack
        if stack and stack[-1].owner == owner:
            return stack[-1]
        return None

    def close(self, call: OpenCall, ended_ns: int, outputs: Iterator[tuple[str, Any]] = iter(()),
              *, role: str = "output", error: BaseException | None = None,
              extra: dict[str, Any] | None = None) -> CallRecord:
        gpu_end = self.timer.mark() if call.gpu_start is not None else None
        gpu = (call.gpu_start, gpu_end) if gpu_end is not None else None
        overhead = self._thread.overhead_ns - call.overhead_at_start
        duration = max(ended_ns - call.started_ns - overhead, 0)
        outputs = self.memory.watch(outputs, call.record.phase, activation=role == "output")
        slots, nonfinite = self.slots.make(call.record.seq, role, outputs)
        if call.record.kind == "backward":
            self.memory.backward_done()
        self.writer.put_slots(call.record.seq, slots)
        if error is not None:
            extra = _with_error_text(error, extra)
        elif role == "output" and call.grad_inputs and cuts_graph(
                call.record.kind, self._placer.phase_now(call), [slot for slot, _ in slots]):
            extra = {**(extra or {}), "graph_cut": True}
            # Listed in the step, so the parameters that got no gradient point there.
            self.steps.list_extra("graph_cuts", [call.record.seq, call.record.name], GRAPH_CUTS_LISTED)
        record = call.record.closed(duration, nonfinite, _describe(error) if error is not None else None,
                                    {**call.record.extra, **extra} if extra else call.record.extra)
        written = self._placer.closed(call, record, gpu)
        if written is not None:
            self._write_closed(written, gpu)
        if error is not None and error is not self._failing_exc:
            # Hooks see an exception innermost first: the first to see it is where it began.
            self._failing_exc, self.failing_seq = error, record.seq
        if call.top and not call.transparent:
            self._add_phase_time(call, duration, overhead, gpu_end)
        stack = self._thread.stack
        if stack and stack[-1] is call:  # written first, so an interrupt loses nothing
            stack.pop()
        return record

    def _write_closed(self, record: CallRecord, gpu: tuple[Any, Any] | None) -> None:
        if gpu is not None:
            self.writer.defer(put_timed_call, record, *gpu)
        else:
            self.writer.put_call(record, first=False)

    def _add_phase_time(self, call: OpenCall, duration: int, overhead: int, gpu_end: Any) -> None:
        """A phase-timed call's time, less that of the calls timed inside it (an optimizer
        step's closure)."""
        events = (call.gpu_start, gpu_end) if gpu_end is not None else None
        self.steps.add_phase_time(call.record.phase, max(duration - call.nested_ns, 0),
                                  max(overhead - call.nested_overhead_ns, 0), events)
        if call.step_call is not None:
            call.step_call.nested_ns += duration
            call.step_call.nested_overhead_ns += overhead

    def failing_call(self, exc: BaseException) -> int | None:
        """The call in which `exc` was raised: the innermost one still open (an optimizer
        step has no hook on its way out), else the innermost that saw it pass."""
        if self._thread.stack:
            return self._thread.stack[-1].record.seq
        return self.failing_seq if exc is self._failing_exc else None

    def abandon(self, error: BaseException | None) -> None:
        """Close the calls an exception left open on this thread, innermost first; None:
        recording stopped at the step limit, and they are unfinished, not failed."""
        ended = time.perf_counter_ns()
        extra = {"unfinished": True} if error is None else None
        while self._thread.stack:
            self.close(self._thread.stack[-1], ended, error=error, extra=extra)
        self._placer.settle()  # another thread's (a hard exit's) are placed as they stand

    def put_slots(self, seq: int, role: str, pairs: Iterator[tuple[str, Any]], start: int = 0) -> bool:
        """Write slots of call `seq` that arrive after it closed; whether any holds NaN/Inf."""
        slots, nonfinite = self.slots.make(seq, role, self.memory.watch(pairs, None), start)
        self.writer.put_slots(seq, slots)
        return nonfinite


ERROR_TEXT_CHARS = 4000
"""Of a message of several lines, kept whole in `extra["error_text"]` up to this."""


def _with_error_text(exc: BaseException, extra: dict[str, Any] | None) -> dict[str, Any] | None:
    """`extra` plus the whole message when it says more than `error` keeps (its first line)."""
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ raises: `error` says what it can
        return extra
    if text.strip() == first_line(text):
        return extra
    return {**(extra or {}), "error_text": f"{type(exc).__name__}: {text}"[:ERROR_TEXT_CHARS]}


def first_line(text: str) -> str:
    """The first line that says something ("\nshape mismatch" -> "shape mismatch"), as
    plain text (torch bolds words of its messages)."""
    return next((line.strip() for line in without_ansi(text).splitlines() if line.strip()), "")


def _describe(exc: BaseException) -> str:
    try:
        text = first_line(str(exc))
    except Exception:  # an exception whose __str__ raises
        text = ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
