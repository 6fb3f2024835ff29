"""Writing the run: records are encoded where they are made, LMDB is written by a thread.

Hooks put records into the RunWriter's buffer on their own thread (encoding them there,
counted as tvis's overhead); each commit's buffer goes to one writer thread, which applies
them in the order committed, so the store sees exactly the sequence a synchronous writer
would. Encoding on the writer thread instead held the GIL whenever a training op returned
and wanted it back, and that wait landed in the script's own time, where tvis cannot count
it (bench_record.py, Dec 2026, old/new interleaved, recorded/plain step in summary mode:
char LM 1.39, 1.40 -> 1.22, 1.24; the CNN within noise, 1.39, 1.33 -> 1.33, 1.37). The writer
thread is left a short loop of LMDB puts and the commit, little Python to hold the GIL.

When training produces values faster than the writer stores them (everything captured,
on a busy machine), hooks wait once the bytes handed to the writer pass MAX_HELD_BYTES,
until it has caught up to half of that: memory stays bounded, and the wait is counted as
tvis's overhead like the rest of a hook.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable

from tvis_tui.store.writer import RunWriter

MAX_HELD_BYTES = 256 << 20
"""Bytes handed to the writer thread at most before hooks wait for it."""

IDLE_COMMIT_SECONDS = 0.5
"""How often the writer thread looks for buffered records to commit while none come."""

MAX_ERRORS = 10
"""Distinct write errors kept (all failures are counted)."""

_Commit = tuple[list[tuple[bytes, bytes, bytes]], int]
_Deferred = tuple[Callable[..., Any], tuple]


class WriterThread:
    """The RunWriter methods the recorder uses; commits (and deferred writes) run on a
    daemon thread. A write that fails is reported in `errors`, never raised: a tvis bug or
    a full disk must not break training."""

    def __init__(self, writer: RunWriter) -> None:
        self._writer = writer
        # Unbounded: the bytes it holds are bounded by the hooks' wait.
        self._queue: queue.Queue[_Commit | _Deferred | None] = queue.Queue()
        self.errors: list[str] = []  # distinct messages, in the order first seen
        self.failed_writes = 0
        self._held = 0  # bytes handed over and not yet written, under _caught_up
        self._caught_up = threading.Condition()  # notified as each commit is written
        self._thread = threading.Thread(target=self._drain, name="tvis-writer", daemon=True)
        writer.hand_commits_to(self._hand_over)
        self._thread.start()

    def _hand_over(self, pending: list[tuple[bytes, bytes, bytes]], size: int) -> None:
        """Called by the RunWriter (under its lock) at each commit. A deferred write's
        commit is written at once: queued behind close()'s end mark, it would be lost."""
        if threading.current_thread() is self._thread:
            self._writer.write(pending)
            return
        with self._caught_up:
            self._held += size
        self._queue.put((pending, size))

    def _drain(self) -> None:
        while (job := self._next_job()) is not None:
            first, second = job
            try:
                if callable(first):
                    first(self._writer, *second)
                else:
                    self._writer.write(first)
            except Exception as exc:  # keep training going; the runner reports it
                self.failed(exc)
            if not callable(first):
                with self._caught_up:
                    self._held -= second
                    self._caught_up.notify_all()

    def _next_job(self) -> _Commit | _Deferred | None:
        """The next job; while none comes, what the hooks buffered is committed every
        IDLE_COMMIT_SECONDS: a run killed then keeps all but that last moment."""
        while True:
            try:
                return self._queue.get(timeout=IDLE_COMMIT_SECONDS)
            except queue.Empty:
                try:
                    self._writer.flush_stale()  # under its lock; hands the commit to this thread
                except Exception as exc:
                    self.failed(exc)

    def failed(self, exc: BaseException, doing: str = "store write failed") -> None:
        """Note a write that failed (the writer thread's or a hook's, at once). A full disk
        fails every commit after the first alike: one message, counted."""
        message = f"{doing}: {type(exc).__name__}: {exc}"
        with self._caught_up:
            self.failed_writes += 1
            if message not in self.errors and len(self.errors) < MAX_ERRORS:
                self.errors.append(message)

    def _apply(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            method(*args, **kwargs)
        except Exception as exc:
            self.failed(exc)
        if self._held > MAX_HELD_BYTES:
            self._wait_for_writer()

    def _wait_for_writer(self) -> None:
        """Wait until the writer holds half the cap or less. No RunWriter lock is held
        here: the writer thread's deferred writes take it."""
        with self._caught_up:
            while self._held > MAX_HELD_BYTES // 2 and self._thread.is_alive():
                self._caught_up.wait(timeout=0.05)

    def held_bytes(self) -> int:
        """Memory tvis holds for the store right now: commits waiting for the writer
        thread and the RunWriter's open buffer."""
        return self._held + self._writer._pending_bytes

    def put_call(self, *args: Any, **kwargs: Any) -> None:
        self._apply(self._writer.put_call, *args, **kwargs)

    def place(self, step: int, phase: str, first_seq: int, last_seq: int) -> None:
        self._apply(self._writer.place, step, phase, first_seq, last_seq)

    def put_slots(self, seq: int, slots: list) -> None:
        self._apply(self._writer.put_slots, seq, slots)

    def put_nonfinite_grad(self, seq: int) -> None:
        self._apply(self._writer.put_nonfinite_grad, seq)

    def put_step(self, *args: Any) -> None:
        self._apply(self._writer.put_step, *args)

    def put_meta(self, **values: Any) -> None:
        self._apply(self._writer.put_meta, **values)

    def put_source(self, *args: Any) -> None:
        self._apply(self._writer.put_source, *args)

    def call(self, function: Callable[..., Any], *args: Any) -> None:
        """`function(run_writer, *args)` now: how store extensions write (store/samples.py)."""
        self._apply(function, self._writer, *args)

    def defer(self, function: Callable[..., Any], *args: Any) -> None:
        """`function(run_writer, *args)` on the writer thread, after everything committed
        so far: for records that must wait for the device (CUDA event times)."""
        self._queue.put((function, args))

    def flush(self) -> None:
        self._apply(self._writer.flush)

    def close(self, **final_meta: Any) -> None:
        """Write everything handed over, then the rest and the final metadata, and close."""
        self._queue.put(None)
        self._thread.join()
        self._writer.hand_commits_to(None)
        if self.errors:
            final_meta["warnings"] = [*final_meta.get("warnings", []), *self.errors]
            final_meta["incomplete"] = True
        self._writer.close(**final_meta)

    @property
    def restored(self) -> bool:
        """Whether the run's folder was deleted while recording and written again at close."""
        return self._writer.restored
