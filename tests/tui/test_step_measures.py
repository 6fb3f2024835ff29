"""The step view's measures: a step's time by phase and its peak memory, and the plot that
`m` switches between loss, step time and peak memory."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import CALLS_PER_STEP, write_step
from pilot import opened, press
from screen_text import screen_text

from tvis_tui.store import RunWriter, StepRecord
from tvis_tui.store.samples import put_prediction
from tvis_tui.screens.step_view import y_ticks
from tvis_tui.widgets.step_measures import step_measures

CPU_STEP = StepRecord(
    step=4, first_seq=1, last_seq=9, loss=0.5,
    phase_ns={"data": 3_310_000, "forward": 16_900_000, "loss": 255_000, "backward": 15_100_000,
              "optimizer": 1_490_000, "other": 601_000},
    peak_bytes=5_906_984,
    extra={"wall_ns": 37_626_233, "tvis_overhead_ns": 36_781_662,
           "peak_method": "live tensor storage seen by tvis: params, grads, optimizer state",
           "peak_phase_bytes": {"forward": 5_380_880, "data": 138_000, "backward": 5_906_984}})


def test_time_by_phase_in_the_totals_unit_and_where_memory_peaked():
    lines = step_measures(CPU_STEP).plain.splitlines()
    assert lines == [
        "time 37.6 ms  data 3.31  forward 16.9  loss 0.255  backward 15.1  optimizer 1.49  other 0.601 ms",
        "peak memory 5.6 MiB in backward (data 0.132, forward 5.13 MiB)",
        "tvis's own 36.8 ms left out of the times; peak: live tensor storage seen by tvis"]


def test_a_gpu_step_names_its_clock_and_big_figures_have_no_exponent():
    step = StepRecord(step=1, first_seq=1, last_seq=2, phase_ns={"forward": 1_500_000_000, "backward": 999_700_000},
                      peak_bytes=40 << 30, extra={"wall_ns": 2_600_000_000, "phase_clock": "cuda events",
                                                   "peak_method": "cuda max_memory_allocated: the peak since the start"})
    lines = step_measures(step).plain.splitlines()
    assert lines[0] == "time 2.6 s  forward 1.50  backward 1.00 s (cuda events)"
    assert lines[1] == "peak memory 40.0 GiB"
    assert lines[2] == "peak: cuda max_memory_allocated"
    many = StepRecord(step=1, first_seq=1, last_seq=2, phase_ns={"forward": 999_600_000}, peak_bytes=3 << 30,
                      extra={"wall_ns": 999_900_000, "peak_phase_bytes": {"forward": 3 << 30, "data": 1234 << 20}})
    lines = step_measures(many).plain.splitlines()
    assert lines[0] == "time 1 s  forward 1.00 s"  # 999.9 ms: not "1e+03 ms"
    assert lines[1] == "peak memory 3.0 GiB in forward (data 1.21 GiB)"
    tiny = StepRecord(step=1, first_seq=1, last_seq=2, peak_bytes=1331,
                      extra={"peak_phase_bytes": {"backward": 1331, "forward": 664, "loss": 789}})
    assert step_measures(tiny).plain.splitlines()[1] == \
        "peak memory 1.3 KiB in backward (forward 0.648, loss 0.771 KiB)"  # not 0.000648 MiB


def test_phases_too_small_for_the_totals_unit_are_each_in_their_own():
    """A 3 s step read `forward 0.000117  backward 0.000322  optimizer 9.83e-05  other 3.00 s`
    (sweep Q)."""
    slow = StepRecord(step=1, first_seq=1, last_seq=2, peak_bytes=3 << 30,
                      phase_ns={"forward": 117_000, "backward": 322_000, "optimizer": 98_300,
                                "other": 3_000_000_000},
                      extra={"wall_ns": 3_000_537_300,
                             "peak_phase_bytes": {"forward": 3 << 30, "data": 2048}})
    lines = step_measures(slow).plain.splitlines()
    assert lines[0] == "time 3 s  forward 117 µs  backward 322 µs  optimizer 98.3 µs  other 3 s"
    assert lines[1] == "peak memory 3.0 GiB in forward (data 2.0 KiB)"


def test_an_unmeasured_step_says_so():
    lines = step_measures(StepRecord(step=1, first_seq=1, last_seq=1)).plain.splitlines()
    assert lines[:2] == ["time not measured", "peak memory not measured"]


async def test_step_view_shows_the_measures_and_m_switches_the_plot(healthy_run):
    async with opened(healthy_run, 10, size=(120, 40)) as pilot:  # a call of step 1
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "time 25.5 µs  data 1.00  forward 9.00  loss 0.800  backward 12.0  optimizer 0.700 µs" in text
        assert "peak memory 3.0 MiB in backward (data 0.500, forward 2.00 MiB)" in text
        assert "tvis's own 41 µs left out of the times; peak: live tensor storage seen by tvis" in text
        assert "loss per step  (m: time)" in text
        await press(pilot, "m")
        text = screen_text(pilot.app)
        # In the unit the largest reads in: 0.0275 ms was the top tick (sweep Q).
        assert "step time per step (µs, tvis's own time left out)  (m: memory)" in text
        assert "27.5┤" in text and "   0┤" in text  # steps 1 to 3: 25.5, 26.5, 27.5 µs, from 0
        await press(pilot, "m")
        assert "peak memory per step (MiB)  (m: loss)" in screen_text(pilot.app)
        await press(pilot, "right_square_bracket")  # the plot keeps its measure from step to step
        assert "peak memory per step (MiB)" in screen_text(pilot.app)
        await press(pilot, "m")
        assert "loss per step" in screen_text(pilot.app)



async def test_the_plots_leave_out_an_unfinished_last_step(tmp_path):
    # The loop's last draw, which found the data exhausted, is an unfinished step of one
    # call: its time is no step time.
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2, 3):
            write_step(w, step, np.random.default_rng(0))
        w.put_step(StepRecord(step=3, first_seq=2 * CALLS_PER_STEP + 1, last_seq=2 * CALLS_PER_STEP + 1,
                              loss=None, rule="optimizer", phase_ns={"data": 1100}, peak_bytes=1 << 10,
                              complete=False, extra={"wall_ns": 1100}))
        w.close(status="ok", steps_recorded=2)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        await press(pilot, "m")
        lines = screen_text(pilot.app).splitlines()
        axis = next(i for i, line in enumerate(lines) if "└┬" in line)
        assert lines[axis + 1].strip("│ ").split() == ["1", "2"]  # no step 3 on the x axis
        assert any("26.5┤" in line for line in lines)


async def test_memory_and_time_are_plotted_from_zero(tmp_path):
    # 5.63 to 5.71 MiB on an axis fitted to them read as a cliff (sweep M).
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step, peak in zip((1, 2, 3), (5.633, 5.709, 5.65)):
            write_step(w, step, np.random.default_rng(0))
            base = (step - 1) * CALLS_PER_STEP
            w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP, loss=1.0,
                                  peak_bytes=int(peak * 2**20)))
        w.close(status="ok", steps_recorded=3)
    async with opened(tmp_path / "run", 2, size=(100, 30)) as pilot:
        await press(pilot, "p", "m", "m")
        text = screen_text(pilot.app)
        assert "peak memory per step (MiB)" in text
        assert "5.71┤" in text and "   0┤" in text and "5.63┤" not in text


async def test_a_run_without_a_loss_says_none_was_recorded_and_small_peaks_plot_in_bytes(tmp_path):
    """It said "no finite loss recorded", which reads as NaN losses; a peak of 308 B was
    plotted as 0.000294 MiB (sweep Q)."""
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step, peak in zip((1, 2), (308, 200)):
            write_step(w, step, np.random.default_rng(0))
            base = (step - 1) * CALLS_PER_STEP
            w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP,
                                  peak_bytes=peak))
        w.close(status="ok", steps_recorded=2)
    async with opened(tmp_path / "run", 2, size=(100, 30)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "no loss recorded" in text and "finite" not in text
        await press(pilot, "m", "m")
        text = screen_text(pilot.app)
        assert "peak memory per step (B)" in text and "308┤" in text


async def test_a_diverging_loss_is_plotted_on_a_log_axis_with_short_labels(tmp_path):
    # 831 then 1.75e16: on a linear axis with plotext's labels, the first steps sat on a
    # row labelled 2921499031765685.0 (sweep M).
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step, loss in zip((1, 2, 3, 4), (831.3, 4.1e9, 1.75e16, 3.3e12)):
            write_step(w, step, np.random.default_rng(0))
            base = (step - 1) * CALLS_PER_STEP
            w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP, loss=loss))
        w.close(status="ok", steps_recorded=4)
    async with opened(tmp_path / "run", 2, size=(80, 24)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "1.75e+16┤" in text and "831┤" in text
        assert "3.81e+09┤" in text  # the middle tick, in log10: no linear axis has it
        assert "2921499031765685" not in text and "17500000000000000" not in text


def test_tick_labels_of_large_values_close_together_tell_the_ticks_apart():
    # Peak memory in MiB on a 141 GB card: 3 digits read 1.21e+05 twice.
    values, labels = y_ticks(120_500, 121_300, log=False)
    assert labels == ["1.205e+05", "1.209e+05", "1.213e+05"] and len(values) == 3
    assert y_ticks(831.3, 1.75e16, log=True)[1] == ["831", "3.81e+09", "1.75e+16"]


async def test_layers_trained_in_eval_mode_are_named_in_the_title(tmp_path):
    # model.eval() for a validation, and no model.train() after it (sweep N).
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=CALLS_PER_STEP, loss=1.9,
                              extra={"eval_while_training": ["conv1", "relu"]}))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(80, 24)) as pilot:
        await press(pilot, "p")
        assert "step 1  loss 1.9  2 layers in eval mode while training (conv1, …)" in screen_text(pilot.app)


def _run_at_chance(path, loss: str, kind: str, classes: int, reduction: str = "mean"):
    """Three steps whose loss sits at ln 4, predictions from `loss` over `classes` classes."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2, 3):
            write_step(w, step, np.random.default_rng(0))
            base = (step - 1) * CALLS_PER_STEP
            w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP,
                                  loss=1.3863 + 0.002 * step,
                                  extra={"per_sample_loss": {"seq": base + 12, "count": 2, "reduction": reduction,
                                                             "trains": True}}))
            put_prediction(w, {"kind": kind, "step": step, "loss": loss, "loss_seq": base + 12,
                               "classes": classes, "rows": 2, "samples": []})
        w.close(status="ok", steps_recorded=3)
    return path


