"""The recorder: the hooks that observe training, put together, installed and undone.

Everything here only reads. Hooks are torch's own global ones (module forward pre/post
hooks, optimizer step pre/post hooks); `torch.autograd.backward`, the DataLoader
iterator's `__next__`, `Optimizer.__init__`, the functional losses, `GradScaler.scale`
and `torch.compile` are wrapped (the originals are called unchanged, with the same arguments). No
TorchFunctionMode or dispatch mode is used: they switch off fused fast paths and so change
numerics. Every hook body is guarded: a tvis bug becomes a line in the run's "warnings"
and training goes on. Nothing is recorded in forked DataLoader workers, while
torch.compile or torch.jit.trace traces, or from inside tvis's own work.

The hooks live in one module per thing they observe (hook_base.py lists them); this one
makes their shared state, installs them, watches the loop around each step, and closes the
run.
"""

from __future__ import annotations

import functools
import sys
import threading
import warnings
import weakref
from types import FrameType
from typing import Any, Callable

import torch
import torch.nn.functional as F
import torch.optim.optimizer as optimizer_module
import torch.nn.utils.clip_grad as clip_grad_module
import torch.utils.data.dataloader as dataloader_module

from tvis_tui.interrupts import pass_on_lost_interrupts
from tvis_tui.record import forks, warning_sites
from tvis_tui.record.backward_hooks import BackwardHooks
from tvis_tui.record.batch_hooks import BatchHooks
from tvis_tui.record.calls import CallLog
from tvis_tui.record.data import DataCapture
from tvis_tui.record.fast_path import FastPath
from tvis_tui.record.function_hooks import LOSS_FUNCTIONS, FunctionHooks
from tvis_tui.record.functions import FunctionTracer
from tvis_tui.record.gradients import ActivationGrads
from tvis_tui.record.hook_base import Reentry
from tvis_tui.record.loop_head import LoopHead, enclosing_loop, loop_head, rebinds
from tvis_tui.record.memory import PeakMemory
from tvis_tui.record.module_backward import ModuleBackwardTimes, next_node_number
from tvis_tui.record.module_hooks import ModuleHooks, Unrecorded
from tvis_tui.record.names import ModuleNames
from tvis_tui.record.optimizer_hooks import OptimizerHooks
from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.own_hooks import AfterOwnHooks
from tvis_tui.record.sink import WriterThread
from tvis_tui.record.sites import Sites, read_source
from tvis_tui.record.stale_grads import StaleGrads
from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.steps import StepTracker
from tvis_tui.record.timing import count_gc_as_overhead
from tvis_tui.record.updates import ParamUpdates
from tvis_tui.store.writer import RunWriter


