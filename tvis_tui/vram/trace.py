"""`tvis vram --trace`: run the script itself on fake tensors (no real memory, no GPU) for
two optimizer steps and count live storage exactly, in the static estimate's parts.

The second step is the one reported: by then the optimizer state exists during forward,
as it does for the rest of training. Ops run with CPU semantics (the machine's), so CUDA-only
kernel choices are not reflected: dropout's bool mask, and fused attention (the CPU runs
scaled_dot_product_attention unfused when there is dropout, keeping each attention matrix for
backward). The figure is labelled "traced on CPU", and the unfused case gets a note.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import importlib
import inspect
import logging
import os
import runpy
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from tvis_tui.errors import TvisError

STEPS = 2
MAX_BACKWARDS = 16
"""Backward calls after which a script that never steps an optimizer is stopped."""


class _Stop(Exception):
    pass


@dataclass
class TraceResult:
    """What one traced run measured, and how it ended. `exit_code` is a non-zero
    SystemExit's code (an int or sys.exit's message); `math_attention` says that
    scaled_dot_product_attention ran without a fused kernel (it then keeps the full
    attention matrices for backward, which CUDA's fused kernels do not)."""

    step_peaks: list[int] = field(default_factory=list)
    parts: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    exit_code: object = None
    on_cpu: bool = True
    math_attention: bool = False
    saves_skipped: int = 0
    """torch.save calls the trace did not carry out."""
    faked_scalars: int = 0
    """Values the script read out of tensors (`.item()`, `int(t)`, `if t:`): fake tensors
    hold no data, and each read answered 1."""
    peak_phase: str = "forward"
    """What the last step was running at its peak: "forward" (anything before backward),
    "backward" or "optimizer step"."""

    @property
    def peak_bytes(self) -> int:
        return self.step_peaks[-1] if self.step_peaks else 0


def trace(path: str | Path, argv: list[str] | None = None, fake: bool = True,
          steps: int = STEPS) -> TraceResult:
    """Run `path` under the storage tracker until `steps` optimizer steps have completed."""
    path = Path(path).resolve()
    if not path.is_file():
        raise TvisError(f"cannot trace {path}: no such file")
    session = _Session(steps, fake)
    result = session.result
    try:
        with session.installed(path, argv or []):
            runpy.run_path(str(path), run_name="__main__")
    except _Stop:
        pass
    except SystemExit as exc:  # argparse's usage error is SystemExit(2); sys.exit() is 0
        result.exit_code = exc.code if exc.code not in (None, 0) else None
    except Exception as exc:  # the script's own failure, reported rather than raised
        text = str(exc).splitlines()[0] if str(exc) else ""
        result.error = f"{type(exc).__name__}: {text}"
    if not result.step_peaks and result.error is None and session.backwards:
        session.finish()  # backward ran but no optimizer stepped (a hand-written update)
    result.faked_scalars = session.tracker.faked_scalars
    return result


class _Session:
    """The hooks of one traced run: optimizer steps end steps, backward calls are counted
    for scripts without an optimizer, and fake parameters can be moved by Module.to()."""

    def __init__(self, steps: int, fake: bool) -> None:
        from tvis_tui.vram.tracker import StorageTracker

        self.steps = steps
        self.fake = fake
        self.tracker = StorageTracker(fake)
        self.result = TraceResult()
        self.optimizers: list[Any] = []
        self.backwards = 0

    def finish(self) -> None:
        """Close a step: note its peak and parts, then count the next from what is live."""
        self.result.step_peaks.append(self.tracker.peak)
        self.result.peak_phase = self.tracker.peak_phase
        self.result.parts = _parts(self.tracker, self.optimizers)
        self.tracker.reset_peak()

    def before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.tracker.phase = "optimizer step"

    def after_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        self.tracker.phase = "forward"  # the next step's, from its data on
        if optimizer not in self.optimizers:
            self.optimizers.append(optimizer)
        _note_grads(self.tracker, self.optimizers)
        self.finish()
        if len(self.result.step_peaks) >= self.steps:
            raise _Stop()

    def _counting(self, backward: Any) -> Any:
        """torch.autograd.backward that stops a script with no optimizer after a while."""
        def counting_backward(*args: Any, **kwargs: Any) -> Any:
            self.tracker.phase = "backward"
            out = backward(*args, **kwargs)
            self.tracker.phase = "forward"  # what runs next: clipping, or another micro-batch
            self.backwards += 1
            if not self.optimizers and self.backwards >= MAX_BACKWARDS:
                self.finish()
                raise _Stop()
            return out
        return counting_backward

    @contextlib.contextmanager
    def installed(self, path: Path, argv: list[str]) -> Iterator[None]:
        import torch
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        from tvis_tui.interrupts import pass_on_lost_interrupts
        from tvis_tui.vram.oncpu import cuda_as_cpu

        backward, swap = torch.autograd.backward, torch.utils.swap_tensors
        sdpa = torch.nn.functional.scaled_dot_product_attention
        save, loader_init = torch.save, torch.utils.data.DataLoader.__init__
        handles = (register_optimizer_step_pre_hook(self.before_step),
                   register_optimizer_step_post_hook(self.after_step))
        saved_argv, saved_path = sys.argv, list(sys.path)
        sys.argv, torch.autograd.backward = [str(path), *argv], self._counting(backward)
        torch.utils.swap_tensors = _swap_or_set(swap)
        torch.nn.functional.scaled_dot_product_attention = self._watching(sdpa)
        torch.save = self._skipped_save
        torch.utils.data.DataLoader.__init__ = _in_process(loader_init)
        sys.path.insert(0, str(path.parent))
        self.result.on_cpu = not torch.cuda.is_available()
        self.tracker.user_dir = str(path.parent) + os.sep
        modes = [FakeTensorMode(allow_non_fake_inputs=True)] if self.fake else []
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(cuda_as_cpu())
                stack.callback(pass_on_lost_interrupts())  # a Ctrl-C in the tracker's finalizers
                stack.enter_context(torch.autograd.graph.saved_tensors_hooks(
                    self.tracker.pack, lambda t: t))
                for mode in modes + [self.tracker]:
                    stack.enter_context(mode)
                stack.enter_context(_quiet_fake_tensors())
                # The report is tvis's stdout (JSON with --format json): the script's prints go to stderr.
                stack.enter_context(contextlib.redirect_stdout(sys.stderr))
                yield
        finally:
            for handle in handles:
                handle.remove()
            torch.autograd.backward, torch.utils.swap_tensors = backward, swap
            torch.nn.functional.scaled_dot_product_attention = sdpa
            torch.save, torch.utils.data.DataLoader.__init__ = save, loader_init
            sys.argv, sys.path[:] = saved_argv, saved_path

    def _skipped_save(self, *args: Any, **kwargs: Any) -> None:
        """torch.save under the trace: fake tensors hold no data to write (pickling them
        fails), and a checkpoint of them would overwrite the script's real one."""
        self.result.saves_skipped += 1

    def _watching(self, sdpa: Any) -> Any:
        """F.scaled_dot_product_attention that notes a call no fused kernel served. Patched
        on the module, so nn.MultiheadAttention (which calls it from there) is seen too."""
        def watched_sdpa(*args: Any, **kwargs: Any) -> Any:
            before = self.tracker.fused_attention
            out = sdpa(*args, **kwargs)
            if self.tracker.fused_attention == before:
                self.result.math_attention = True
            return out
        return watched_sdpa


def _in_process(loader_init: Any) -> Any:
    """DataLoader.__init__ with num_workers=0: worker processes cannot share the trace's
    fake tensors, and loading in the script's process allocates what they would."""
    signature = inspect.signature(loader_init)

    @functools.wraps(loader_init)
    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        bound = signature.bind(self, *args, **kwargs)
        if bound.arguments.get("num_workers"):
            bound.arguments.update(num_workers=0, prefetch_factor=None, persistent_workers=False,
                                   multiprocessing_context=None)
        loader_init(*bound.args, **bound.kwargs)
    return init


@contextlib.contextmanager
def _quiet_fake_tensors() -> Iterator[None]:
    """Fake tensors' own noise, not the script's: a shape error makes torch log its
    traceback at ERROR before raising (the exception becomes tvis's one-line error), and
    torch warns about data pointers of fake storages."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Accessing the data pointer of FakeTensor")
            yield
    finally:
        log.setLevel(level)


def _swap_or_set(swap: Any) -> Any:
    """Module.to()/.half() swap fake parameters, which fails while fake-tensor bookkeeping
    holds weak references to them; setting .data gives the module the same state."""
    def swap_or_set(t1: Any, t2: Any) -> None:
        try:
            swap(t1, t2)
        except RuntimeError:
            t1.data = t2.data
    return swap_or_set


def _note_grads(tracker: Any, optimizers: list[Any]) -> None:
    """Remember this step's gradient storages: the next step's peak may still hold them."""
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    tracker.grads.add(tracker.key(p.grad))


def _parts(tracker: Any, optimizers: list[Any]) -> dict[str, int]:
    """Split the peak snapshot by what each storage was: parameter, gradient, state, saved
    for backward (activations) or anything else live (workspace)."""
    import torch

    param_keys, grad_keys, state_keys = set(), set(tracker.grads), set()
    # By type: isinstance() reads `__class__`, which runs code for some live objects (a
    # deprecated torch attribute warns; a dead weakref.proxy raises ReferenceError).
    modules = [obj for obj in gc.get_objects() if issubclass(type(obj), torch.nn.Module)]
    for obj in modules:
        for tensor in list(obj.parameters(recurse=False)) + list(obj.buffers(recurse=False)):
            param_keys.add(tracker.key(tensor))
            if tensor.grad is not None:
                grad_keys.add(tracker.key(tensor.grad))
    for opt in optimizers:
        for group in opt.param_groups:
            for p in group["params"]:
                param_keys.add(tracker.key(p))
                if p.grad is not None:
                    grad_keys.add(tracker.key(p.grad))
        for state in opt.state.values():
            for value in state.values():
                if isinstance(value, torch.Tensor):
                    state_keys.add(tracker.key(value))
    parts = dict.fromkeys(("parameters", "gradients", "optimizer_state", "activations",
                           "workspace"), 0)
    for key, size in tracker.snapshot.items():
        if key in param_keys:
            parts["parameters"] += size
        elif key in grad_keys:
            parts["gradients"] += size
        elif key in state_keys:
            parts["optimizer_state"] += size
        elif key in tracker.saved:
            parts["activations"] += size
        else:
            parts["workspace"] += size
    parts["workspace"] += tracker.peak - sum(tracker.snapshot.values())
    return parts


def torch_available() -> bool:
    try:
        importlib.import_module("torch")
    except ImportError:
        return False
    return True


MATH_ATTENTION_NOTE = ("CPU attention ran unfused and kept every attention matrix; CUDA's fused "
                       "kernels do not, so expect a lower GPU peak")
FAKED_SCALARS = ("{n} value(s) read out of tensors (.item(), int(), a tensor in an if) were "
                 "taken as 1: fake tensors hold no data, so sizes computed from data may differ")
SAVINGS_NOTE = "suggestion savings are estimated from the code and taken off the traced peak"


def traced_estimate(path: str | Path, argv: list[str] | None, static: Any) -> Any:
    """An Estimate whose breakdown is the traced one, overheads added as the static path does;
    TvisError when the run did not get as far as a training step, or failed or exited."""
    from tvis_tui.vram.estimate import ALLOCATOR_OVERHEAD, CUDA_CONTEXT, OVERHEAD_NOTE, Estimate

    result = trace(path, argv)
    failure = _failure(result)
    if failure is not None:
        raise TvisError(f"--trace: {failure}")
    parts = dict(result.parts)
    tensors = sum(parts.values())
    on_cuda = static.settings.device == "cuda"
    parts["cuda_context"] = CUDA_CONTEXT if on_cuda else 0
    parts["allocator_overhead"] = int(tensors * ALLOCATOR_OVERHEAD) if on_cuda else 0
    kernels = "CPU kernels" if result.on_cpu else "meta kernels"
    assumptions = [f"traced: the script ran on fake tensors with {kernels} for "
                   f"{len(result.step_peaks)} step(s); the last step is reported"]
    if on_cuda:
        assumptions.append(OVERHEAD_NOTE)
    if result.faked_scalars:
        assumptions.append(FAKED_SCALARS.format(n=result.faked_scalars))
    if result.saves_skipped:
        assumptions.append(f"torch.save skipped {result.saves_skipped} time(s): fake tensors "
                           "hold nothing to write")
    notes = [MATH_ATTENTION_NOTE] if result.math_attention and result.on_cpu else []
    label = "traced on CPU" if result.on_cpu else "traced with fake CUDA tensors"
    return Estimate(str(path), parts, result.peak_phase, static.read, assumptions, label,
                    static.facts, static.settings, notes)


def _failure(result: TraceResult) -> str | None:
    """Why the run measured nothing a verdict can rest on, in one line; None when it did."""
    if result.error is not None:
        hint = f"; {FAKED_SCALARS.format(n=result.faked_scalars)}" if result.faked_scalars else ""
        return (f"the script failed on fake tensors ({result.error}){hint}; "
                "the static estimate needs no --trace")
    when = (f"after {len(result.step_peaks)} training step(s)" if result.step_peaks
            else "before its first training step")
    code = result.exit_code
    if code is not None:
        how = f"status {code}" if isinstance(code, int) else f"the message {str(code)!r}"
        hint = ""
        if code == 2:
            hint = "; if it needs arguments, give them with --script-args \"...\""
        elif result.on_cpu and not result.step_peaks:
            hint = "; under --trace torch.cuda.is_available() is False"
        return f"the script exited with {how} {when}{hint}"
    if not result.step_peaks:
        return ("the script ended before its first training step (no backward() or optimizer "
                "step ran), so there was nothing to measure")
    return None