async def test_a_class_loss_plot_draws_the_chance_level_the_loss_sits_on(tmp_path):
    # Inputs and labels from two shuffled loaders: the loss stays at ln 4 and nothing said
    # that this is the loss of a model that learned nothing (sweep O).
    async with opened(_run_at_chance(tmp_path / "run", "CrossEntropyLoss", "classes", 4), 2, (120, 40)) as pilot:
        await press(pilot, "p")
        lines = screen_text(pilot.app).splitlines()
        assert any("loss per step, yellow: chance level 1.386 (ln 4: every class alike)  (m: time)" in line
                   for line in lines)
        chance_rows = [line for line in lines if "├" in line and "┤" in line and "──────────" in line]
        assert len(chance_rows) == 1  # the line across the plot
        await press(pilot, "m")
        assert "chance" not in screen_text(pilot.app)  # a time has no chance level


@pytest.mark.parametrize("loss, kind, classes, reduction", [
    ("CrossEntropyLoss", "classes", 4, "sum"),  # a sum over the batch is no mean to compare with
    ("MyLoss", "classes", 4, "mean"),  # a loss of the script's own: nothing known of it
])
async def test_no_chance_level_where_the_loss_does_not_compare(tmp_path, loss, kind, classes, reduction):
    async with opened(_run_at_chance(tmp_path / "run", loss, kind, classes, reduction), 2, (120, 40)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "loss per step  (m: time)" in text and "chance" not in text


async def test_the_measures_wrap_whole_in_80_columns(tmp_path):
    """Sweep S: at 80x24 the measures' lines wrapped past their 4 rows, and the last one,
    what the peak counts, was cut."""
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        w.put_step(StepRecord(**{**CPU_STEP.to_wire(), "step": 1, "first_seq": 1, "last_seq": CALLS_PER_STEP,
                                 "phase_ns": CPU_STEP.phase_ns}))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 1, size=(80, 24)) as pilot:
        await press(pilot, "p")
        lines = screen_text(pilot.app).splitlines()
        at = next(i for i, line in enumerate(lines) if "peak: live tensor storage seen by" in line)
        assert lines[at + 1].split() == ["tvis"]  # its wrapped end, then the plot
        assert "loss per step" in lines[at + 2]


