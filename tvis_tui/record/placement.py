"""The phase of a user function the training loop calls itself, which has none of its own.

A call's phase is decided as it opens (calls.py `call_phase`), and the call tree lists a
step's calls in spans of one phase, in call order. A function the loop calls directly
(`train_step(batch)`, `grad_norm(model)`, `log(step, loss)`) does no training work of its
own: reading "forward" wherever it ran, a helper called after backward() opened a forward
span between the backward and the optimizer step. Such a function takes the phase of the
first call recorded inside it (a model: forward; `loss.backward()`: backward), or where
it made none, that of the call before it in the step (a gradient-norm helper after
backward() is in the backward phase); "forward" where that phase is none of loss,
backward and optimizer (the step's first call; a data or no_grad call, as a train step's
batch fetch or frozen encoder: the function itself runs with autograd on).

Until one of those is known it is written without a span. One that returns before waits
to be written with its phase, up to MAX_WAITING of them; the calls inside it and their
phases are not changed (they inherit "forward" from it, as from the loop itself). One
placer serves every thread, so that spans follow call order; what waits when the run ends
(`settle`: a hard exit, an abandoned stack) takes the phase of the call before it. A run
killed outright (SIGKILL) while a function waits leaves that call out of every span."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from typing import Any, Callable

from tvis_tui.record.sink import WriterThread
from tvis_tui.store.records import CallRecord

MAX_WAITING = 256
"""Functions waiting for their phase, before the call before them decides it: a loop of
helpers with no model call among them (a preprocessing pass) holds no more records."""

GpuEvents = tuple[Any, Any] | None
PLACED = ("loss", "backward", "optimizer")
"""The phases a function of the loop is moved into; "forward" otherwise."""


@dataclass(slots=True)
class _Unplaced:
    call: Any  # the OpenCall
    closed: CallRecord | None = None  # what it returned, waiting to be written
    gpu: GpuEvents = None


class PhasePlacer:
    """The user functions opened since the last call of a known phase, on any thread."""

    def __init__(self, writer: WriterThread,
                 write_closed: Callable[[CallRecord, GpuEvents], None]) -> None:
        self._writer = writer
        self._write_closed = write_closed
        self._unplaced: list[_Unplaced] = []
        self._last: tuple[int, str] | None = None  # (step, phase) of the last placed call
        self._lock = threading.RLock()

    def opened(self, call: Any, placed: bool) -> None:
        """Write a call as it opens: `placed`, its phase is known; else it waits."""
        record: CallRecord = call.record
        with self._lock:
            if not placed:
                self._writer.put_call(record, spanned=False)
                self._unplaced.append(_Unplaced(call))
                return
            if self._unplaced:
                waiting = self._unplaced[0].call.record.step
                self._place(_moved(record.phase) if waiting == record.step else self._phase_before(waiting))
            self._writer.put_call(record)
            self._last = (record.step, record.phase)

    def closed(self, call: Any, record: CallRecord, gpu: GpuEvents) -> CallRecord | None:
        """The record to write now for `call`, which returned as `record`; None where
        it waits for its phase."""
        if call.placed is not None:
            return replace(record, phase=call.placed)
        if not self._unplaced:  # every module call, say: they place what waited
            return record
        with self._lock:
            entry = next((e for e in reversed(self._unplaced) if e.call is call), None)
            if entry is None:
                return record
            entry.closed, entry.gpu = record, gpu
            if entry is self._unplaced[0] or len(self._unplaced) > MAX_WAITING:
                self._place(self._phase_before(record.step))
            return None

    def settle(self) -> None:
        """Place what waits now: the run is ending, with no call left to tell."""
        with self._lock:
            if self._unplaced:
                self._place(self._phase_before(self._unplaced[0].call.record.step))

    def phase_now(self, call: Any) -> str:
        """The phase `call` is listed in if it returned now."""
        if call.placed is not None:
            return call.placed
        if self._unplaced and any(e.call is call for e in self._unplaced):
            return self._phase_before(call.record.step)
        return call.record.phase

    def _phase_before(self, step: int) -> str:
        last = self._last
        return _moved(last[1]) if last is not None and last[0] == step else "forward"

    def _place(self, phase: str) -> None:
        unplaced = self._unplaced
        first = unplaced[0].call.record
        self._writer.place(first.step, phase, first.seq, unplaced[-1].call.record.seq)
        self._last = (first.step, phase)
        for entry in unplaced:
            entry.call.placed = phase
            if entry.closed is not None:
                self._write_closed(replace(entry.closed, phase=phase), entry.gpu)
            else:
                self._writer.put_call(replace(entry.call.record, phase=phase), first=False)
        self._unplaced = []  # after the writes: an interrupt among them places them again


def _moved(phase: str) -> str:
    return phase if phase in PLACED else "forward"
