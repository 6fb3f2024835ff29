"""Calls of Python functions defined in user files, and the line tracer behind them.

`sys.settrace` (and `threading.settrace`, for threads started later) installs a global
trace function that returns a local tracer only for frames of user files whose path
`--include/--exclude-files` allow; what to do with a code object is decided once and
cached. The local tracer (traced_frame.py)
- records the frame as a call (kind "function", nested in the call tree like module
  calls; arguments and return value as slots) unless it is module-level code, a module's
  `forward` run by `module(x)` (a module call already; `model.forward(x)` is a function
  call, its submodules named inside it), a lambda, comprehension, generator or coroutine;
- reports each line that ran to `lines.LineShapes` (unless `--no-lines`).

Which calls are recorded. Inside any recorded call (a forward, a batch, another user
function) every user function is. Outside all of them, a function is recorded only when
its caller is inside a loop (`train_step(batch)`, `compute_loss(out, y)` in the training
loop, also where that loop's file is one `--include/--exclude-files` leaves out) and, if it
has a loop itself (a rollout, micro-batches), that caller's loop is one a step was seen
in, or is nested in one (the recorder notes them, loop_head.py):
`main()`, `train(epochs)` or `train_epoch()` wrap many steps and would make them one call
(so in the first step only functions without a loop are recorded this way). Code run while a batch is loaded
(`Dataset.__getitem__`, transforms) is not traced at all: the data capture shows each
sample's path through it, and tracing every sample would cost more than the batch.

Tracing callbacks for user frames count as tvis overhead (measured); those for library
code are counted at a cost measured at install. tvis's own hooks and batch loading run with
tracing paused. Nothing is traced in forked workers, while torch.compile traces, inside
tvis's own work, or after the last step; dynamo is told to run the trace callbacks as they
are. Known limits: while tracing is on, CPython runs all Python code somewhat slower, so
the durations of Python-heavy library calls (optimizer steps) still grow a little; threads
started while recording keep the (then inert) trace function until they end.
"""

from __future__ import annotations

import collections
import dis
import inspect
import sys
import threading
import time
from functools import lru_cache
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, Callable

import torch

from tvis_tui.record.calls import OpenCall
from tvis_tui.record.lines import Entry, LineShapes
from tvis_tui.record.loop_head import enclosing_loop, loop_head, loop_spans
from tvis_tui.record.sites import def_line
from tvis_tui.record.traced_frame import Plan, TracedFrame
from tvis_tui.record.tvis_frames import own_work
from tvis_tui.store.records import Site

if TYPE_CHECKING:
    from tvis_tui.record.recorder import Recorder

NOT_CALLS = frozenset({"<module>", "<lambda>", "<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"})
"""Code that runs as a frame but is no function call a user wrote."""

NOT_TRACED = NOT_CALLS - {"<module>"}
"""Frames whose lines belong to the enclosing statement (a comprehension's result is
bound by the line that holds it)."""

_NO_CALL_FLAGS = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
"""Generators resume once per item: each resume would be a call of its own."""

_UNSEEN: Any = object()


