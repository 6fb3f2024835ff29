"""A user function that runs a whole training step: each of its calls is listed once, in
the phase it ran in."""

from __future__ import annotations

import pytest

from tvis_tui.screens.stepping import Stepper
from tvis_tui.store import CallRecord, RunReader, RunWriter
from tvis_tui.widgets.call_rows import CallRows

# seq, parent, phase, name: train_step() calls the model, the loss, backward and step
CALLS = [(1, 0, "forward", "train_step"), (2, 1, "forward", "model"), (3, 2, "forward", "model.fc"),
         (4, 1, "loss", "criterion"), (5, 1, "backward", "backward"), (6, 1, "optimizer", "optimizer.step")]


@pytest.fixture()
def step_in_function(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        for seq, parent, phase, name in CALLS:
            depth = 0 if parent == 0 else 1 if parent == 1 else 2
            w.put_call(CallRecord(seq=seq, parent=parent, depth=depth, step=1, phase=phase,
                                  kind="function" if seq == 1 else "module", name=name))
    reader = RunReader(tmp_path / "run")
    yield reader
    reader.close()


def _expand_all(rows: CallRows) -> None:
    while True:
        closed = [i for i, r in enumerate(rows.rows) if r.expandable and not r.expanded]
        if not closed:
            return
        rows.expand(closed[0])


def _listing(rows: CallRows) -> list[tuple[int, str]]:
    """(depth, phase or call name) per row."""
    return [(r.depth, r.span.phase if r.key[0] == "phase" else r.call.name)
            for r in rows.rows if r.key[0] != "step"]


def test_each_call_is_listed_once_under_the_phase_it_ran_in(step_in_function):
    rows = CallRows(Stepper(step_in_function))
    _expand_all(rows)
    assert _listing(rows) == [
        (1, "forward"), (2, "train_step"), (3, "model"), (4, "model.fc"),
        (1, "loss"), (2, "criterion"),
        (1, "backward"), (2, "backward"),
        (1, "optimizer"), (2, "optimizer.step"),
    ]


@pytest.mark.parametrize("seq", [3, 4, 5, 6])
def test_reveal_finds_a_call_in_its_own_phase(step_in_function, seq):
    rows = CallRows(Stepper(step_in_function))
    at = rows.reveal(seq)
    assert at is not None and rows.rows[at].key == ("call", seq)
    phase = next(r for r in reversed(rows.rows[:at]) if r.key[0] == "phase")
    assert phase.span.phase == dict((s, p) for s, _, p, _ in CALLS)[seq]
