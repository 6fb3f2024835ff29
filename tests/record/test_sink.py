"""The writer thread: everything queued reaches the store in order, and values waiting for a
writer slower than training stay under a bound."""

from __future__ import annotations

import time

from tvis_tui.record import sink
from tvis_tui.store import RunReader, RunWriter, Slot

VALUE_BYTES = 64 << 10


class SlowWriter(RunWriter):
    """A disk slower than training: every slot write takes a millisecond."""

    def put_slots(self, seq, slots):
        time.sleep(0.001)
        super().put_slots(seq, slots)


def test_a_slow_writer_makes_hooks_wait_instead_of_holding_every_value(tmp_path, monkeypatch):
    monkeypatch.setattr(sink, "MAX_HELD_BYTES", 8 * VALUE_BYTES)
    thread = sink.WriterThread(SlowWriter(tmp_path / "run"))
    held = []
    for seq in range(1, 101):
        blob = bytes([seq]) * VALUE_BYTES
        slot = Slot("output", 0, "out", shape=(VALUE_BYTES,), dtype="uint8", values_dtype="uint8")
        thread.put_slots(seq, [(slot, blob)])
        held.append(thread._backlog())
    thread.close()
    assert max(held) <= 9 * VALUE_BYTES  # the cap, and the one value that crossed it
    with RunReader(tmp_path / "run") as run:
        for seq in range(1, 101):
            values = run.values(seq, run.slots(seq, "output")[0])
            assert values.tobytes() == bytes([seq]) * VALUE_BYTES
