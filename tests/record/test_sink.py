"""The writer thread: everything queued reaches the store in order, and values waiting for a
writer slower than training stay under a bound."""

from __future__ import annotations

import threading
import time

from tvis_tui.record import sink
from tvis_tui.store import RunReader, RunWriter, Slot

VALUE_BYTES = 64 << 10


class SlowWriter(RunWriter):
    """A disk slower than training: every slot write takes a millisecond."""

    def put_slots(self, seq, slots):
        time.sleep(0.001)
        super().put_slots(seq, slots)


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
        held.append(thread._backlog())
    thread.close()
    assert max(held) <= 9 * VALUE_BYTES  # the cap, and the one value that crossed it
    _assert_all_written(tmp_path / "run", range(1, 101))


def test_hooks_on_several_threads_all_get_through_a_slow_writer(tmp_path, monkeypatch):
    """A thread that adds under the cap leaves its values in the open batch; a thread
    waiting for the writer must hand them over, or it would wait for them forever."""
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
