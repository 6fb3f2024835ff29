"""An evaluation after the optimizer step (autograd off) is its own phase: listed, timed and
reached with `6` apart from the training forward."""

from __future__ import annotations

import pytest
from pilot import opened, press
from screen_text import screen_text

from tvis_tui.store import CallRecord, RunWriter, StepRecord
from tvis_tui.widgets.step_measures import step_measures

# seq, parent, phase, name
CALLS = [(1, 0, "forward", "model"), (2, 0, "loss", "criterion"), (3, 0, "backward", "backward"),
         (4, 0, "optimizer", "optimizer.step"), (5, 0, "no_grad", "evaluate"), (6, 5, "no_grad", "model")]
STEP = StepRecord(step=1, first_seq=1, last_seq=6, loss=0.5,
                  phase_ns={"forward": 2_000_000, "loss": 100_000, "backward": 3_000_000,
                            "optimizer": 400_000, "no_grad": 1_500_000, "other": 100_000},
                  extra={"wall_ns": 7_100_000})


@pytest.fixture()
def evaluated(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", started_at="2026-12-05T10:00:00", status="running")
        for seq, parent, phase, name in CALLS:
            w.put_call(CallRecord(seq=seq, parent=parent, depth=0 if parent == 0 else 1, step=1, phase=phase,
                                  kind="function" if name == "evaluate" else "module", name=name,
                                  duration_ns=1000))
        w.put_step(STEP)
        w.close(status="ok", steps_recorded=1)
    return tmp_path / "run"


def test_the_time_line_shows_the_no_grad_phase_apart_from_forward():
    assert step_measures(STEP).plain.splitlines()[0] == (
        "time 7.1 ms  forward 2.00  loss 0.100  backward 3.00  optimizer 0.400  no_grad 1.50  other 0.100 ms")


async def test_six_jumps_to_the_evaluation(evaluated):
    async with opened(evaluated, 1) as pilot:
        await press(pilot, "6")
        assert pilot.app.screen.seq == 5
        text = screen_text(pilot.app)
        assert "call 5 of 6" in text and "no_grad" in text
        await press(pilot, "2")
        assert pilot.app.screen.seq == 1

