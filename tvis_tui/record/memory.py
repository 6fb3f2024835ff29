"""Peak memory per step, measured without touching what the script computes.

On CUDA the allocator keeps the peak itself: `max_memory_allocated`, read at each step's
end and never reset (a reset would change what the script itself reads there), so a
step's figure is the peak so far: the first steps, where the peak is made, show it.

On CPU torch has no cheap allocator statistics, and the profiler's memory events or a
dispatch mode would change speed or switch off fast paths. So the CPU figure is the peak
of live tensor storage tvis sees (live_tensors.py): parameters, gradients, optimizer
state, batches, module inputs and outputs, and the activations autograd keeps for backward
(counted through the module outputs that require grad). It leaves out what the script
holds that tvis never sees (its dataset, a tensor made outside any module) and the
temporaries inside one module call, and it never counts tvis's own copies.

For comparison, the process's peak resident memory (the kernel's VmHWM, Linux) is read as
each step ends and goes into StepRecord.extra["rss_peak_bytes"], above the resident
memory when recording began. Like the CUDA figure it is the peak so far, never reset (a
reset through /proc/self/clear_refs would change what the script reads from getrusage's
ru_maxrss). It counts everything (the script's dataset, allocator caches, tvis's own
buffers for the store) and misses nothing between hooks, for one /proc read a step. (It
replaced a C heap figure sampled as each phase returned: glibc's `mallinfo2` walks the
heap's free lists, ~40-130 us a sample on the bundled examples, ~0.9 ms a step.)
"""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Iterator

import torch

from tvis_tui.record.live_tensors import LiveTensors
from tvis_tui.record.module_backward import ModuleBackwardTimes
from tvis_tui.record.saved import BackwardMemory, hooks_active


CUDA_METHOD = "cuda max_memory_allocated: the peak since the start, not reset per step"
LIVE_METHOD = ("live tensor storage seen by tvis: params, grads, optimizer state, batches, "
               "module inputs/outputs, outputs kept for backward")
NONE_METHOD = "not measured"
UNWALKED_METHOD = (LIVE_METHOD.removesuffix("outputs kept for backward")
                   + "not what autograd saved (saved-tensor hooks were in use)")
SAVED_HOOKS_SEEN = ("saved-tensor hooks are in use (non-reentrant checkpointing, offloading): "
                    "from now on what autograd saves is not in the memory figure")
"""Why what the graph saved is no longer read: reading it would run the script's unpack hook
(a recomputation). The graph's nodes are still hooked: that reads nothing saved."""


class _PeakRss:
    """The kernel's record of this process's peak resident memory (Linux)."""

    STATUS = "/proc/self/status"

    def __init__(self, base: int) -> None:
        self.base = base

    @classmethod
    def start(cls) -> "_PeakRss | None":
        """Reads the resident memory now as the base; None where /proc has no VmHWM."""
        base = cls._field(b"VmRSS:")
        return cls(base) if base is not None and cls._field(b"VmHWM:") is not None else None

    def peak(self) -> int | None:
        """The peak so far above the base, in bytes; None if /proc could not be read."""
        peak = self._field(b"VmHWM:")
        return None if peak is None else max(peak - self.base, 0)

    @classmethod
    def _field(cls, name: bytes) -> int | None:
        try:
            with open(cls.STATUS, "rb") as f:
                text = f.read()
            start = text.index(name) + len(name)
            return int(text[start:text.index(b"kB", start)]) * 1024
        except (OSError, ValueError):
            return None


