"""The hooks that observe training: module calls, optimizer steps, backward(), batches.

Everything here only reads. Hooks are torch's own global ones (module forward pre/post
hooks, optimizer step pre/post hooks); `torch.autograd.backward`, the DataLoader
iterator's `__next__`, `Optimizer.__init__`, the functional losses, `GradScaler.scale`
and `torch.compile` are wrapped (the originals are called unchanged, with the same arguments). No
TorchFunctionMode or dispatch mode is used: they switch off fused fast paths and so change
numerics. Every hook body is guarded: a tvis bug becomes a line in the run's "warnings"
and training goes on. Nothing is recorded in forked DataLoader workers, while
torch.compile or torch.jit.trace traces, or from inside tvis's own work.
"""

from __future__ import annotations

import functools
import itertools
import sys
import threading
import time
import warnings
import weakref
from types import FrameType
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F
import torch.optim.optimizer as optimizer_module
import torch.nn.utils.clip_grad as clip_grad_module
import torch.utils.data.dataloader as dataloader_module
from torch.nn.modules.loss import _Loss

from tvis_tui.interrupts import pass_on_lost_interrupts
from tvis_tui.record.calls import (MODULE_CALL_CODE, OPTIMIZER_STEP_CODE, CallLog, OpenCall, call_phase,
                                   running_frame)
from tvis_tui.record.data import DataCapture
from tvis_tui.record.fast_path import FastPath
from tvis_tui.record.functions import FunctionTracer
from tvis_tui.record.gradients import ActivationGrads
from tvis_tui.record.loop_head import LoopHead, enclosing_loop, loop_head, rebinds
from tvis_tui.record.memory import PeakMemory
from tvis_tui.record.mode_layers import eval_while_training
from tvis_tui.record.module_backward import ModuleBackwardTimes, next_node_number
from tvis_tui.record.names import ModuleNames, class_name
from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.orphan_params import orphans
from tvis_tui.record.own_hooks import AfterOwnHooks
from tvis_tui.record import forks, per_sample_loss, warning_sites
from tvis_tui.record.sink import WriterThread
from tvis_tui.record.sites import Sites, read_source
from tvis_tui.record.slots import leaves
from tvis_tui.record.stale_grads import StaleGrads
from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.steps import StepTracker
from tvis_tui.record.timing import count_gc_as_overhead
from tvis_tui.record.tvis_frames import own_work
from tvis_tui.record.updates import NAMES_LISTED, ParamUpdates, given_names, named, params as optimizer_params
from tvis_tui.store.writer import RunWriter


LOSS_FUNCTIONS = (
    "cross_entropy", "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "poisson_nll_loss",
    "gaussian_nll_loss", "ctc_loss", "margin_ranking_loss", "hinge_embedding_loss",
    "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "cosine_embedding_loss", "triplet_margin_loss",
)
"""torch.nn.functional losses recorded as calls of the "loss" phase (the loss modules
call them too; inside a loss module they are not recorded twice)."""


_functorch_level = torch._C._functorch.maybe_current_level
FUNC_TRANSFORM_NOTE = ("calls inside torch.func transforms (vmap, grad, jacrev, ...) were not "
                       "recorded: their tensors are batched or wrapped, with no values to read")


def _opaque_kind(module: torch.nn.Module) -> str | None:
    """What hides the calls inside `module` from module hooks, if anything (not a
    torch.compile'd one: the call to torch.compile warned already)."""
    if isinstance(module, torch.jit.ScriptModule):
        return f"{class_name(module)} is TorchScript (torch.jit)"
    return None


def _untraced(hook: Callable[..., Any], revives: bool = False) -> Callable[..., Any]:
    """Run a hook with the function tracer paused from its first line: otherwise each
    Python call in it (the activity checks, the guard) costs a trace callback, ~10 a hook.
    The pause is inline (C calls only): a helper function would cost a callback itself.
    While dynamo traces the hook (a compiled model), it does nothing: the compiled module's
    own call is recorded, the calls fused inside it are not. A hook that `revives` (the
    optimizer step's: never inside tvis's own work) starts tracing again where a failed
    trace callback stopped it (functions.py)."""
    @functools.wraps(hook)
    def untraced(self: "Recorder", *args: Any) -> Any:
        if torch.compiler.is_compiling():
            return None
        tracing = sys.gettrace()
        if tracing is None or tracing is not self.functions.trace:
            result = hook(self, *args)
            if revives and tracing is None and self.functions.failed and self.functions.revive():
                self.warn(f"step {self.steps.step}: user functions were not recorded for a while: "
                          "tracing stopped (a RecursionError at the recursion limit stops it)")
            return result
        sys.settrace(None)
        try:
            return hook(self, *args)
        finally:
            self.functions.resume(tracing)
    return untraced


