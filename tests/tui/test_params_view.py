"""The parameters view (`w`): every parameter across the optimizer steps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import tensor_slot
from pilot import opened, press
from screen_text import screen_text

from tvis_tui.screens.params_view import ParamsScreen
from tvis_tui.store import CallRecord, RunWriter, StepRecord
from tvis_tui.widgets.row_table import RowTable

G, D = ["G.fc.weight", "G.fc.bias"], ["D.fc.weight"]


def _optimizer_call(w: RunWriter, seq: int, step: int, name: str, grads: dict[str, np.ndarray],
                    no_grad: list[str] = (), unlisted: dict | None = None) -> None:
    extra = {"no_grad": list(no_grad), "no_grad_count": len(no_grad)} if no_grad else {}
    extra.update({"unlisted": unlisted} if unlisted is not None else {})
    extra["lrs"] = [0.1 / step] if name == "Adam" else [0.5, 0.05]  # a scheduler; two groups
    if step > 1 and name == "Adam":  # nothing zeroed G's gradients; D's loss weight is in no optimizer
        extra.update(not_zeroed=G, not_zeroed_count=2, not_stepped=["D.scale"], not_stepped_count=1)
    w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=step, phase="optimizer", kind="optimizer",
                          name=name, type=name, start_ns=seq * 1000, duration_ns=500, extra=extra))
    slots = []
    for i, (path, grad) in enumerate(grads.items()):
        slots.append(tensor_slot("param_grad", i, path, grad, keep=False))
        update, _ = tensor_slot("update", i, path, grad * -0.1, keep=False)
        slots.append((dataclasses.replace(update, ratio=0.01 * step), None))
        slots.append(tensor_slot("param", i, path, np.full(4, float(step), np.float32), keep=False))
    w.put_slots(seq, slots)


def write_gan_run(path):
    """Three steps; step 2 steps G and D, step 3's G gradient holds a NaN; D.head never
    gets a gradient."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        seq = 0
        for step in (1, 2, 3):
            grad = np.full(4, 0.5 * step, np.float32)  # norm = step: a gradient that grows
            if step == 3:
                grad[0] = np.nan
            seq += 1
            _optimizer_call(w, seq, step, "Adam", {G[0]: grad, G[1]: np.ones(4, np.float32)})
            if step == 2:
                seq += 1
                _optimizer_call(w, seq, step, "SGD", {D[0]: np.full(4, 2.0, np.float32)}, no_grad=["D.head.weight"])
            w.put_step(StepRecord(step=step, first_seq=seq, last_seq=seq, loss=1.0, phase_ns={}))
        w.close(status="ok", steps_recorded=3)
    return path


def _rows(text: str) -> dict[str, list[str]]:
    return {line.split()[1]: line.strip("│ ").split()[1:] for line in text.splitlines()
            if line.startswith("│ ") and line.split()[1].count(".") == 2}


async def test_each_parameter_reads_across_the_steps_and_m_cycles_the_measure(tmp_path):
    async with opened(write_gan_run(tmp_path / "run"), 1, size=(120, 30)) as pilot:
        await press(pilot, "w")
        assert isinstance(pilot.app.screen, ParamsScreen)
        text = screen_text(pilot.app)
        assert "parameters × optimizer steps  gradient norm  (m: update / weight" in text
        assert "1 parameter got gradients that no optimizer steps (they never train): D.scale" in text
        assert "gradients not zeroed before step 2, 3 (yellow): each step applies the earlier" in text
        table = pilot.app.screen.query_one(RowTable)
        weight = next(table.get_row_at(r) for r in range(table.row_count) if table.get_row_at(r)[0].plain == G[0])
        assert [any(span.style == "yellow" for span in cell.spans) for cell in weight[2:]] == [False, True, True]
        table = pilot.app.screen.query_one(RowTable)
        assert [c.label.plain for c in table.ordered_columns] == ["parameter", "trend", "step 1", "step 2", "step 3"]
        assert table.ordered_columns[2].label.style == "bold reverse"  # opened from a call of step 1
        rows = _rows(text)
        total = next(line for line in text.splitlines() if line.startswith("│ all parameters"))
        assert total.split()[4:6] == ["2.236", "4.899"] and "NaN/Inf grad" in total  # sqrt(1+4), sqrt(4+4+16)
        lrs = [line.strip("│ ").split("  ") for line in text.splitlines() if line.startswith("│ lr ")]
        assert [[cell.strip() for cell in row if cell.strip()] for row in lrs] == [
            ["lr Adam", "█▄▃", "0.1", "0.05", "0.03333"], ["lr SGD group 0", "█", "0.5"],
            ["lr SGD group 1", "█", "0.05"]]
        assert rows["G.fc.weight"][1:3] == ["1", "2"] and " ".join(rows["G.fc.weight"][3:]) == "NaN/Inf grad"
        assert rows["G.fc.bias"][1:] == ["2", "2", "2"]
        # D is stepped only in step 2; the parameter that got no gradient says so.
        assert rows["D.fc.weight"][1:] == ["4"] and " ".join(rows["D.head.weight"]) == "no grad"
        await press(pilot, "m")
        text = screen_text(pilot.app)
        assert "update / weight (‖Δ‖ / ‖w‖)  (m: weight norm" in text
        assert _rows(text)["G.fc.bias"][1:] == ["0.01", "0.02", "0.03"]
        await press(pilot, "m")
        assert _rows(screen_text(pilot.app))["G.fc.bias"][1:] == ["2", "4", "6"]  # the weight norm
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, ParamsScreen) and "call 1 of 4" in screen_text(pilot.app)