class PeakMemory:
    """Tracks the peak of one step; `method` says how (it goes into StepRecord.extra)."""

    def __init__(self) -> None:
        # Only is_initialized(): anything else would touch the driver before the script
        # had its say (CUDA_VISIBLE_DEVICES set at its top, say).
        self._cuda = torch.cuda.is_initialized()
        self.live = LiveTensors()
        self._rss = None if self._cuda else _PeakRss.start()
        self.method = CUDA_METHOD if self._cuda else LIVE_METHOD
        self._read_saved = True  # off for good once saved-tensor hooks were seen (saved.py)
        # Runs tvis code from backward's node hooks as the recorder's hooks run (Recorder
        # sets its _guard: counted as overhead, tracing paused, errors contained).
        self.guard: Callable[..., Any] = lambda body, *args: body(*args)
        self.warn: Callable[[str], None] = lambda message: None
        self._backward: BackwardMemory | None = None
        # Times each module call's backward from the node hooks (module_backward.py).
        self.node_times: ModuleBackwardTimes | None = None
        self._followed: list[bool] = []  # per backward() running: whether its graph is followed

    def follows_nodes(self) -> bool:
        """Whether backward's nodes are hooked (on the CPU)."""
        return not self._cuda

    # -- what the recorder sees ----------------------------------------------------------

    def watch(self, pairs: Iterator[tuple[str, Any]], phase: str | None,
              activation: bool = False, backward: bool = False) -> Iterator[tuple[str, Any]]:
        """`pairs` with their tensors counted (unchanged on CUDA); for backward()'s inputs
        the storages their graph saved are counted too."""
        if self._cuda or torch.cuda.is_initialized():  # the script moved to CUDA
            self._cuda = True
            return pairs
        if self._read_saved and hooks_active():
            self._read_saved = False
            self.method = UNWALKED_METHOD
            self.warn(SAVED_HOOKS_SEEN)
        if backward:
            return self._watch_backward(pairs)
        return self.live.watch(pairs, phase, activation)

    def _watch_backward(self, pairs: Iterator[tuple[str, Any]]) -> Iterator[tuple[str, Any]]:
        seen = list(self.live.watch(pairs, "backward"))  # a loss or a few: all roots, one walk
        roots = [v.grad_fn for _, v in seen if isinstance(v, torch.Tensor) and v.grad_fn is not None]
        nested = any(self._followed)  # a reentrant checkpoint's backward, inside one followed
        self._followed.append(bool(roots))
        if roots:
            if self._backward is None:
                self._backward = BackwardMemory(self.live, self.guard)
            if self.node_times is not None:
                self._backward.node_listener = self.node_times.node_ran
            self._backward.begin(roots, nested, read_saved=self._read_saved)
            if self.node_times is not None:
                self.node_times.begin(time.perf_counter_ns(), nested)
        return iter(seen)

    def see_optimizer(self, optimizer: Any, phase: str = "optimizer") -> None:
        """Parameters, their gradients and the optimizer's state tensors."""
        if self._cuda:
            return
        for group in optimizer.param_groups:
            for p in group["params"]:
                self.live.see(p, phase)
                self.live.see(p.grad, phase)
        for state in list(optimizer.state.values()):
            if isinstance(state, dict):
                self.live.see_all(state.values(), phase)
        self.live.sample(phase)

    def see_optimizers(self, optimizers: Iterable[Any], phase: str) -> None:
        for opt in list(optimizers):
            self.see_optimizer(opt, phase)

    def backward_done(self) -> None:
        if not self._cuda:
            followed = self._followed.pop() if self._followed else False
            if followed and not any(self._followed):  # the outermost followed one
                self._backward.end()  # type: ignore[union-attr]
                if self.node_times is not None:
                    self.node_times.end()
            self.live.backward_done()

    # -- step end ------------------------------------------------------------------------

    def end_step(self) -> tuple[int | None, dict[str, Any]]:
        """(the peak since the previous call in bytes, StepRecord.extra fields); starts
        the next step's count."""
        if self._cuda or torch.cuda.is_initialized():
            self._cuda = True
            self.method = CUDA_METHOD
            return int(torch.cuda.max_memory_allocated()), {"peak_method": CUDA_METHOD}
        peak, phases = self.live.end_step()
        extra: dict[str, Any] = {"peak_method": self.method if peak else NONE_METHOD}
        if phases:
            extra["peak_phase_bytes"] = phases
        rss = self._rss.peak() if self._rss is not None else None
        if rss is not None:
            extra["rss_peak_bytes"] = rss
        return (peak or None), extra

    def run_meta(self) -> dict[str, Any]:
        return {"peak_method": self.method,
                **({} if self._cuda else {"live_tensor_peak_bytes": self.live.total_peak})}