class Recorder(ModuleHooks, OptimizerHooks, BackwardHooks, BatchHooks, FunctionHooks):
    def __init__(self, writer: RunWriter, root_dir: str, *, max_bytes: int,
                 step_limit: int | None, options: CaptureOptions = CaptureOptions()) -> None:
        self.options = options
        if not options.values:
            max_bytes = 0
        self.writer = WriterThread(writer)
        self.memory = PeakMemory()
        self.steps = StepTracker(self.writer, self.memory)
        self.log = CallLog(self.writer, self.steps, max_bytes, self.memory, self.warn)
        self.memory.guard = self._guard  # backward's node hooks run tvis code (memory.py)
        self.memory.warn = lambda message: self.warn(f"step {self.steps.step}: {message}")
        if next_node_number is not None:
            self.memory.node_times = ModuleBackwardTimes(
                self.log.overhead_done, self.log.overhead_so_far,
                lambda record: self.writer.put_call(record, first=False),
                lambda: self.steps.step)
        self.memory.live.charge = self.log.charge_outside_hooks  # tensors die in the script's code
        self.sites = Sites(root_dir, self._snapshot)
        self.names = ModuleNames()
        self.data = DataCapture(self)
        self._named_in_step = 0  # the step whose parameters were last named (names.py)
        self._bare_params = {}  # per open optimizer step: its caller's bare nn.Parameters
        self._unlisted = {}  # per open optimizer step: its parameters past the slots' cap (param_totals.py)
        self.functions = FunctionTracer(self)
        self.steps.next_iteration = self._watch_loop_head
        self.grads = ActivationGrads(self)
        self._after_own_hooks = AfterOwnHooks(self._module_post_last, lambda: self.log.stack, self._active)
        self.updates = ParamUpdates(self)
        self.stale = StaleGrads()
        self.step_limit = step_limit
        self.warnings: list[str] = []
        self.modules_recorded = False  # whether --include/--exclude-modules left any module
        self._generation = forks.generation()
        self._reentry = Reentry()
        self._fast_path = FastPath(lambda: self._reentry.inside)
        self._unrecorded = Unrecorded()
        self._undo: list[Callable[[], None]] = []
        self._scaled: tuple[weakref.ref, torch.Tensor] | None = None
        # Steps taken with a closure (LBFGS): seq -> optimizer, until the closure's first
        # backward has made the gradients this step starts from.
        self._closure_steps: dict[int, Any] = {}

    def install(self) -> None:
        self._quiet_threads_at_step_limit()
        mod = torch.nn.modules.module
        optim = optimizer_module
        handles = [
            mod.register_module_forward_pre_hook(self._module_pre),
            mod.register_module_forward_hook(self._module_post, with_kwargs=True, always_call=True),
            optim.register_optimizer_step_pre_hook(self._optimizer_pre),
            optim.register_optimizer_step_post_hook(self._optimizer_post),
        ]
        self._undo.extend(h.remove for h in handles)
        self._undo.append(self._fast_path.install())  # after tvis's own global hooks
        self._undo.append(self._after_own_hooks.remove_all)
        self._undo.append(self.grads.close)  # output hooks on tensors still alive go quiet
        self._undo.append(warning_sites.install())
        self._wrap(torch.autograd, "backward", self._backward)
        self._wrap(torch.autograd, "grad", self._autograd_grad)
        self._wrap(dataloader_module._BaseDataLoaderIter, "__next__", self._next_batch)
        self._wrap(torch.optim.Optimizer, "__init__", self._optimizer_init)
        self._wrap(torch.optim.Optimizer, "zero_grad", self._zero_grad)
        self._wrap(torch.nn.Module, "zero_grad", self._zero_grad)
        for name in LOSS_FUNCTIONS:
            if hasattr(F, name):
                self._wrap(F, name, functools.partial(self._loss_function, f"F.{name}"))
        for owner in (torch.nn.utils, clip_grad_module):  # `from torch.nn.utils.clip_grad import ...` too
            for name in ("clip_grad_norm_", "clip_grad_value_"):
                self._wrap(owner, name, functools.partial(self._clip_grads, name))
        self._wrap(torch.amp.GradScaler, "scale", self._grad_scale)
        self._wrap(torch.amp.GradScaler, "step", self._grad_scaler_step)
        self._wrap(torch, "compile", self._compile)
        self._wrap(torch.nn.Module, "compile", self._compile)
        self.data.install(self._wrap)
        self._undo.append(count_gc_as_overhead(self.log))
        self._undo.append(pass_on_lost_interrupts())  # a Ctrl-C inside tvis's callbacks
        # Undone by close() before the store closes: the last line shapes are flushed then.
        self._undo.append(self.functions.install())
        # torch warns that global hooks fire once more for an OptimizedModule: that note
        # concerns tvis's hooks, not the script, so it is not shown to the user.
        saved_filters = warnings.filters[:]
        warnings.filterwarnings("ignore", message=r"Using `torch.compile\(module\)` when there are global hooks")
        self._undo.append(lambda: warnings.filters.__setitem__(slice(None), saved_filters))

    def _wrap(self, owner: Any, attr: str, wrapper: Callable[..., Any]) -> None:
        original = owner.__dict__[attr] if isinstance(owner, type) else getattr(owner, attr)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            # Inside a torch.compile'd function dynamo traces this call: tvis's bookkeeping
            # there would be traced into the graph (or crash dynamo), so the original runs.
            if torch.compiler.is_compiling():
                return original(*args, **kwargs)
            return wrapper(original, *args, **kwargs)

        wrapped.__wrapped__ = original  # type: ignore[attr-defined]
        wrapped.__name__ = getattr(original, "__name__", attr)
        wrapped.__doc__ = getattr(original, "__doc__", None)
        setattr(owner, attr, wrapped)
        self._undo.append(lambda: setattr(owner, attr, original))

    def uninstall(self) -> None:
        while self._undo:
            self._undo.pop()()

    def close(self, **final_meta: Any) -> int:
        """Uninstall, close the last step, write `final_meta` and close the store.
        Returns the number of steps recorded."""
        self.uninstall()
        self._warn_unmatched_patterns()
        steps = self.steps.finish()
        try:
            self.writer.close(**final_meta, steps_recorded=steps, step_rule=self.steps.rule,
                              warnings=list(self.warnings), **self.steps.run_meta())
        except Exception as exc:  # the last commit failed (a full disk): reported, not raised
            self.writer.failed(exc, "closing the store failed")
        return steps

    def _warn_unmatched_patterns(self) -> None:
        """Include patterns that let nothing through are a typo far more often than a wish
        to record no module or no function: say so rather than leave the run quietly bare."""
        options = self.options
        if options.include_modules and not self.modules_recorded:
            self.warn(f"--include-modules {' '.join(options.include_modules)}: matched no module "
                      "called while recording; no module calls were recorded")
        if options.include_files and not self.functions.files_recorded:
            self.warn(f"--include-files {' '.join(options.include_files)}: matched no user file "
                      "that ran while recording; no user functions or lines were recorded")

    def _quiet_threads_at_step_limit(self) -> None:
        """A script training in a thread of its own ends that thread at the step limit:
        without this, Python would print StopRecording's traceback for it."""
        previous = threading.excepthook

        def excepthook(args: Any) -> None:
            if args.exc_type is not StopRecording:
                previous(args)
        threading.excepthook = excepthook
        self._undo.append(lambda: setattr(threading, "excepthook", previous))

    def abandon(self, error: BaseException | None) -> None:
        """Close the calls that `error` left open (they end with it as their error; at the
        step limit, tvis's own StopRecording, or with no error, they are unfinished). Not
        in a process the script forked: the store is its parent's."""
        if self.in_recording_process():
            self._guard(self.log.abandon, None if isinstance(error, StopRecording) else error)

    def _snapshot(self, path: str) -> None:
        text = read_source(path)
        if text is not None:
            self.writer.put_source(path, text)

    def _watch_loop_head(self, reached: Callable[[], None], stepped: Any = None,
                         incomplete: bool = False) -> LoopHead | None:
        """Call `reached`, as tvis's own work, when the loop around this step comes back to
        its head (loop_head.py); None where no loop of user code holds the step.
        `stepped`: the optimizer that stepped last. Where the loop goes over the optimizers
        (`for opt in opts:`), the iteration is the loop around that one. `incomplete`:
        others are still waiting (steps.py's iteration rule): not watched where no loop is
        around a loop over the optimizers (they step in its next passes), nor on an
        exception."""
        if not self.functions.live:
            return None  # no trace function: a frame's line tracer would never be called
        found = self._step_loop(sys._getframe())
        if found is None:
            return None
        if stepped is not None and rebinds(*found, stepped):
            around = enclosing_loop(*found, self.functions.loops)
            if around is None and incomplete:
                return None
            if around is not None:
                found = around
                self.functions.step_loops.add((found[0].f_code, found[1]))
        # After the last step asked for, the script stops right at the loop's head, before
        # any code of the next iteration runs (raised from the trace callback, in its frame).
        return LoopHead(*found, lambda: self._guard(reached), self._stop_if_done, on_error=not incomplete)

    def _step_loop(self, frame: FrameType) -> tuple[FrameType, tuple[int, int]] | None:
        """The user loop holding the step being made from `frame` (loop_head.py), noted
        for the user functions it calls (functions.py)."""
        found = loop_head(frame, self.functions.loops)
        if found is not None:
            self.functions.step_loops.add((found[0].f_code, found[1]))
        self.functions.step_loop_found(found)  # once: step 1's first lines (functions.py)
        return found