async def test_a_run_without_parameter_slots_says_so(healthy_run):
    async with opened(healthy_run, 10, size=(80, 24)) as pilot:
        await press(pilot, "w")
        assert "no optimizer step recorded a parameter" in screen_text(pilot.app)


async def test_the_step_view_names_the_steps_learning_rates(tmp_path):
    async with opened(write_gan_run(tmp_path / "run"), 2, size=(100, 30)) as pilot:
        await press(pilot, "p")
        assert "step 2  loss 1  lr 0.05, 0.5" in screen_text(pilot.app)


@pytest.mark.parametrize("trains, labels", [
    ((None, None), ("lr Adam line 19", "lr Adam line 24")),  # runs before Dec 2026
    (("Critic", "Generator"), ("lr Adam Critic", "lr Adam Generator")),
    (("Net", "Net"), ("lr Adam line 19", "lr Adam line 24")),  # the same model: by line still
])
def test_two_optimizers_of_one_type_have_a_learning_rate_row_each(tmp_path, trains, labels):
    # A WGAN's critic (3 steps) and generator (1), both Adam, at 4e-4 and 1e-4: one "lr Adam"
    # row alternating between them read as a scheduler (review); named by what each
    # trains where the recorder says, not by a line number the reader must look up.
    from tvis_tui.store import RunReader, Site
    from tvis_tui.store.parameters import parameter_history

    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step, (line, lr, model) in enumerate([(19, 4e-4, trains[0]), (19, 4e-4, trains[0]),
                                                  (24, 1e-4, trains[1])], start=1):
            w.put_call(CallRecord(seq=step, parent=0, depth=0, step=step, phase="optimizer", kind="optimizer",
                                  name="Adam", type="Adam", call_site=Site("train.py", line), start_ns=step,
                                  duration_ns=5, extra={"lrs": [lr], **({"trains": model} if model else {})}))
            w.put_step(StepRecord(step=step, first_seq=step, last_seq=step, loss=1.0))
        w.close(status="ok", steps_recorded=3)
    history = parameter_history(RunReader(tmp_path / "run"))
    assert history.lrs == {labels[0]: {1: 4e-4, 2: 4e-4}, labels[1]: {3: 1e-4}}


def test_a_group_added_mid_run_leaves_group_0_one_row(tmp_path):
    # Sweep R: after `add_param_group` (unfreezing a backbone) group 0's lr read as two
    # rows, "lr SGD" for the steps before and "lr SGD group 0" after.
    from tvis_tui.store import RunReader
    from tvis_tui.store.parameters import parameter_history

    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step, lrs in enumerate([[0.1], [0.1], [0.1, 0.01]], start=1):
            w.put_call(CallRecord(seq=step, parent=0, depth=0, step=step, phase="optimizer", kind="optimizer",
                                  name="SGD", type="SGD", start_ns=step, duration_ns=5, extra={"lrs": lrs}))
            w.put_step(StepRecord(step=step, first_seq=step, last_seq=step, loss=1.0))
        w.close(status="ok", steps_recorded=3)
    history = parameter_history(RunReader(tmp_path / "run"))
    assert history.lrs == {"lr SGD group 0": {1: 0.1, 2: 0.1, 3: 0.1}, "lr SGD group 1": {3: 0.01}}


def test_all_parameters_count_a_weight_the_step_did_not_move():
    # A frozen-by-lr or converged weight updated by exactly 0 still weighs in (review: "–").
    from tvis_tui.store.parameters import ParamHistory, ParamPoint, totals

    history = ParamHistory(steps=[1], names=["a", "b"], points={
        "a": {1: ParamPoint(grad_norm=0.0, ratio=0.0, update_norm=0.0, weight_norm=3.0)},
        "b": {1: ParamPoint(grad_norm=2.0, ratio=0.25, update_norm=1.0, weight_norm=4.1)}})
    total = totals(history)[1]
    assert total.ratio == 1.0 / 5.0 and total.grad_norm == 2.0  # ‖(0, 1)‖ / ‖(3, 4)‖