class FunctionTracer:
    """Installs the trace functions and turns user frames into calls and line reports."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.log = recorder.log
        self.lines = LineShapes(recorder.writer) if recorder.options.lines else None
        self._plans: dict[CodeType, Plan | None] = {}
        self._left_out_loops: dict[CodeType, tuple[tuple[int, int], ...] | None] = {}
        self._live = False
        self._previous: tuple[Any, Any] = (None, None)
        self._installer: int | None = None  # the installing thread's ident
        self.failed = False  # a callback failed since the last revive: tracing may have stopped
        self._replaced_said = False  # a trace function of the script's own was warned about
        self.trace = self._on_call  # one bound method, so `sys.gettrace() is` it can be asked
        # The per-thread overhead counter of the call log (calls.py), and what one trace
        # callback for library code costs (measured at install).
        self._clock = self.log._thread
        self._callback_ns = 0
        self.files_recorded = False  # whether --include/--exclude-files left any user file
        # (code, loop span) of the loops seen holding a training step (loop_head.py).
        self.step_loops: set[tuple[CodeType, tuple[int, int]]] = set()
        # Lines that ran before the first call, the last PRELUDE_LINES of them: those of
        # the first iteration belong to step 1 (`x = torch.randn(...)` before `model(x)`).
        self.prelude: collections.deque[tuple[CodeType, str, int, list[Entry]]] | None = \
            collections.deque(maxlen=PRELUDE_LINES)
        # The prelude once recording began, with the head (code, line) of the innermost
        # loop around that first call, and its step: counted once the step's loop is known.
        self._held_prelude: tuple[list[tuple[CodeType, str, int, list[Entry]]],
                                  tuple[CodeType, int | None] | None, int] | None = None

    # -- install / uninstall -------------------------------------------------------------

    def install(self) -> Callable[[], None]:
        """Start tracing this thread and threads started from now on; returns the undo."""
        self._previous = (sys.gettrace(), threading.gettrace())
        self._installer = threading.get_ident()
        _hide_from_dynamo(FunctionTracer._on_call, TracedFrame.event)
        self._callback_ns = self._callback_cost()
        self._live = True
        threading.settrace(self.trace)
        sys.settrace(self.trace)
        return self.uninstall

    @property
    def live(self) -> bool:
        """Whether the trace functions are installed (frames' line tracers get called)."""
        return self._live

    def uninstall(self) -> None:
        if not self._live:
            return
        self._live = False
        sys.settrace(self._previous[0])
        threading.settrace(self._previous[1])
        if self.lines is not None and self.recorder.in_recording_process():  # a fork writes nothing
            # Lines after the last step that made no call (a final print, a save) are no
            # step's: the step they were counted in is never written.
            steps = self.recorder.steps
            self.step_loop_found(None)  # no step was taken: the innermost loop's lines
            self.lines.flush(drop=None if steps.has_calls else steps.step)

    def _callback_cost(self, rounds: int = 2000) -> int:
        """Nanoseconds a trace callback for library code adds to a call (what tracing
        costs a call of an empty function, both measured here)."""
        previous = sys.gettrace()
        self._plans[_empty.__code__] = None
        started = time.perf_counter_ns()
        for _ in range(rounds):
            _empty(1, 2, 3, 4)
        plain = time.perf_counter_ns() - started
        sys.settrace(self.trace)
        try:
            started = time.perf_counter_ns()
            for _ in range(rounds):
                _empty(1, 2, 3, 4)
            traced = time.perf_counter_ns() - started
        finally:
            sys.settrace(previous)
        return max(traced - plain, 0) // rounds

    def pause(self) -> Any:
        """Stop tracing this thread during tvis's own work; pass the result to `resume`.
        (A trace callback per Python call in a hook cost more than the hook itself.)"""
        trace = self.trace
        if sys.gettrace() is not trace:
            return None
        sys.settrace(None)
        return trace

    def resume(self, paused: Any) -> None:
        if paused is not None and self._live:
            sys.settrace(paused)

    def check_tracing(self, tracing: Any) -> str | None:
        """Asked by the optimizer step's hooks with this thread's trace function as the hook
        found it: trace again where tracing stopped, and say what went unrecorded (None
        where nothing did). A tracer of the script's own is never replaced: it is said once."""
        if not self._live or tracing is self.trace or threading.get_ident() != self._installer:
            return None
        if tracing is None:
            failed = self.failed
            if not self.revive():
                return None
            return ("user functions were not recorded for a while: tracing stopped (a RecursionError "
                    "at the recursion limit stops it)" if failed else
                    "the script turned tracing off (sys.settrace(None)): user functions and per-line "
                    "shapes were not recorded for a while; tvis traces again from here")
        if self._replaced_said:
            return None
        self._replaced_said = True
        return ("the script set a trace function of its own (sys.settrace): while it is set, user "
                "functions, per-line shapes and the loop head where --steps stops are not recorded")

    def revive(self) -> bool:
        """After a callback failed: trace the installing thread again if its tracing
        stopped (returns whether it had). CPython unsets a trace function that raises, and
        a call of one raises by itself where the script recursed to the recursion limit
        (and caught the error). Asked by the optimizer step's hooks (never inside tvis's
        own work, where tracing is paused): the calls in between go unrecorded, the steps
        after do not."""
        if not self._live or sys.gettrace() is not None or threading.get_ident() != self._installer:
            return False
        self.failed = False
        sys.settrace(self.trace)
        return True

    def untraced(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(*args)` with this thread's tracing paused: loading a batch runs
        torch's Python per sample, and user code there is not traced anyway."""
        paused = self.pause()
        try:
            return function(*args)
        finally:
            self.resume(paused)

    # -- the global trace function -------------------------------------------------------

    @own_work
    def _on_call(self, frame: FrameType, event: str, arg: Any) -> Any:
        plan = self._plans.get(frame.f_code, _UNSEEN)
        if plan is None:
            # Most calls are library code: their callback's cost is known, not measured
            # (measuring would double it), and counted as overhead all the same.
            self._clock.overhead_ns += self._callback_ns
            return None
        # Not inside tvis's own work (its time is counted already), a forked DataLoader
        # worker (planning snapshots sources through the parent's writer) or compiling.
        if not self._live or not self.recorder._active() or torch.compiler.is_compiling():
            return None
        if plan is _UNSEEN:
            plan = self._plan_guarded(frame)
            if plan is None:
                return None
        reentry = self.recorder._reentry
        stack = self.log.stack
        if stack and stack[-1].record.phase == "data":
            return None  # a batch being loaded on another thread (see `untraced`)
        started = self.log.begin_hook()
        reentry.inside = True
        depth = len(stack)
        try:
            state = TracedFrame(self, plan, frame)
            if (plan.calls or plan.forward and not _run_by_module_call(frame)) and state.wanted(frame):
                state.call = state.open(frame)
            return state.event if plan.lines or state.call is not None else None
        except Exception as exc:  # a tvis bug must never break training
            self._failed_open(stack, depth, exc)
            return None
        finally:
            reentry.inside = False
            self.log.end_hook(started)

    def _plan_guarded(self, frame: FrameType) -> Plan | None:
        started = self.log.begin_hook()
        try:
            plan = self._plan(frame)
        except Exception as exc:
            self.warn(exc)
            plan = None
        finally:
            self.log.end_hook(started)
        self._plans[frame.f_code] = plan
        return plan

    def _plan(self, frame: FrameType) -> Plan | None:
        code = frame.f_code
        if not _plain_user_code(code):
            return None
        path = self.recorder.sites.user_path(code.co_filename)
        if path is None or not self.recorder.options.file_recorded(self.recorder.sites.relative(path)):
            return None
        self.files_recorded = True
        loops = loop_spans(code)
        function = code.co_name not in NOT_CALLS and not code.co_flags & _NO_CALL_FLAGS
        forward = function and _is_module_forward(frame)
        return Plan(path, function and not forward, forward, self.lines is not None, bool(loops),
                     loops, Site(path, def_line(code)))

    def loops(self, code: CodeType) -> tuple[tuple[int, int], ...] | None:
        """The loops of user code (loop_head.py), traced or left out by
        `--include/--exclude-files`: a training loop in a file left out still holds the
        steps and calls the functions of the files kept. None for library code."""
        plan = self._plans.get(code)
        if isinstance(plan, Plan):
            return plan.loops
        try:
            return self._left_out_loops[code]
        except KeyError:
            pass
        loops = None
        if _plain_user_code(code) and self.recorder.sites.user_path(code.co_filename) is not None:
            loops = loop_spans(code)  # a user file's code without a plan: one left out
        self._left_out_loops[code] = loops
        return loops

    # -- shared by frames ------------------------------------------------------------------

    def before_first_call(self, frame: FrameType, path: str, line: int, bound: list[Entry]) -> None:
        """Line `path:line` of `frame` ran, binding `bound`, before any call was recorded."""
        if self.prelude is not None:
            self.prelude.append((frame.f_code, path, line, bound))

    def first_iteration_lines(self, frame: FrameType) -> None:
        """Recording has begun, in `frame` or a frame it called: the lines that ran since
        the loop of the first step last reached its head are step 1's. That loop is known
        only when the step is taken (`step_loop_found`); the first call may be in an inner
        loop (micro-batches drawn from a generator), whose head ran after the step's own
        first lines (`x = torch.randn(...)` before it)."""
        prelude, self.prelude = self.prelude, None
        if not prelude or self.lines is None:
            return
        found = loop_head(frame, self._any_loops)
        innermost = None if found is None else (found[0].f_code, _line_of(found[0].f_code, found[1][0]))
        self._held_prelude = (list(prelude), innermost, self.recorder.steps.step)

    def step_loop_found(self, loop: tuple[FrameType, tuple[int, int]] | None) -> None:
        """The loop around the first optimizer step (None: none, or no step was taken):
        the held prelude lines since its head last ran count in the first call's step.
        Where its head is not among them, the loops around it are tried (one going over
        the optimizers began after the first call), then the first call's innermost."""
        held, self._held_prelude = self._held_prelude, None
        if held is None or self.lines is None:
            return
        prelude, innermost, step = held
        heads = []
        while loop is not None and len(heads) < MAX_LOOP_DEPTH:
            heads.append((loop[0].f_code, _line_of(loop[0].f_code, loop[1][0])))
            loop = enclosing_loop(*loop, self._any_loops)
        for code, head in heads + ([innermost] if innermost is not None else []):
            starts = [i for i, (c, _, line, _) in enumerate(prelude) if c is code and line == head]
            if starts:
                for _, path, line, bound in prelude[starts[-1]:]:
                    self.lines.tally(path, line, step, self.recorder.steps.step, bound)
                return
        # Neither head ran among the lines kept (too long ago, or in no frame traced):
        # nothing is sure.

    def _any_loops(self, code: CodeType) -> tuple[tuple[int, int], ...] | None:
        """The loops of user code, and nothing (not None) for library code: the search
        for the loop around the first call passes through torch's frames (`model(x)` runs
        the user's forward from Module.__call__)."""
        loops = self.loops(code)
        return () if loops is None else loops

    def recording(self, step: int) -> bool:
        """Whether what happens in `step` is recorded: the first call was seen and the
        step limit is not passed (then the next hook stops the run)."""
        return self.log.last_seq > 0 and not self.recorder.past_limit(step)

    def _failed_open(self, stack: list[OpenCall], depth: int, exc: Exception) -> None:
        """A call that failed to open (tvis's work ran out of frames where the script
        recursed to its limit, say) has no tracer to close it: left on the stack, every
        later call would nest in it."""
        self.failed = True
        try:
            self.log.close_above(depth, time.perf_counter_ns(), exc)
            self.warn(exc)
        except Exception:  # out of frames again: the stack as it was, at least
            del stack[depth:]

    def warn(self, exc: Exception) -> None:
        self.recorder.warn(f"recording error in a user function: {type(exc).__name__}: {exc}")


def _plain_user_code(code: CodeType) -> bool:
    """Not a comprehension's or lambda's frame, nor one dynamo made to resume a function."""
    return code.co_name not in NOT_TRACED and not code.co_name.startswith("torch_dynamo_resume_in_")


MAX_LOOP_DEPTH = 8
"""Loops around the first step tried for the head its first lines ran from."""

PRELUDE_LINES = 256
"""Lines kept from before the first call; a first iteration runs fewer before its first
call (a longer setup before the loop is not step 1's anyway)."""


@lru_cache(maxsize=1024)
def _line_of(code: CodeType, offset: int) -> int | None:
    """The source line of the instruction at `offset`."""
    return next((ins.positions.lineno for ins in dis.get_instructions(code)
                 if ins.offset == offset and ins.positions is not None), None)


def _empty(a: Any = None, b: Any = None, c: Any = None, d: Any = None) -> None:
    """Called to measure what a trace callback costs: a few arguments and locals, as
    torch's Python functions have (the callback copies them into a dict first)."""
    e = f = g = a
    del e, f, g


_MODULE_CALL_CODES = frozenset({
    torch.nn.Module._call_impl.__code__, torch.nn.Module._slow_forward.__code__,
    *(c for c in torch.nn.Module._call_impl.__code__.co_consts if isinstance(c, CodeType))})
"""The code that runs a module's forward on `module(x)` (with hooks, from a nested
`inner`; under torch.jit.trace, from `_slow_forward`): the hooks record that call."""


def _run_by_module_call(frame: FrameType) -> bool:
    """Whether a module's forward runs as `module(x)`, not as `model.forward(x)`,
    `super().forward(x)` or `checkpoint(block.forward, x)`: no hook sees those."""
    caller = frame.f_back
    return caller is not None and caller.f_code in _MODULE_CALL_CODES


def _is_module_forward(frame: FrameType) -> bool:
    code = frame.f_code
    if code.co_name != "forward" or not code.co_argcount:
        return False
    return isinstance(frame.f_locals.get(code.co_varnames[0]), torch.nn.Module)


def _hide_from_dynamo(*functions: Callable[..., Any]) -> None:
    """Inside a torch.compile'd call dynamo would try to compile the trace callbacks (and
    guard on the tracer's caches): it must run them as they are, and what they call."""
    try:  # from the C module: importing torch._dynamo would cost a second at startup
        from torch._C._dynamo.eval_frame import _FrameAction as FrameAction
        from torch._C._dynamo.eval_frame import _FrameExecStrategy as FrameExecStrategy
        from torch._C._dynamo.eval_frame import set_code_exec_strategy
    except ImportError:  # another torch: dynamo's own skip rules apply
        return
    for function in functions:
        set_code_exec_strategy(function.__code__, FrameExecStrategy(FrameAction.SKIP, FrameAction.SKIP))