def _eager(hook: Callable[..., Any]) -> Callable[..., Any]:
    """`_untraced`, and kept out of dynamo's graphs: a compiled function that calls
    `optimizer.step()` still has its steps recorded (the hook runs eagerly, at a graph
    break), and dynamo never traces tvis's own code into the script's graph.
    `torch.compiler.disable` imports torch._dynamo (~1.4 s) here, before the script runs, on
    purpose: torch's Optimizer imports it at its first `add_param_group` anyway, and that
    import under tvis's function tracer cost 1.2 s more (measured Dec 2026)."""
    return torch.compiler.disable(_untraced(hook, revives=True), recursive=True)


class _Reentry(threading.local):
    inside = False


class _Unrecorded(threading.local):
    """Module calls left out by --include/--exclude-modules that are still running, as
    (module id, root, depth of the call log's stack at their start): the modules they
    call are named under the same root (`encoder.layers.0` with its model not recorded)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, Any, int]] = []


class Recorder:
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
        self._reentry = _Reentry()
        self._fast_path = FastPath(lambda: self._reentry.inside)
        self._unrecorded = _Unrecorded()
        self._undo: list[Callable[[], None]] = []
        self._scaled: tuple[weakref.ref, torch.Tensor] | None = None
        # Steps taken with a closure (LBFGS): seq -> optimizer, until the closure's first
        # backward has made the gradients this step starts from.
        self._closure_steps: dict[int, Any] = {}

    # -- install / uninstall -------------------------------------------------------------

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

    def _close_failed(self, call: OpenCall | None, error: BaseException) -> None:
        """Close a wrapped call (backward, batch, loss function) that raised `error`, a
        Ctrl-C too (the script may catch it and go on); at tvis's own StopRecording the
        calls left open are `abandon`'s."""
        if call is not None and not isinstance(error, StopRecording):
            self._guard(self._close_raised, call, time.perf_counter_ns(), error)

    def _close_raised(self, call: OpenCall, ended: int, error: BaseException) -> None:
        self.log.close(call, ended, error=error)

    def abandon(self, error: BaseException) -> None:
        """Close the calls that `error` left open (they end with it as their error; at the
        step limit, tvis's own StopRecording, they are unfinished)."""
        self._guard(self.log.abandon, None if isinstance(error, StopRecording) else error)

    # -- guard ---------------------------------------------------------------------------

    def in_recording_process(self) -> bool:
        """False in a fork of the recording process (a DataLoader worker)."""
        return forks.generation() == self._generation

    def _active(self) -> bool:
        # DataLoader workers are forks of this process: the LMDB env is not fork-safe.
        # Under torch.jit.trace tvis's own tensor ops would be traced (and warned about).
        # Inside a torch.func transform (vmap, grad) tensors are wrappers without storage.
        return (not self._reentry.inside and self.in_recording_process()
                and not torch._C._get_tracing_state() and _functorch_level() is None)

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
        return found

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

    # -- modules -------------------------------------------------------------------------

    @_untraced
    def _module_pre(self, module: torch.nn.Module, args: tuple) -> None:
        here = sys._getframe(1)
        running = running_frame(here, MODULE_CALL_CODE)  # the frame this call runs in
        self._fast_path.call_starts(module, running)
        if not self._active():
            if _functorch_level() is not None and self.in_recording_process():
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
            root, name = self.names.inside(module) or (module, self.names.root_name(module, caller))
        else:
            root, name = enclosing_root, self.names.name(enclosing_root, module)
        cls = type(module)
        if not self.options.module_recorded(name, cls.__name__):
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
        extra = None
        if eval_while_training(module, root):
            extra = {"eval_while_training": True}
            self._guard(self._note_eval_layer, name)
        call = self.log.open(kind="module", name=name, type_=cls.__name__, phase=phase, owner=id(module),
                             call_site=self.sites.call_site(frame), def_site=self.sites.def_site(cls),
                             inputs=inputs, root=root, criterion=criterion, frame=running, extra=extra)
        call.kwargs_at_open = kwargs is not None
        if self.memory.follows_nodes() and torch.is_grad_enabled():
            call.node_low = ModuleBackwardTimes.low()
        self._after_own_hooks.enter(module, call)

    def _note_eval_layer(self, name: str) -> None:
        """The step record lists its layers trained in eval mode (the step view's title),
        so no viewer scans the step's calls for them."""
        layers = self.steps.extra_now("eval_while_training") or []
        if name not in layers and len(layers) < NAMES_LISTED:
            self.steps.note_extra("eval_while_training", [*layers, name])

    def _enclosing_root(self, stack: list[OpenCall]) -> Any:
        """The root module of the innermost module call running, recorded or not, or of a
        forward run directly (`model.forward(x)`, a function call with a root)."""
        at = next((i for i in range(len(stack) - 1, -1, -1) if stack[i].root is not None), None)
        unrecorded = self._unrecorded.calls
        if unrecorded and (at is None or unrecorded[-1][2] > at):
            return unrecorded[-1][1]
        return None if at is None else stack[at].root

    @_untraced
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

    @_untraced
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
        if kwargs and not call.kwargs_at_open:
            self.log.put_slots(call.record.seq, "input", leaves(kwargs, "kwargs"), call.inputs)
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

    # -- optimizers ----------------------------------------------------------------------

    def _optimizer_init(self, original: Callable[..., Any], opt: Any, *args: Any, **kwargs: Any) -> None:
        original(opt, *args, **kwargs)
        if self._active():
            self.steps.add_optimizer(opt)

    @_eager
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

    @_eager
    def _optimizer_post(self, opt: Any, args: tuple, kwargs: dict) -> None:
        if not self._active():
            return
        self._guard(self._close_optimizer, opt, time.perf_counter_ns())

    def _close_optimizer(self, opt: Any, ended: int) -> None:
        call = self.log.innermost(id(opt))
        ps = optimizer_params(opt)
        if call is not None:
            self._put_closure_gradients(call.record.seq)  # a closure that never ran backward
            extra = self.updates.after_step(opt, call.record.seq)
            lost = orphans(self.names.roots(), self.steps.optimizers)
            if lost:
                extra.update(named("not_stepped", self.names.names_of(lost[:NAMES_LISTED]), len(lost)))
            # The step's result: the parameters it updated, as they are now.
            self.log.close(call, ended, self.names.with_gradients(ps, given_names(opt)), role="param", extra=extra)
        self.stale.after_step(ps)
        self.steps.after_optimizer_step(opt, call.record.call_site if call is not None else None)

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
        (as its output, the parameters it leaves, does once it returns, if they hold any)."""
        if self.log.put_slots(seq, "param_grad", self._gradients(opt)):
            self.log.writer.put_nonfinite_grad(seq)

    # -- backward ------------------------------------------------------------------------

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

    def _zero_grad(self, original: Callable[..., Any], owner: Any, *args: Any, **kwargs: Any) -> Any:
        """An optimizer's or a module's zero_grad(): the losses whose gradients it drops."""
        result = original(owner, *args, **kwargs)
        if self._active():
            self._guard(self.steps.zeroed, owner)
            self._guard(self.stale.zeroed, owner)
        return result

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

    # -- data ----------------------------------------------------------------------------

    def _next_batch(self, original: Callable[..., Any], iterator: Any) -> Any:
        if torch.compiler.is_compiling() or not self._active():
            return original(iterator)
        self._guard(self.log.close_left, sys._getframe(1))
        if self.steps.pending is not None and self.steps.fed_by(id(iterator)):
            self._guard(self.steps.end_pending)  # the next batch: its loop head went unseen
        self._stop_if_done()
        call = self._guard(self._open_batch, iterator, sys._getframe(2))
        try:
            batch = self.functions.untraced(original, iterator)
        except StopIteration:
            if call is not None:
                self._guard(self._close_batch, call, time.perf_counter_ns(), None, True)
            raise
        except BaseException as exc:
            self._close_failed(call, exc)
            raise
        if call is not None:
            self._guard(self._close_batch, call, time.perf_counter_ns(), batch, False)
        return batch

    def _open_batch(self, iterator: Any, frame: Any) -> OpenCall:
        self.steps.note_batch(id(iterator))
        dataset = getattr(iterator, "_dataset", None)
        return self.log.open(kind="data", name="DataLoader", type_=type(dataset).__name__,
                             phase="data", owner=id(iterator), call_site=self.sites.call_site(frame),
                             def_site=self.sites.def_site(type(dataset), "__getitem__"))

    def _close_batch(self, call: OpenCall, ended: int, batch: Any, exhausted: bool) -> None:
        if self.log.innermost(call.owner) is None:
            return
        if exhausted:
            self.log.close(call, ended, extra={"exhausted": True})
        else:
            self.log.close(call, ended, leaves(batch, "batch"))

    # -- functional losses ---------------------------------------------------------------

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


def _stops_recomputation(error: BaseException | None) -> bool:
    """Non-reentrant checkpointing stops recomputing a forward in backward, once it has the
    tensors it needs, by raising this through the modules it ran: not a failure."""
    return type(error).__name__ == "_StopRecomputationError" and \
        type(error).__module__ == "torch.utils.checkpoint"


def _own_loss(module: torch.nn.Module) -> bool:
    """A loss module of the script's own (FocalLoss, DiceLoss: an nn.Module, not a _Loss):
    named so and without parameters (a model that returns its loss, `ModelWithLoss`, has)."""
    return type(module).__name__.endswith("Loss") and next(module.parameters(), None) is None


def _loss_of(tensors: Any) -> Any:
    """What backward() was called on: one loss, or several (`backward([l1, l2])`)."""
    return tensors[0] if isinstance(tensors, (tuple, list)) and len(tensors) == 1 else tensors


def _passed_kwargs(module: torch.nn.Module, running: FrameType | None) -> dict[str, Any] | None:
    """The keyword arguments the caller passed, where a pre-hook of the module's own may
    replace them before forward (`with_kwargs=True`): read from the call's frame, as the
    global pre-hook (tvis's) runs before it. Keyword inputs are otherwise read after the
    hooks, from the global forward hook; positional ones are the caller's either way."""
    if not module._forward_pre_hooks_with_kwargs or running is None:
        return None
    kwargs = running.f_locals.get("kwargs")
    return kwargs if type(kwargs) is dict else None