async def test_a_long_run_shows_the_steps_around_the_one_it_was_opened_from(tmp_path):
    # 300 step columns took a second to lay out on each `m`: the columns are a window,
    # the trend column covers every step.
    async with opened(_long_run(tmp_path / "run", 80), 60, size=(120, 30)) as pilot:
        await press(pilot, "w")
        assert "steps 31-80 of 80" in screen_text(pilot.app)
        columns = [c.label.plain for c in pilot.app.screen.query_one(RowTable).ordered_columns]
        assert columns[2:] == [f"step {n}" for n in range(31, 81)]


def _long_run(path, steps: int):
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in range(1, steps + 1):
            _optimizer_call(w, step, step, "SGD", {G[0]: np.full(4, 0.5, np.float32)})
            w.put_step(StepRecord(step=step, first_seq=step, last_seq=step, loss=1.0, phase_ns={}))
        w.close(status="ok", steps_recorded=steps)
    return path


async def test_the_parameter_names_stay_in_view_as_the_steps_scroll(tmp_path):
    async with opened(_long_run(tmp_path / "run", 20), 1, size=(80, 24)) as pilot:
        await press(pilot, "w", "right", "right")
        lines = screen_text(pilot.app).splitlines()
        header = next(line for line in lines if line.startswith("│ parameter"))
        assert "‹step 3" in header and "step 1 " not in header  # scrolled past steps 1 and 2
        assert any(line.startswith("│ G.fc.weight") and "1  " in line for line in lines)


async def test_brackets_move_the_steps_shown_and_the_selected_parameter_stays(tmp_path):
    async with opened(_long_run(tmp_path / "run", 130), 60, size=(120, 30)) as pilot:
        await press(pilot, "w", "down", "down")
        table = pilot.app.screen.query_one(RowTable)
        assert "steps 35-84 of 130" in screen_text(pilot.app) and table.cursor_row == 2
        await press(pilot, "right_square_bracket")
        assert "steps 81-130 of 130" in screen_text(pilot.app)  # the last ones, not past them
        columns = [c.label.plain for c in table.ordered_columns]
        assert columns[-1] == "step 130" and table.cursor_row == 2
        await press(pilot, "right_square_bracket", "left_square_bracket", "left_square_bracket")
        assert "steps 1-50 of 130" in screen_text(pilot.app)
        await press(pilot, "m")
        assert table.cursor_row == 2


async def test_parameters_past_the_64_listed_count_together(tmp_path):
    """An optimizer lists its first 64 parameters; the "all parameters" row counted only
    them, and nothing said the rest were missing (sweep R)."""
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2):
            _optimizer_call(w, step, step, "Adam", {G[0]: np.full(4, 1.5, np.float32)},  # norm 3
                            unlisted={"count": 16, "grad_norm": 4.0 * step, "grad_nonfinite": 0,
                                      "weight_norm": 10.0})
            w.put_step(StepRecord(step=step, first_seq=step, last_seq=step, loss=1.0, phase_ns={}))
        w.close(status="ok", steps_recorded=2)
    async with opened(tmp_path / "run", 1, size=(120, 30)) as pilot:
        await press(pilot, "w")
        lines = screen_text(pilot.app).splitlines()
        total = next(line for line in lines if line.startswith("│ all parameters"))
        assert total.split()[4:6] == ["5", "8.544"]  # sqrt(9 + 16), sqrt(9 + 64)
        rest = next(line for line in lines if line.startswith("│ 16 more parameters, together"))
        assert rest.split()[6:8] == ["4", "8"]
        await press(pilot, "m")  # the ratio needs each one's update: not over the listed only
        total = next(line for line in screen_text(pilot.app).splitlines() if line.startswith("│ all parameters"))
        assert total.split()[-3:] == ["–", "–", "│"]


async def test_long_parameter_names_leave_room_for_the_figures(tmp_path):
    """A BERT's names filled an 80-column pane: the step columns, too wide for what was
    left and never shown cut, were all blank (review)."""
    name = "bert.encoder.layer.11.attention.self.query.weight"
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2):
            _optimizer_call(w, step, step, "Adam", {name: np.full(4, 1.5, np.float32)})
            w.put_step(StepRecord(step=step, first_seq=step, last_seq=step, loss=1.0, phase_ns={}))
        w.close(status="ok", steps_recorded=2)
    async with opened(tmp_path / "run", 1, size=(80, 24)) as pilot:
        await press(pilot, "w")
        row = next(line for line in screen_text(pilot.app).splitlines() if "query.weight" in line)
        assert "…layer.11.attention.self.query.weight" in row and row.split()[3] == "3"
