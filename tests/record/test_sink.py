"""The sink: everything put reaches the store, commits waiting for a writer slower than
training stay under a bound, deferred writes land after what came before them, and a write
that fails is reported instead of raised."""

from __future__ import annotations

import threading
import time

from tvis_tui.record import sink
from tvis_tui.store import RunReader, RunWriter, Slot

VALUE_BYTES = 64 << 10


class SlowWriter(RunWriter):
    """A disk slower than training: every commit takes a millisecond, and each value is
    committed on its own."""

    def __init__(self, path):
        super().__init__(path, max_pending_bytes=VALUE_BYTES)

    def write(self, pending):
        time.sleep(0.001)
        super().write(pending)


def _put(thread: sink.WriterThread, seq: int) -> None:
    slot = Slot("output", 0, "out", shape=(VALUE_BYTES,), dtype="uint8", values_dtype="uint8")
    thread.put_slots(seq, [(slot, bytes([seq % 256]) * VALUE_BYTES)])


def _assert_all_written(path, seqs) -> None:
    with RunReader(path) as run:
        for seq in seqs:
            values = run.values(seq, run.slots(seq, "output")[0])
            assert values.tobytes() == bytes([seq % 256]) * VALUE_BYTES


def test_a_slow_writer_makes_hooks_wait_instead_of_holding_every_value(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "MAX_HELD_BYTES", 8 * VALUE_BYTES)
    thread = sink.WriterThread(SlowWriter(tmp_path / "run"))
    held = []
    for seq in range(1, 101):
        _put(thread, seq)
        held.append(thread._held)
    thread.close()
    assert max(held) <= 9 * VALUE_BYTES + 4096  # the cap, and the one commit that crossed it
    _assert_all_written(tmp_path / "run", range(1, 101))


def test_hooks_on_several_threads_all_get_through_a_slow_writer(tmp_path, monkeypatch):
    """Threads waiting for the writer hold no lock the writer thread needs."""
    monkeypatch.setattr(sink, "MAX_HELD_BYTES", 8 * VALUE_BYTES)
    thread = sink.WriterThread(SlowWriter(tmp_path / "run"))
    seqs = [[k * 1000 + i for i in range(1, 41)] for k in range(4)]
    workers = [threading.Thread(target=lambda s=s: [_put(thread, seq) for seq in s], daemon=True)
               for s in seqs]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    assert not any(worker.is_alive() for worker in workers)
    thread.close()
    _assert_all_written(tmp_path / "run", [seq for s in seqs for seq in s])


def test_a_deferred_write_runs_on_the_writer_thread_after_earlier_commits(tmp_path):
    thread = sink.WriterThread(RunWriter(tmp_path / "run", max_pending_bytes=1))
    _put(thread, 1)
    seen = []

    def overwrite(run_writer, seq):
        seen.append(threading.current_thread().name)
        slot = Slot("output", 0, "out", shape=(VALUE_BYTES,), dtype="uint8", values_dtype="uint8")
        run_writer.put_slots(seq, [(slot, bytes([7]) * VALUE_BYTES)])

    thread.defer(overwrite, 1)
    thread.close()
    assert seen == ["tvis-writer"]
    with RunReader(tmp_path / "run") as run:
        assert run.values(1, run.slots(1, "output")[0]).tobytes() == bytes([7]) * VALUE_BYTES


def test_a_failing_write_is_reported_and_the_rest_of_the_run_is_kept(tmp_path):
    thread = sink.WriterThread(RunWriter(tmp_path / "run"))
    thread.put_meta(unencodable=object())
    _put(thread, 2)
    thread.close()
    assert len(thread.errors) == 1 and thread.errors[0].startswith("store write failed: TypeError")
    _assert_all_written(tmp_path / "run", [2])
