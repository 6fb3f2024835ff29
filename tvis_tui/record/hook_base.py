"""What every recorder hook shares: the guard that counts tvis's time and contains its
errors, whether recording is active here, warnings, the step limit, and the decorators that
pause the function tracer for a hook.

The recorder is one object made of parts, one module each: module_hooks.py (nn.Module
calls), optimizer_hooks.py (optimizer steps, zero_grad, GradScaler), backward_hooks.py
(backward() and torch.autograd.grad), batch_hooks.py (the DataLoader's batches),
function_hooks.py (functional losses, gradient clipping); recorder.py puts them together,
installs them and closes the run. `HookBase` names the state they share.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import torch

from tvis_tui.record import forks
from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.tvis_frames import own_work

if TYPE_CHECKING:
    from tvis_tui.record.calls import CallLog, OpenCall
    from tvis_tui.record.data import DataCapture
    from tvis_tui.record.fast_path import FastPath
    from tvis_tui.record.functions import FunctionTracer
    from tvis_tui.record.gradients import ActivationGrads
    from tvis_tui.record.memory import PeakMemory
    from tvis_tui.record.names import ModuleNames
    from tvis_tui.record.options import CaptureOptions
    from tvis_tui.record.own_hooks import AfterOwnHooks
    from tvis_tui.record.sink import WriterThread
    from tvis_tui.record.sites import Sites
    from tvis_tui.record.stale_grads import StaleGrads
    from tvis_tui.record.steps import StepTracker
    from tvis_tui.record.updates import ParamUpdates

functorch_level = torch._C._functorch.maybe_current_level
"""Not None inside a torch.func transform (vmap, grad): its tensors are wrappers."""


def untraced(hook: Callable[..., Any], revives: bool = False) -> Callable[..., Any]:
    """Run a hook with the function tracer paused from its first line: otherwise each
    Python call in it (the activity checks, the guard) costs a trace callback, ~10 a hook.
    The pause is inline (C calls only): a helper function would cost a callback itself.
    While dynamo traces the hook (a compiled model), it does nothing: the compiled module's
    own call is recorded, the calls fused inside it are not. A hook that `revives` (the
    optimizer step's: never inside tvis's own work) starts tracing again where a failed
    trace callback or the script stopped it, and warns of a tracer of the script's own
    (functions.py)."""
    @functools.wraps(hook)
    def paused(self: HookBase, *args: Any) -> Any:
        if torch.compiler.is_compiling():
            return None
        tracing = sys.gettrace()
        if tracing is None or tracing is not self.functions.trace:
            result = hook(self, *args)
            lost = self.functions.check_tracing(tracing) if revives else None
            if lost is not None:
                self.warn(f"step {self.steps.step}: {lost}")
            return result
        sys.settrace(None)
        try:
            return hook(self, *args)
        finally:
            self.functions.resume(tracing)
    return paused


def eager(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`untraced`, and kept out of dynamo's graphs: a compiled function that calls
    `optimizer.step()` still has its steps recorded (the hook runs eagerly, at a graph
    break), and dynamo never traces tvis's own code into the script's graph.
    `torch.compiler.disable` imports torch._dynamo (~1.4 s) here, before the script runs, on
    purpose: torch's Optimizer imports it at its first `add_param_group` anyway, and that
    import under tvis's function tracer cost 1.2 s more (measured Dec 2026)."""
    return torch.compiler.disable(untraced(hook, revives=True), recursive=True)


class Reentry(threading.local):
    """Whether this thread is inside tvis's own work (a hook's body)."""
    inside = False


class HookBase:
    """The recorder's state its hooks share (Recorder.__init__ makes it), and what every
    hook does first: check that recording is active, and guard its body."""

    options: CaptureOptions
    writer: WriterThread
    memory: PeakMemory
    steps: StepTracker
    log: CallLog
    sites: Sites
    names: ModuleNames
    data: DataCapture
    functions: FunctionTracer
    grads: ActivationGrads
    updates: ParamUpdates
    stale: StaleGrads
    step_limit: int | None
    warnings: list[str]
    _generation: int
    _reentry: Reentry
    _fast_path: FastPath
    _after_own_hooks: AfterOwnHooks

    def in_recording_process(self) -> bool:
        """False in a fork of the recording process (a DataLoader worker)."""
        return forks.generation() == self._generation

    def _active(self) -> bool:
        # DataLoader workers are forks of this process: the LMDB env is not fork-safe.
        # Under torch.jit.trace tvis's own tensor ops would be traced (and warned about).
        # Inside a torch.func transform (vmap, grad) tensors are wrappers without storage.
        return (not self._reentry.inside and self.in_recording_process()
                and not torch._C._get_tracing_state() and functorch_level() is None)

    @own_work
    def _guard(self, body: Callable[..., Any], *args: Any) -> Any:
        """Run a hook body with tvis's time counted as overhead and its errors contained."""
        started = self.log.begin_hook()
        self._reentry.inside = True
        tracing = self.functions.pause()  # tvis's own calls need no trace callbacks
        try:
            return body(*args)
        except StopRecording:
            raise
        except Exception as exc:  # a tvis bug must never break training
            self.warn(f"recording error in {body.__name__}: {type(exc).__name__}: {exc}")
            return None
        finally:
            self.functions.resume(tracing)
            self._reentry.inside = False
            self.log.end_hook(started)

    def warn(self, message: str) -> None:
        if message not in self.warnings and len(self.warnings) < 100:
            self.warnings.append(message)
            self.writer.put_meta(warnings=list(self.warnings))

    def _stop_if_done(self) -> None:
        """Called at the loop's head once a step has ended there, and as anything of the
        step after the last one begins (where no loop head was watched): the script has
        run the rest of the last step's iteration (its prints, scheduler, logging) by then,
        and nothing of the next one that tvis records has happened yet (no batch drawn, no
        forward run)."""
        if self.past_limit(self.steps.step):
            raise StopRecording

    def past_limit(self, step: int) -> bool:
        """Whether `step` comes after the last step asked for (`tvis run --steps`)."""
        return bool(self.step_limit) and step > self.step_limit  # type: ignore[operator]

    def _close_failed(self, call: OpenCall | None, error: BaseException) -> None:
        """Close a wrapped call (backward, batch, loss function) that raised `error`, a
        Ctrl-C too (the script may catch it and go on); at tvis's own StopRecording the
        calls left open are `abandon`'s."""
        if call is not None and not isinstance(error, StopRecording):
            self._guard(self._close_raised, call, time.perf_counter_ns(), error)

    def _close_raised(self, call: OpenCall, ended: int, error: BaseException) -> None:
        self.log.close(call, ended, error=error)
