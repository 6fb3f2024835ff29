"""Writing the run from a thread of its own, so training does not wait for LMDB.

Hooks hand finished records (immutable, or copied) to a queue; one writer thread applies
them to the RunWriter in the order they were queued, so the store sees exactly the
sequence a synchronous writer would. LMDB commits (copying tensor values into the map)
then overlap with training. When training produces values faster than the writer stores
them (everything captured, on a busy machine), hooks wait once the values held for the
writer pass MAX_HELD_BYTES, until it has caught up to half of that: memory stays bounded,
and the wait is counted as tvis's overhead like the rest of a hook.
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable

from tvis_tui.store.writer import RunWriter

QUEUE_BATCHES = 256
"""Batches in flight at most before hooks wait for the disk."""

BATCH_ITEMS = 64
BATCH_SECONDS = 0.1
"""Records are handed over in batches: waking the writer thread for each one would cost
a thread switch (and a GIL hand-off) per record. A batch goes when it holds BATCH_ITEMS
records or its oldest is BATCH_SECONDS old, so a live reader lags by about that much."""


MAX_HELD_BYTES = 256 << 20
"""Tensor values queued for the writer at most before hooks wait for it."""


_Item = tuple[Callable[..., Any], tuple, dict, int]
"""A queued RunWriter call: method, args, kwargs and the bytes of tensor values it writes."""


class WriterThread:
    """The RunWriter methods the recorder uses, queued to a daemon thread."""

    def __init__(self, writer: RunWriter) -> None:
        self._writer = writer
        self._queue: queue.Queue[list[_Item] | None] = queue.Queue(maxsize=QUEUE_BATCHES)
        self._batch: list[_Item] = []
        self._batch_started = 0.0
        self._batch_lock = threading.Lock()
        self.errors: list[str] = []
        # Bytes of tensor values queued (counted under the batch lock) and written (by
        # the writer thread alone).
        self._queued_bytes = 0
        self._written_bytes = 0
        self._caught_up = threading.Condition()  # notified as each batch is written
        self._thread = threading.Thread(target=self._drain, name="tvis-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            for method, args, kwargs, values_bytes in batch:
                try:
                    method(*args, **kwargs)
                except Exception as exc:  # keep training going; the runner reports it
                    if len(self.errors) < 10:
                        self.errors.append(f"store write failed: {type(exc).__name__}: {exc}")
                self._written_bytes += values_bytes
            with self._caught_up:
                self._caught_up.notify_all()

    def _submit(self, method: Callable[..., Any], *args: Any, values_bytes: int = 0,
                **kwargs: Any) -> None:
        now = time.monotonic()
        with self._batch_lock:
            self._queued_bytes += values_bytes
            if not self._batch:
                self._batch_started = now
            self._batch.append((method, args, kwargs, values_bytes))
            if len(self._batch) < BATCH_ITEMS and now - self._batch_started < BATCH_SECONDS:
                return
            batch, self._batch = self._batch, []
        self._queue.put(batch)

    def _hand_over(self) -> None:
        with self._batch_lock:
            batch, self._batch = self._batch, []
        if batch:
            self._queue.put(batch)

    def put_call(self, *args: Any, **kwargs: Any) -> None:
        self._submit(self._writer.put_call, *args, **kwargs)

    def put_slots(self, seq: int, slots: list) -> None:
        self._submit(self._writer.put_slots, seq, slots, values_bytes=_values_bytes(slots))
        if self._backlog() > MAX_HELD_BYTES:
            self._wait_for_writer()

    def _backlog(self) -> int:
        return self._queued_bytes - self._written_bytes

    def _wait_for_writer(self) -> None:
        """Wait until the writer holds half the cap or less. The open batch is handed over
        at every turn: hooks on other threads may have added to it meanwhile, and what
        sits there counts in the backlog. (Handed over outside the condition's lock: a
        full queue waits for the writer, which takes that lock after each batch.)"""
        while self._backlog() > MAX_HELD_BYTES // 2 and self._thread.is_alive():
            self._hand_over()
            with self._caught_up:
                if self._backlog() > MAX_HELD_BYTES // 2:
                    self._caught_up.wait(timeout=0.05)

    def held_bytes(self) -> int:
        """Memory tvis holds for the store right now: values waiting in the queue and
        the writer's uncommitted buffer."""
        return self._backlog() + self._writer._pending_bytes

    def put_step(self, *args: Any) -> None:
        self._submit(self._writer.put_step, *args)

    def put_meta(self, **values: Any) -> None:
        self._submit(self._writer.put_meta, **values)

    def put_source(self, *args: Any) -> None:
        self._submit(self._writer.put_source, *args)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """Queue `function(run_writer, *args)`: how store extensions write (store/samples.py)."""
        self._submit(function, self._writer, *args)

    def flush(self) -> None:
        self._submit(self._writer.flush)
        self._hand_over()

    def close(self, **final_meta: Any) -> None:
        """Write everything queued, then the final metadata, and close the store."""
        self._hand_over()
        self._queue.put(None)
        self._thread.join()
        if self.errors:
            final_meta["warnings"] = [*final_meta.get("warnings", []), *self.errors]
        self._writer.close(**final_meta)


def _values_bytes(slots: list) -> int:
    return sum(len(values) for _, values in slots if values is not None)
