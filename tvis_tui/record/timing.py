"""Call and step times on the GPU, from CUDA events, resolved off the training thread.

On CPU a call's duration is the monotonic clock between its hooks less tvis's own time
(calls.py). On CUDA that clock only sees kernel launches, so a call whose input tensors
are on CUDA also gets two events (`torch.cuda.Event(enable_timing=True)`) recorded on the
current stream: one where its clock starts, one as its closing hook begins (before tvis
summarises its outputs). Nothing synchronises on the training thread: the record goes to
the writer thread with its events, which waits for the end event there
(`event.synchronize()`), and writes `duration_ns` as the events' elapsed time, keeping the
CPU figure in `extra["cpu_duration_ns"]`. A step's phase times are resolved the same way.

Garbage collections outside tvis's hooks are counted as tvis's overhead too
(`count_gc_as_overhead`): tvis's allocations make most of them.

Known limit: kernels tvis itself launches on the same stream (tensor summaries of the
calls inside a call) fall between that call's events. Not run on a GPU in development:
tests drive this path with fake events (`CudaTimer(event=..., initialized=..., is_cuda=...)`).
"""

from __future__ import annotations

import gc
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Iterator

import torch


def _cuda_event() -> Any:
    return torch.cuda.Event(enable_timing=True)


def _is_cuda(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.is_cuda


class CudaTimer:
    """Makes event pairs for calls on CUDA tensors; inert until CUDA is initialized."""

    def __init__(self, event: Callable[[], Any] = _cuda_event,
                 initialized: Callable[[], bool] = torch.cuda.is_initialized,
                 is_cuda: Callable[[Any], bool] = _is_cuda) -> None:
        self._event, self._initialized, self._is_cuda = event, initialized, is_cuda

    def watch(self, pairs: Iterator[tuple[str, Any]], found: list[bool]) -> Iterator[tuple[str, Any]]:
        """`pairs` unchanged; sets found[0] when one of them is a CUDA tensor. Costs one
        call per call on CPU (`is_initialized` is false there)."""
        if not self._initialized():
            return pairs
        return self._scan(pairs, found)

    def _scan(self, pairs: Iterator[tuple[str, Any]], found: list[bool]) -> Iterator[tuple[str, Any]]:
        for name, value in pairs:
            if not found[0] and self._is_cuda(value):
                found[0] = True
            yield name, value

    def mark(self) -> Any:
        """An event recorded now on the current stream."""
        event = self._event()
        event.record()
        return event


def elapsed_ns(start: Any, end: Any) -> int:
    """Waits for `end` (call on the writer thread only) and returns the GPU time."""
    end.synchronize()
    return int(start.elapsed_time(end) * 1e6)


def put_timed_call(run_writer: Any, record: Any, start: Any, end: Any) -> None:
    """Writer-thread half of closing a call timed on the GPU."""
    try:
        gpu = elapsed_ns(start, end)
    except Exception:  # a failed CUDA context: keep the CPU figure
        run_writer.put_call(record, first=False)
        return
    extra = {**record.extra, "cpu_duration_ns": record.duration_ns, "clock": "cuda events"}
    run_writer.put_call(replace(record, duration_ns=gpu, extra=extra), first=False)


def put_timed_step(run_writer: Any, record: Any, events: list[tuple[str, Any, Any]]) -> None:
    """Writer-thread half of a step whose top-level calls were timed on the GPU: their
    phases get GPU time; the CPU figures stay in extra["cpu_phase_ns"]."""
    gpu: dict[str, int] = {}
    try:
        for phase, start, end in events:
            gpu[phase] = gpu.get(phase, 0) + elapsed_ns(start, end)
    except Exception:
        run_writer.put_step(record)
        return
    extra = {**record.extra, "cpu_phase_ns": dict(record.phase_ns), "phase_clock": "cuda events"}
    run_writer.put_step(replace(record, phase_ns={**record.phase_ns, **gpu}, extra=extra))


def count_gc_as_overhead(log: Any) -> Callable[[], None]:
    """Count garbage collections outside tvis's hooks as tvis's overhead; returns the undo.

    tvis allocates many small objects per call, so the collector runs far more often while
    recording, and a collection runs wherever an allocation crosses the threshold: mostly
    inside the script's own code, where it would lengthen a call's duration. A collection
    the script would have had anyway is taken off too (rarer: the plain run allocates less).
    Collections inside a hook are in the hook's time already."""
    started: dict[int, int] = {}

    def on_gc(phase: str, info: dict) -> None:
        thread = log._thread
        if thread.hook_depth > 0:
            return
        key = threading.get_ident()
        if phase == "start":
            started[key] = time.perf_counter_ns()
            thread.collecting = True  # callbacks it runs (a tensor dying) are in its time
        elif key in started:
            thread.overhead_ns += time.perf_counter_ns() - started.pop(key)
            thread.collecting = False

    gc.callbacks.append(on_gc)
    return lambda: gc.callbacks.remove(on_gc) if on_gc in gc.callbacks else None