async def test_a_gan_step_shows_each_optimizers_loss_and_plots_one_line_each(tmp_path):
    # D's loss plus G's is no loss: the status line, the call tree and the step view give
    # each, and the plot draws each through the steps it took (a critic-only step too).
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2, 3):
            write_step(w, step, np.random.default_rng(0))
            base = (step - 1) * CALLS_PER_STEP
            apart = [{"optimizer": "Adam", "model": "Discriminator.main", "seq": base + 14, "loss": 1.3 - 0.1 * step}]
            if step != 2:
                apart.append({"optimizer": "Adam", "model": "Generator.main", "seq": base + 15, "loss": 0.6 * step})
            w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP,
                                  loss=apart[0]["loss"], extra={"optimizer_losses": apart}))
        w.close(status="ok", steps_recorded=3)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        text = screen_text(pilot.app)
        assert "step 1 (loss Discriminator 1.2, Generator 0.6)" in text  # the status line
        assert "step 3  loss 1, 1.8" in text  # the call tree, in the order they stepped
        assert "step 2  loss 1.1" in text  # only D stepped: one loss, its own
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "step 1  loss Discriminator 1.2, Generator 0.6" in text
        assert "Discriminator" in text.split("loss per step")[1] and "Generator" in text.split("loss per step")[1]
