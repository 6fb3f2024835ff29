"""Bytes of tensor storage alive right now, counted over the tensors tvis sees (CPU peak).

CPU torch keeps no allocator statistics, and the ways to see every allocation (the
profiler's memory events, a dispatch mode) change speed or switch off fast paths. So the
recorder counts what it sees anyway: parameters, their gradients and optimizer state (at
each optimizer step), module inputs and outputs, batches, losses. Each unique storage
(key: `untyped_storage().data_ptr()`, size: its `nbytes()`) counts once, however many
views of it were seen, and stops counting when the last seen tensor of it dies (a weakref
callback; the tensor itself is never held, so nothing lives longer than it would).

Saved activations: autograd keeps the tensors it saved for backward after the script drops
its own references (`x = layer(x)` rebinds x). A tensor saved as an op's input keeps its
Python object alive (torch preserves it while C++ holds it), so it keeps counting by itself;
one saved as its op's result (ReLU, softmax: the grad_fn has `_saved_result`) is saved as a
new tensor, so such a module output keeps counting after it dies, until backward() returns.
During backward() what the graph saved, and the gradients between its nodes, are followed
node by node (saved.py, BackwardMemory): that also counts the tensors saved inside modules.
`saved_tensors_hooks` with an identity pack hook would show saves as they happen, but it makes a saved result hold itself (a
reference cycle through its grad_fn, left to the garbage collector), torch.func refuses to
run under it and it nests with checkpointing: not used.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Iterable, Iterator

import torch


class LiveTensors:
    """A running total of the storages of seen tensors, with the peak per step and phase."""

    def __init__(self) -> None:
        self._lock = threading.RLock()  # weakref callbacks run wherever a tensor dies
        self._refs: dict[int, tuple[weakref.ref, int, bool]] = {}  # id(tensor) -> (ref, key, held)
        self._count: dict[int, int] = {}  # storage key -> seen tensors alive
        self._size: dict[int, int] = {}  # storage key -> nbytes
        self._held = 0  # bytes of dead grad-requiring outputs kept until backward returns
        self.live = 0
        self.peak = 0
        self.phase_peak: dict[str, int] = {}
        self.total_peak = 0  # since recording began
        self.listener: Any = None  # told when a storage starts/stops counting (saved.py)
        # Charged with the time of a callback that ran in the script's own code (a tensor
        # died there, outside any hook): tvis's time, to be left out of the script's.
        self.charge: Callable[[int], None] = lambda started_ns: None

    @property
    def total(self) -> int:
        return self.live + self._held

    def see(self, tensor: Any, phase: str | None = None, activation: bool = False) -> None:
        """Count `tensor`'s storage while it lives; `activation`: a module output that
        autograd may save (kept counting after it dies, until backward returns)."""
        if not isinstance(tensor, torch.Tensor) or id(tensor) in self._refs:
            return
        try:
            if not tensor.is_cpu or tensor.is_sparse:
                return
            storage = tensor.untyped_storage()
            key, size = storage.data_ptr(), storage.nbytes()
        except Exception:  # tensor subclasses, functorch wrappers, fake tensors: not counted
            return
        if size == 0:
            return
        held = activation and tensor.requires_grad and _saves_result(tensor.grad_fn)
        tid = id(tensor)
        with self._lock:
            self._refs[tid] = (weakref.ref(tensor, lambda _, tid=tid: self._dead(tid)), key, held)
            count = self._count.get(key, 0)
            self._count[key] = count + 1
            if count == 0:
                self._size[key] = size
                self.live += size
                if self.listener is not None:
                    self.listener.tracked_now(key)
            elif size > self._size[key]:  # the storage grew (resize_) since first seen
                self.live += size - self._size[key]
                self._size[key] = size
        self.sample(phase)

    def see_all(self, tensors: Iterable[Any], phase: str | None = None) -> None:
        for tensor in tensors:
            self.see(tensor, phase)

    def watch(self, pairs: Iterator[tuple[str, Any]], phase: str | None = None,
              activation: bool = False) -> Iterator[tuple[str, Any]]:
        """Pass (name, value) pairs through, counting the tensors among them."""
        for name, value in pairs:
            self.see(value, phase, activation)
            yield name, value

    def _dead(self, tid: int) -> None:
        started = time.perf_counter_ns()
        try:
            self._forget(tid)
        finally:
            self.charge(started)

    def _forget(self, tid: int) -> None:
        with self._lock:
            entry = self._refs.pop(tid, None)
            if entry is None:
                return
            _, key, held = entry
            count = self._count[key] - 1
            if count:
                self._count[key] = count
                return
            del self._count[key]
            size = self._size.pop(key)
            self.live -= size
            if self.listener is not None:
                self.listener.untracked_now(key, size)
            if held:
                self._held += size

    def tracked(self, key: int) -> bool:
        """Whether a seen tensor of this storage is alive."""
        return key in self._count

    def backward_done(self, phase: str | None = "backward") -> None:
        """backward() returned: autograd has freed what it saved."""
        self.sample(phase)
        with self._lock:
            self._held = 0

    def sample(self, phase: str | None = None, total: int | None = None) -> None:
        if total is None:
            total = self.live + self._held
        if total > self.peak:
            self.peak = total
        if phase is not None and total > self.phase_peak.get(phase, 0):
            self.phase_peak[phase] = total
        if total > self.total_peak:
            self.total_peak = total

    def end_step(self) -> tuple[int, dict[str, int]]:
        """(peak, peak per phase) since the previous call; the next step starts at what
        is alive now."""
        with self._lock:
            peak, phases = self.peak, self.phase_peak
            self.peak, self.phase_peak = 0, {}
        self.sample()
        return peak, phases


_result_saving: dict[type, bool] = {}


def _saves_result(grad_fn: Any) -> bool:
    """Whether the op that made a tensor saved the tensor itself for its backward."""
    if grad_fn is None:
        return False
    cls = type(grad_fn)
    saves = _result_saving.get(cls)
    if saves is None:
        saves = _result_saving[cls] = hasattr(cls, "_saved_result")
    return saves
