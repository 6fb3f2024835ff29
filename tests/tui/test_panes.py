"""The panes follow the current call, and each pane's own keys do what they say."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from conftest import CALLS_PER_STEP, MODEL, MODEL_SRC, TRAIN, _meta, line_of, tensor_slot, write_step
from pilot import opened, press, settle, until
from screen_text import screen_text

from tvis_tui.screens.debugger import DebuggerScreen
from tvis_tui.screens.exception import ExceptionScreen
from tvis_tui.screens.help import HelpScreen, key_sections
from tvis_tui.screens.run_picker import RunPickerScreen
from tvis_tui.screens.step_view import StepScreen
from tvis_tui.screens.values import ValuesScreen
from tvis_tui.store import CallRecord, RunWriter, Slot, StepRecord, TensorStats
from tvis_tui.widgets.call_tree import CallTree
from tvis_tui.widgets.inspector import COLUMNS, Inspector, slot_cells
from tvis_tui.widgets.source_pane import SourcePane
from tvis_tui.widgets.values_grid import ValuesGrid


async def test_every_pane_shows_the_current_call(healthy_run):
    async with opened(healthy_run, 10) as pilot:
        text = screen_text(pilot.app)
        tree = pilot.app.screen.query_one(CallTree)
        assert tree.rows[tree.cursor].key == ("call", 10)
        assert f"model.py:{line_of(MODEL, 'self.head(x)')}" in text
        assert "return self.head(x)" in text
        assert "[4, 512]" in text and "[4, 10]" in text  # inspector: input and output shapes
        assert "step 1" in text and "forward" in text and "call 10 of 39" in text


async def test_nan_output_is_flagged_in_tree_inspector_and_status(healthy_run):
    async with opened(healthy_run, 36) as pilot:
        text = screen_text(pilot.app)
        assert "head Linear NaN/Inf" in text
        assert "NaN/Inf in output" in text
        assert "14/0" in text  # 40 values, every third one NaN


async def test_source_pane_shows_shapes_beside_the_lines_that_made_them(healthy_run):
    async with opened(healthy_run, 3) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        # The last module called on the line: self.relu(self.conv1(images)).
        assert pane.shapes[line_of(MODEL, "self.conv1(images)")] == "relu → [4, 8, 8, 8]"
        assert pane.shapes[line_of(MODEL, "self.head(x)")] == "head → [4, 10]"
        assert "# head → [4, 10]" in screen_text(pilot.app)


async def test_call_without_source_snapshot_says_so(healthy_run):
    async with opened(healthy_run, 6) as pilot:
        text = screen_text(pilot.app)
        assert "source not recorded" in text and "/torch/nn/modules/container.py:250" in text


async def test_tree_cursor_moves_every_pane(healthy_run):
    async with opened(healthy_run, 2) as pilot:
        await press(pilot, "down")
        assert pilot.app.screen.seq == 3
        await press(pilot, "j", "j")
        assert pilot.app.screen.seq == 5
        assert "call 5 of 39" in screen_text(pilot.app)
        await press(pilot, "k", "up")
        assert pilot.app.screen.seq == 3


async def test_tree_expands_and_collapses_lazily(healthy_run):
    async with opened(healthy_run, 5) as pilot:
        tree = pilot.app.screen.query_one(CallTree)
        assert ("call", 6) in [r.key for r in tree.rows] and ("call", 7) not in [r.key for r in tree.rows]
        await press(pilot, "j", "right")  # cursor on blocks.0
        assert ("call", 7) in [r.key for r in tree.rows]
        await press(pilot, "left")
        assert ("call", 7) not in [r.key for r in tree.rows]
        await press(pilot, "l", "enter")
        assert ("call", 7) not in [r.key for r in tree.rows]
        await press(pilot, "space")
        assert ("call", 7) in [r.key for r in tree.rows]
        await press(pilot, "h", "h")  # on a collapsed leaf's parent row: go up to `blocks`
        assert pilot.app.screen.seq == 5


async def test_tree_paging_keys(healthy_run):
    async with opened(healthy_run, 1, size=(80, 24)) as pilot:
        await press(pilot, "end")
        tree = pilot.app.screen.query_one(CallTree)
        assert tree.cursor == len(tree.rows) - 1
        await press(pilot, "home")
        assert tree.cursor == 0
        await press(pilot, "pagedown")
        assert tree.cursor > 5
        await press(pilot, "pageup")
        assert tree.cursor == 0


async def test_source_cursor_then_run_to_line(healthy_run):
    async with opened(healthy_run, 2) as pilot:
        pilot.app.screen.query_one(SourcePane).focus()
        await press(pilot, "down")  # model(images) line -> criterion line
        pane = pilot.app.screen.query_one(SourcePane)
        assert pane.cursor_line == pane.line + 1
        await press(pilot, "t")
        assert pilot.app.screen.seq == 11  # criterion, called from the cursor's line
        await press(pilot, "j", "k", "up", "pagedown", "pageup")
        assert pane.cursor_line == 1


async def test_help_lists_every_key_and_closes(healthy_run):
    async with opened(healthy_run, 1, size=(120, 60)) as pilot:
        await press(pilot, "question_mark")
        assert isinstance(pilot.app.screen, HelpScreen)
        text = screen_text(pilot.app)
        assert "Step into: the next call" in text and "Shift+F11" in text
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, HelpScreen)
        await press(pilot, "f1")
        assert isinstance(pilot.app.screen, HelpScreen)


async def test_values_view_pages_and_slices(healthy_run):
    async with opened(healthy_run, 3) as pilot:  # conv1: output [4, 8, 8, 8] stored
        pilot.app.screen.query_one("#inspector").focus()
        await press(pilot, "down", "enter")
        assert isinstance(pilot.app.screen, ValuesScreen)
        assert "[0, 0, :, :]" in screen_text(pilot.app)
        await press(pilot, "plus")
        assert "[1, 0, :, :]" in screen_text(pilot.app)
        await press(pilot, "minus", "minus")
        assert "[3, 0, :, :]" in screen_text(pilot.app)
        await press(pilot, "i", *["backspace"] * 20, *"2, :, 3", "enter")
        assert "[2, :, 3, :]" in screen_text(pilot.app) and "→ [8, 8]" in screen_text(pilot.app)
        await press(pilot, "colon", *["backspace"] * 20, *"1", "enter")
        assert "slices show 2 dimensions" not in screen_text(pilot.app)
        assert "[2, :, 3, :]" in screen_text(pilot.app)  # a 3-D slice is refused
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, ValuesScreen)
        await press(pilot, "v")
        assert isinstance(pilot.app.screen, ValuesScreen)
        await press(pilot, "q")
        assert pilot.app.screen.seq == 3


async def test_values_view_writes_a_single_value_out_exactly(healthy_run):
    async with opened(healthy_run, 3) as pilot:  # conv1: output [4, 8, 8, 8] stored
        pilot.app.screen.query_one("#inspector").focus()
        await press(pilot, "down", "enter", "i", *["backspace"] * 20, *"1, 2, 3, 4", "enter")
        screen = pilot.app.screen
        exact = screen.array[1, 2, 3, 4]
        assert f"[1, 2, 3, 4] → [] = {exact}" in screen_text(pilot.app)
        assert len(str(exact)) > len(f"{exact:.4g}")  # more than the grid's 4 digits
        await press(pilot, "i", *["backspace"] * 20, *"1, 2, 3, :", "enter")
        assert " = " not in screen_text(pilot.app).splitlines()[0]


async def test_values_view_says_an_empty_slice_holds_no_values(healthy_run):
    # It showed the column labels alone (sweep Q).
    async with opened(healthy_run, 3) as pilot:
        pilot.app.screen.query_one("#inspector").focus()
        await press(pilot, "down", "enter", "i", *["backspace"] * 20, *"1, 2, 3:1, :", "enter")
        assert "[1, 2, 3:1, :] → [0, 8] holds no values" in screen_text(pilot.app)


async def test_slot_without_values_does_not_open_a_view(healthy_run):
    async with opened(healthy_run, 12) as pilot:  # backward: param grad, values not kept
        pilot.app.screen.query_one("#inspector").focus()
        await press(pilot, "down", "enter")
        assert not isinstance(pilot.app.screen, ValuesScreen)


async def test_picker_lists_newest_first_and_opens_runs(runs_dir):
    async with opened(runs_dir) as pilot:
        text = screen_text(pilot.app)
        assert text.index("20261202-093000-train") < text.index("20261201-100000-train")
        assert "crashed" in text and "ok" in text
        await press(pilot, "ctrl+r", "down", "enter")
        assert "call 1 of 39" in screen_text(pilot.app)
        await press(pilot, "escape", "up", "enter")
        assert "call 22 of 22" in screen_text(pilot.app)


async def test_q_quits(healthy_run):
    async with opened(healthy_run) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not pilot.app.is_running


async def test_resizes_live_and_keeps_the_current_call_in_view(healthy_run):
    async with opened(healthy_run, 36, size=(80, 24)) as pilot:
        for size in [(200, 60), (80, 24), (100, 30)]:
            await pilot.resize_terminal(*size)
            await press(pilot, "s", "S")
            text = screen_text(pilot.app)
            assert "▶" in text and "call 36 of 39" in text
            assert "return self.he" in text  # cut or not, beside its shape at 80 columns


async def test_no_color_keeps_markers_as_glyphs(healthy_run, monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    async with opened(healthy_run, 10) as pilot:
        assert pilot.app.no_color
        text = screen_text(pilot.app)
        assert "▶        head Linear" in text and "▶24" in text


async def test_values_view_scrolls_across_wide_tensors(healthy_run):
    async with opened(healthy_run, 10, size=(80, 24)) as pilot:  # head: input [4, 512]
        await press(pilot, "v")
        assert isinstance(pilot.app.screen, ValuesScreen)
        header = screen_text(pilot.app).splitlines()[1]
        assert header.split()[0] == "0"
        await press(pilot, *["right"] * 30)
        assert screen_text(pilot.app).splitlines()[1].split()[0] != "0"
        await press(pilot, "home")


async def test_picker_says_why_a_run_is_unreadable_and_moves_like_the_tree(tmp_path, healthy_run):
    shutil.copytree(healthy_run, tmp_path / "good")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "data.mdb").write_bytes(b"garbage" * 1000)
    async with opened(tmp_path) as pilot:
        row = next(line for line in screen_text(pilot.app).splitlines() if " bad " in line)
        assert "unreadable" in row and "MDB_INVALID" in row
        assert row.split()[-1] != "0"  # no step/call counts that would read as an empty run
        table = pilot.app.screen.query_one("#runs")
        await press(pilot, "j")
        assert table.cursor_row == 1
        await press(pilot, "k")
        assert table.cursor_row == 0
        await press(pilot, "end")
        assert table.cursor_row == 1
        await press(pilot, "home")
        assert table.cursor_row == 0


async def test_picker_writes_control_characters_in_run_names_as_escapes(tmp_path, healthy_run):
    shutil.copytree(healthy_run, tmp_path / "exp\n1\x1b[2J[red]")
    async with opened(tmp_path) as pilot:
        text = screen_text(pilot.app)
        assert "exp\\n1\\x1b[2J[red]" in text and "\x1b" not in text
        await press(pilot, "enter")  # the call tree's title and the status line name it too
        assert screen_text(pilot.app).count("exp\\n1\\x1b[2J[red]") == 2


async def test_reload_of_a_run_cut_short_meanwhile_says_so_and_goes_back(tmp_path, healthy_run):
    shutil.copytree(healthy_run, tmp_path / "run")
    async with opened(tmp_path) as pilot:
        await press(pilot, "enter")
        assert "call 1 of 39" in screen_text(pilot.app)
        os.truncate(tmp_path / "run" / "data.mdb", 3 * 4096)
        await press(pilot, "ctrl+r")
        assert pilot.app.is_running
        messages = [n.message for n in pilot.app._notifications]
        assert any(m.startswith("cannot reload: ") and "truncated run" in m for m in messages)
        assert "runs in" in screen_text(pilot.app)  # back at the run list


async def test_crashed_calls_message_stays_on_a_narrow_status_line(crashed_run):
    async with opened(crashed_run, size=(80, 24)) as pilot:
        status = screen_text(pilot.app).splitlines()[-2]
        assert "raised: RuntimeError" in status


async def test_inspector_columns_fit_the_current_call_not_the_widest_seen(healthy_run):
    async with opened(healthy_run, 10) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        widths = [c.get_render_width(inspector) for c in inspector.columns.values()]
        await press(pilot, "o", "S", "g", *"10", "enter")  # via the optimizer step's long names
        assert pilot.app.screen.seq == 10
        assert [c.get_render_width(inspector) for c in inspector.columns.values()] == widths


async def test_the_inspector_keeps_its_sideways_column_as_the_calls_change(healthy_run):
    # Following a gradient's std from step to step: → → then ] must not scroll back.
    async with opened(healthy_run, 3, size=(80, 24)) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        inspector.focus()
        await press(pilot, "right", "right")
        header = inspector.render_line(0).text.split()
        assert header[0] == "name" and header[1].startswith("‹")  # the rows' names stay in view
        await press(pilot, "right_square_bracket")
        assert pilot.app.screen.seq != 3
        assert inspector.render_line(0).text.split()[:2] == header[:2]
        await press(pilot, "left_square_bracket")
        assert inspector.render_line(0).text.split()[:2] == header[:2]


async def test_inspector_moves_with_j_k_and_home_end(healthy_run):
    async with opened(healthy_run, 12) as pilot:  # backward: two parameter gradients
        inspector = pilot.app.screen.query_one(Inspector)
        inspector.focus()
        await press(pilot, "j")
        assert inspector.cursor_row == 1
        await press(pilot, "k")
        assert inspector.cursor_row == 0
        await press(pilot, "end")
        assert inspector.cursor_row == inspector.row_count - 1
        await press(pilot, "home")
        assert inspector.cursor_row == 0


async def test_run_list_is_current_when_coming_back_to_it(tmp_path, healthy_run, crashed_run):
    shutil.copytree(healthy_run, tmp_path / "20261201-100000-train")
    async with opened(tmp_path) as pilot:
        await press(pilot, "enter")
        await until(pilot, lambda: isinstance(pilot.app.screen, DebuggerScreen))
        shutil.copytree(crashed_run, tmp_path / "20261202-093000-train")  # recorded meanwhile
        await press(pilot, "escape")
        await until(pilot, lambda: "20261202-093000-train" in screen_text(pilot.app))
        text = screen_text(pilot.app)
        assert "crashed" in text
        table = pilot.app.screen.query_one("#runs")
        assert pilot.app.screen.runs[table.cursor_row].path.name == "20261201-100000-train"
        # The run just left reads as it is, not "already open in this process".
        left = next(line for line in text.splitlines() if "20261201-100000-train" in line)
        assert " ok " in left and "unreadable" not in text


async def test_a_long_unreadable_reason_leaves_every_runs_counts_on_screen(tmp_path, healthy_run):
    shutil.copytree(healthy_run, tmp_path / "good")
    shutil.copytree(healthy_run, tmp_path / "cut")
    mdb = tmp_path / "cut" / "data.mdb"
    os.truncate(mdb, mdb.stat().st_size // 2)  # "corrupt or truncated run (data.mdb is ...)"
    async with opened(tmp_path, size=(120, 30)) as pilot:
        lines = screen_text(pilot.app).splitlines()
        good = next(line for line in lines if " good " in line)
        assert good.rstrip(" │›").endswith("KiB")  # the size column, the last one, is on screen
        assert "corrupt or truncated run (data.mdb is" in next(line for line in lines if " cut " in line)


def _inspector_lines(pilot) -> list[str]:
    """The inspector's text inside its border, one line per table line."""
    region = pilot.app.screen.query_one(Inspector).region
    lines = screen_text(pilot.app).splitlines()[region.y + 1: region.bottom - 1]
    return [line[region.x + 1: region.right - 1] for line in lines]


async def test_inspector_draws_whole_columns_and_marks_the_rest(healthy_run):
    async with opened(healthy_run, 10, size=(80, 24)) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        inspector.focus()
        full = {str(cell) for slot in inspector.slots for cell in slot_cells(slot)}
        assert "›" in _inspector_lines(pilot)[0]  # more columns to the right than fit
        seen_columns = set()
        for _ in range(len(COLUMNS)):
            header, first_row = _inspector_lines(pilot)[:2]
            seen_columns.update(header.replace("‹", " ").replace("›", " ").split())
            # Every figure on screen is one the table holds, never a cut one (-1.8 of -1.8e-08).
            for token in first_row.replace("‹", " ").replace("›", " ").split():
                if token[-1].isdigit():
                    assert any(token in cell.split() for cell in full), token
            await press(pilot, "right")
        header = _inspector_lines(pilot)[0]
        assert header.split()[0] == "name" and "‹" in header  # scrolled past the columns after the name
        assert {"min", "max", "mean", "std", "device"} <= seen_columns
        await press(pilot, *["left"] * len(COLUMNS))
        assert _inspector_lines(pilot)[0].split()[0] == "name"


async def test_x_shows_a_crashed_runs_whole_exception_and_closes(crashed_run, healthy_run):
    async with opened(crashed_run, size=(160, 30)) as pilot:
        text = screen_text(pilot.app)
        assert "the head expects 256 features" not in text and "x: whole exception" in text
        await press(pilot, "x")
        assert isinstance(pilot.app.screen, ExceptionScreen)
        text = screen_text(pilot.app)
        assert "exception at model.py:24" in text
        assert "logits = model(x)" in text and "the head expects 256 features" in text
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, ExceptionScreen)
    async with opened(healthy_run, 10) as pilot:
        await press(pilot, "x")
        assert not isinstance(pilot.app.screen, ExceptionScreen)
        assert "no exception recorded for this run" in _notices(pilot)


def _notices(pilot) -> list[str]:
    return [n.message for n in pilot.app._notifications]


async def test_x_on_a_caller_of_the_failing_call_shows_the_runs_traceback(tmp_path):
    error = "RuntimeError: boom"
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="/p/train.py", started_at="2026-12-02T09:30:00", status="running", host="h", pid=0)
        for seq in (1, 2):  # a model and the layer inside it that raised: both closed with it
            w.put_call(CallRecord(seq=seq, parent=seq - 1, depth=seq - 1, step=1, phase="forward",
                                  kind="module", name=f"m{seq}", type="Linear", call_site=None, def_site=None,
                                  start_ns=seq, duration_ns=None, error=error))
        w.close(status="crashed", failing_seq=2, exception=error,
                traceback="Traceback (most recent call last):\n  ...\nRuntimeError: boom\n")
    async with opened(tmp_path / "run", 1, size=(120, 30)) as pilot:
        await press(pilot, "x")
        assert "Traceback (most recent call last)" in screen_text(pilot.app)


async def test_an_exceptions_terminal_escapes_are_drawn_as_styles(tmp_path):
    """Sweep V: torch 2.13's weights_only message bolds words with escapes, which the
    popup drew as characters, its border out of line."""
    error = "UnpicklingError: Weights only load failed. \x1b[1mDo it only if you trust it.\x1b[0m"
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="/p/train.py", started_at="2026-12-02T09:30:00", status="running", host="h", pid=0)
        w.close(status="crashed", exception=error, traceback=f"Traceback (most recent call last):\n{error}\n")
    async with opened(tmp_path / "run", size=(120, 30)) as pilot:
        await press(pilot, "x")
        lines = [line for line in screen_text(pilot.app).splitlines() if "Weights only" in line]
        assert len(lines) == 1 and "load failed. Do it only if you trust it." in lines[0], lines
        assert "[1m" not in lines[0] and "\x1b" not in lines[0] and lines[0].rstrip().endswith("│")


async def test_keys_that_cannot_move_are_greyed_and_say_why(healthy_run):
    async with opened(healthy_run, 39) as pilot:  # the last call
        screen = pilot.app.screen
        assert screen.check_action("into", ()) is None and screen.check_action("failure", ()) is None
        await press(pilot, "s", "e")
        assert _notices(pilot) == ["no later call", "no call that raised"]
        assert "call 39 of 39" in screen_text(pilot.app)
    async with opened(healthy_run, 1) as pilot:
        assert pilot.app.screen.check_action("back_into", ()) is None
        await press(pilot, "S")
        assert _notices(pilot) == ["no earlier call"] and "call 1 of 39" in screen_text(pilot.app)


async def test_values_title_stays_one_line_on_a_narrow_screen(healthy_run):
    async with opened(healthy_run, 10, size=(60, 20)) as pilot:
        await press(pilot, "v")
        title, header = screen_text(pilot.app).splitlines()[:2]
        assert title.split()[:3] == ["call", "#10", "input"] and header.split()[0] == "0"
        await press(pilot, *["right"] * 5)
        scrolled = pilot.app.screen.query_one(ValuesGrid).scroll_x
        await pilot.resize_terminal(120, 20)
        await settle(pilot)
        assert "→ [4, 512]" in screen_text(pilot.app).splitlines()[0]
        assert pilot.app.screen.query_one(ValuesGrid).scroll_x == scrolled > 0  # a resize keeps the place


async def test_values_title_keeps_the_index_when_a_long_path_gives_way(tmp_path):
    path = "model.encoder.layers.11.attention.output.dense.weight"
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="/p/train.py", started_at="2026-12-02T09:30:00", status="ok", host="h", pid=0)
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer",
                              name="Adam", type="Adam", call_site=None, def_site=None, start_ns=1, duration_ns=10))
        w.put_slots(1, [tensor_slot("param_grad", 0, path, np.ones((3, 4, 5), np.float32))])
    async with opened(tmp_path / "run", 1, size=(60, 20)) as pilot:
        await press(pilot, "v")
        title = screen_text(pilot.app).splitlines()[0]
        assert "[0, :, :] → [4, 5]" in title and "…" in title and "dense.weight" in title


async def test_x_on_a_call_whose_exception_was_caught_shows_its_whole_message(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="/home/ada/proj/train.py", started_at="2026-12-02T09:30:00", status="running",
                   host="recorder-host", pid=0)
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="picky",
                              type="Picky", call_site=None, def_site=None, start_ns=1, duration_ns=10,
                              error="ValueError: shapes disagree",
                              extra={"error_text": "ValueError: shapes disagree\n  expected [4, 8]"}))
        w.close(status="ok", steps_recorded=0)
    async with opened(tmp_path / "run", 1, size=(160, 30)) as pilot:
        assert "x: whole exception" in screen_text(pilot.app)
        await press(pilot, "x")
        assert isinstance(pilot.app.screen, ExceptionScreen)
        text = screen_text(pilot.app)
        assert "exception at call 1 picky" in text and "expected [4, 8]" in text


async def test_step_view_plots_the_loss_and_decodes_predictions(healthy_run):
    async with opened(healthy_run, 10) as pilot:  # a call of step 1
        await press(pilot, "p")
        assert isinstance(pilot.app.screen, StepScreen)
        text = screen_text(pilot.app)
        assert "step 1  loss 1.9" in text and "loss per step" in text
        rows = _rows_of(text, "cat", "dog")
        # position, dataset index, per-sample loss, target, right or not, then the classes
        assert rows[0].split()[1:6] == ["0", "12", "0.25", "cat", "✓"] and "cat 70%" in rows[0]
        assert rows[1].split()[1:6] == ["1", "7", "2.5", "dog", "✗"] and "cow 50%" in rows[1]
        assert "ignored" in rows[2]
        await press(pilot, "right_square_bracket")
        text = screen_text(pilot.app)
        assert "step 2  loss 1.5" in text and "hellp" in text and "hello" in text and "80%" in text
        await press(pilot, "right_square_bracket")
        assert "no class or token predictions to decode in step 3" in screen_text(pilot.app)
        await press(pilot, "right_square_bracket")
        assert _notices(pilot)[-1] == "no later step"
        await press(pilot, "escape")
        assert not isinstance(pilot.app.screen, StepScreen) and "call 10 of 39" in screen_text(pilot.app)


async def test_at_80_columns_each_prediction_shows_its_class_beside_the_sample_pane(healthy_run):
    # The classes a sample was predicted as used to be one column, which 80 columns cut whole.
    async with opened(healthy_run, 10, size=(80, 24)) as pilot:
        await press(pilot, "p")
        rows = _rows_of(screen_text(pilot.app), "cat", "dog")
        assert rows[0].split()[1:7] == ["0", "12", "0.25", "cat", "✓", "cat"] and "70%" in rows[0]
        assert rows[1].split()[1:7] == ["1", "7", "2.5", "dog", "✗", "cow"] and "50%" in rows[1]


def _rows_of(text: str, *words: str) -> list[str]:
    """The predictions table's rows holding one of `words` (the sample pane beside it cut off)."""
    rows = [line.split("││")[0] + "│" for line in text.splitlines()]
    return [row for row in rows if any(w in row for w in words) and "%" in row]


async def test_step_view_walks_to_an_unfinished_step_and_back(crashed_run):
    async with opened(crashed_run) as pilot:  # opens at the failing call, in step 2
        await press(pilot, "p")
        assert "step 2  unfinished" in screen_text(pilot.app)
        await press(pilot, "left_square_bracket")
        assert "step 1  loss" in screen_text(pilot.app)
        await press(pilot, "right_square_bracket")
        assert "step 2  unfinished" in screen_text(pilot.app)


def _two_calls(path, **closing) -> None:
    with RunWriter(path) as w:
        w.put_meta(script="/p/train.py", started_at="2026-12-02T09:30:00", status="running", host="h", pid=0)
        for seq in (1, 2):
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward", kind="module",
                                  name=f"m{seq}", type="Linear", start_ns=seq, duration_ns=1000))
        if closing:
            w.close(**closing)


async def test_e_in_a_run_that_raised_outside_any_call_says_where_it_raised(tmp_path):
    _two_calls(tmp_path / "run", status="crashed", failing_seq=None, exception="ValueError: bad",
               traceback="Traceback ...\nValueError: bad\n", failing_site="/p/train.py:25")
    async with opened(tmp_path / "run", 1) as pilot:
        await press(pilot, "e")
        assert "no call that raised: the script raised at train.py:25, outside the calls recorded " \
               "(x shows it)" in _notices(pilot)


async def test_a_stopped_run_says_why_it_stopped(tmp_path):
    _two_calls(tmp_path / "ctrl_c", status="stopped", stopped_by="KeyboardInterrupt")
    _two_calls(tmp_path / "killed")  # never closed, its recorder gone
    for run, reason in (("ctrl_c", "Ctrl-C"), ("killed", "recorder killed")):
        async with opened(tmp_path / run, 1) as pilot:
            assert f"[stopped: {reason}]" in screen_text(pilot.app).splitlines()[-2]
            await press(pilot, "x")
            assert f"no exception: the run was stopped ({reason})" in _notices(pilot)


async def test_a_run_with_failed_writes_says_its_store_is_incomplete(tmp_path):
    _two_calls(tmp_path / "full", status="ok", incomplete=True)
    async with opened(tmp_path / "full", 1) as pilot:
        assert "[ok: store incomplete]" in screen_text(pilot.app).splitlines()[-2]
    async with opened(tmp_path) as pilot:
        assert "ok, incomplete" in screen_text(pilot.app)


def _first_help_section(app) -> str:
    """The first line inside the help box."""
    lines = screen_text(app).splitlines()
    top = next(i for i, line in enumerate(lines) if "keys (Esc closes)" in line)
    return lines[top + 1]


async def test_help_lists_the_keys_of_the_screen_it_was_opened_from_first(runs_dir, healthy_run):
    async with opened(runs_dir, size=(120, 60)) as pilot:
        await press(pilot, "question_mark")
        assert isinstance(pilot.app.screen, HelpScreen)
        text = screen_text(pilot.app)
        assert "Run list" in _first_help_section(pilot.app)
        assert "Scroll the columns" in text and "On other screens" in text
        assert text.index("Select a run") < text.index("Step into: the next call")
        await press(pilot, "escape")
        assert "runs in" in screen_text(pilot.app)
    async with opened(healthy_run, 3, size=(120, 60)) as pilot:
        await press(pilot, "f1")
        assert "Stepping (from any pane)" in _first_help_section(pilot.app)
        await press(pilot, "escape", "p", "f1")
        assert isinstance(pilot.app.screen, HelpScreen)
        assert "Step view" in _first_help_section(pilot.app)
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, StepScreen)


def test_every_screens_help_sections_are_sections_of_the_key_reference():
    titles = {title for title, _ in key_sections()}
    for screen in (DebuggerScreen, RunPickerScreen, StepScreen, ValuesScreen):
        assert set(screen.HELP_SECTIONS) <= titles, screen


async def test_v_on_a_tensor_without_values_says_why(healthy_run):
    async with opened(healthy_run, 12) as pilot:  # backward: a gradient kept as statistics only
        inspector = pilot.app.screen.query_one(Inspector)
        inspector.focus()
        row = next(i for i, slot in enumerate(inspector.slots) if slot.is_tensor and not slot.has_values)
        await press(pilot, *["j"] * row, "v")
        assert not isinstance(pilot.app.screen, ValuesScreen)
        assert any(n.startswith("only statistics of ") and "--capture summary" in n for n in _notices(pilot))


@pytest.mark.parametrize("slot, says", [
    (dict(shape=(4, -1, 32), stats=TensorStats(numel=1152)), "args[0] is a nested tensor (its rows differ "
                                                            "in length): only its statistics are stored"),
    (dict(shape=(4, 4), stats=None), "args[0] has no stored values or statistics"),
])
async def test_v_on_a_tensor_never_stored_with_values_says_why(tmp_path, slot, says):
    """Sweep S: a nested tensor's `v` blamed --max-tensor-bytes or --capture summary, in a
    run that captured values and a tensor of 4.6 KB."""
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", started_at="2026-12-01T10:00:00", status="running", capture="values")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="no_grad", kind="module", name="layer"))
        w.put_slot(1, Slot("input", 0, "args[0]", dtype="float32", **slot))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=1))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 1) as pilot:
        pilot.app.screen.query_one(Inspector).focus()
        await press(pilot, "home", "v")
        assert not isinstance(pilot.app.screen, ValuesScreen)
        assert any(n.startswith(says) for n in _notices(pilot)), _notices(pilot)


async def test_a_long_plain_value_is_cut_in_the_table_and_shown_whole_on_enter(tmp_path):
    """Sweep S: the slot cap's note (or a config's repr) widened the shape column to 36
    cells at 200 columns, and the tensors' figures went out of view."""
    config = "Config(hidden=512, layers=12, heads=8, dropout=0.1, vocab=50257)"
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", started_at="2026-12-01T10:00:00", status="running")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="model"))
        w.put_slot(1, Slot("input", 0, "kwargs['config']", repr=config))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=1))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 1, size=(200, 40)) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        assert "Config(hidden=512, laye… " in inspector.render_line(1).text
        inspector.focus()
        await press(pilot, "home", "enter")
        assert f"kwargs['config'] is not a tensor: {config}" in _notices(pilot)


def _optimizer_run(path, *slots: Slot, extra: dict | None = None, module_call: bool = False):
    """A one-step run: an optimizer call holding `slots`, after a Linear call if asked."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", started_at="2026-12-01T10:00:00", status="running")
        first = 1
        if module_call:
            w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module",
                                  name="fc", type="Linear"))
            w.put_slot(1, Slot("output", 0, "output", shape=(4, 2), dtype="float32", device="cpu",
                               stats=TensorStats(numel=8, min=-1.0, max=1.0, mean=0.0, std=0.5, norm=2.0)))
            first = 2
        w.put_call(CallRecord(seq=first, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer",
                              name="SGD", type="SGD", extra=extra or {"lrs": [0.1]}))
        for slot in slots:
            w.put_slot(first, slot)
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=first))
        w.close(status="ok", steps_recorded=1)
    return path


def _grad(name: str, shape=(24, 12), role: str = "param_grad", ratio: float | None = None) -> Slot:
    return Slot(role, 0, name, shape=shape, dtype="float32", device="cpu", ratio=ratio,
                stats=TensorStats(numel=int(np.prod(shape)), min=-0.125, max=0.25, mean=0.0, std=0.05,
                                  norm=6.5),
                hist=tuple(range(16)), hist_lo=-0.5, hist_hi=0.5)


async def test_an_optimizer_steps_settings_leave_its_gradients_figures_in_view(tmp_path):
    """Sweep T: at 120 columns an optimizer call's rows showed name and shape only: the lr
    row's settings (`0.1  momentum 0.9  nesterov ...`) sized the shape column."""
    hyper = {"momentum": 0.9, "nesterov": True, "weight_decay": 0.0005, "dampening": 0.0}
    path = _optimizer_run(tmp_path / "run", _grad("Net.encoder.0.weight"),
                          extra={"lrs": [0.1], "hyper": [hyper], "no_grad": ["Net.aux.weight"],
                                 "no_grad_frozen": []})
    async with opened(path, 1, size=(120, 40)) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        assert "Net.encoder.0.weight 0/0 6.5 " in " ".join(inspector.render_line(1).text.split())
        assert inspector.render_line(2).text.startswith(" lr group 0  0.1  momentum 0.9")
        assert "nesterov" not in inspector.render_line(2).text  # cut to the gradients' names
        inspector.focus()
        await press(pilot, "home", "down", "enter")
        assert "lr group 0: 0.1  momentum 0.9  nesterov  weight_decay 0.0005" in _notices(pilot)
        await press(pilot, "down", "enter")
        assert ("no grad Net.aux.weight: no gradient (unused by the loss, or zeroed before the step): "
                "not updated") in _notices(pilot)


async def test_an_optimizer_steps_norms_and_update_ratios_show_beside_long_names(tmp_path):
    """The bundled CNN's Adam call at 120 columns showed names and shapes only, then names,
    shapes and nan/inf: the norms and update/weight ratios were a scroll away."""
    name = "SmallCNN.blocks.0.conv1.weight"
    path = _optimizer_run(tmp_path / "run", _grad(name, (16, 16, 3, 3)),
                          _grad(name, (16, 16, 3, 3), role="update", ratio=0.027))
    async with opened(path, 1, size=(120, 40)) as pilot:
        inspector = pilot.app.screen.query_one(Inspector)
        assert inspector.render_line(0).text.split()[:4] == ["name", "nan/inf", "norm", "Δ/w"]
        grad, update = (" ".join(inspector.render_line(y).text.split()) for y in (1, 2))
        assert grad.startswith("param_grad …blocks.0.conv1.weight 0/0 6.5 "), grad
        assert update.startswith("update …blocks.0.conv1.weight 0/0 6.5 0.027 "), update


async def _scroll_to(pilot, column: str) -> None:
    """Focus the inspector and scroll right until `column` is its first after the name."""
    pilot.app.screen.query_one(Inspector).focus()
    for _ in range(12):
        if _inspector_lines(pilot)[0].replace("‹", " ").split()[1] == column:
            return
        await press(pilot, "right")


async def test_a_column_scrolled_to_stays_in_view_into_an_optimizer_step(tmp_path):
    path = _optimizer_run(tmp_path / "run", _grad("Net.fc.weight"), module_call=True)
    async with opened(path, 1, size=(80, 30)) as pilot:
        await _scroll_to(pilot, "std")
        pilot.app.screen.query_one(CallTree).focus()
        await press(pilot, "s")
        assert "optimizer" in screen_text(pilot.app).splitlines()[-2]
        header = _inspector_lines(pilot)[0].replace("‹", " ").split()
        # Kept by name (its columns come in another order), as far as the table's width lets it.
        assert "std" in header and "histogram" not in header, header


async def test_stepping_from_an_optimizers_own_column_to_a_module_call(tmp_path):
    """The update/weight ratio column is an optimizer step's alone: scrolled to it, a step
    back to a module call keeps no column, and the table starts at its name."""
    path = _optimizer_run(tmp_path / "run", _grad("Net.fc.weight", role="update", ratio=0.02),
                          module_call=True)
    async with opened(path, 2, size=(80, 30)) as pilot:
        await _scroll_to(pilot, "Δ/w")
        assert _inspector_lines(pilot)[0].replace("‹", " ").split()[1] == "Δ/w"
        pilot.app.screen.query_one(CallTree).focus()
        await press(pilot, "S")
        assert "forward" in screen_text(pilot.app).splitlines()[-2]
        assert _inspector_lines(pilot)[0].split()[:2] == ["name", "shape"]


async def test_a_step_that_kept_only_its_worst_losses_says_so(healthy_run):
    async with opened(healthy_run, 3) as pilot:  # step 1: per-sample values not stored
        await press(pilot, "p")
        await settle(pilot)
        assert "loss of the 2 worst samples only: values not stored" in screen_text(pilot.app)


CONV_LINE = "    x = self.relu(self.conv1(images))"


def _run_with_conv_comment(path, comment: str):
    """The healthy run's first step, its model's conv line carrying a long `# comment`."""
    with RunWriter(path) as w:
        _meta(w, TRAIN, "2026-12-01T10:00:00")
        w.put_source(MODEL, MODEL_SRC.replace(CONV_LINE, f"{CONV_LINE}  # {comment}"))
        write_step(w, 1, np.random.default_rng(0))
        w.close(status="ok", steps_recorded=1)
    return path


async def test_source_pane_scrolls_long_lines_sideways_and_keeps_their_shapes(tmp_path):
    path = _run_with_conv_comment(tmp_path / "run", "a comment that runs on " * 6 + "END")
    async with opened(path, 3, size=(100, 30)) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        line = pane.line
        drawn = pane.render_line(line - 1 - int(pane.scroll_y)).text
        assert drawn.rstrip().endswith("# relu → [4, 8, 8, 8]") and "…" in drawn and "END" not in drawn
        pane.focus()
        await press(pilot, *["right"] * 30)  # as far as it goes: the end of the longest line
        drawn = pane.render_line(line - 1 - int(pane.scroll_y)).text
        assert "END" in drawn and drawn.rstrip().endswith("# relu → [4, 8, 8, 8]")
        assert drawn.startswith(f"▶{line} ")  # the gutter stays
        assert "from column" in screen_text(pilot.app)
        await press(pilot, "s")  # the next call, in the same file: still scrolled
        assert pane.column > 0
        await press(pilot, *["h"] * 30)
        assert pane.column == 0 and "from column" not in screen_text(pilot.app)


async def test_source_pane_measures_wide_characters_in_cells(tmp_path):
    path = _run_with_conv_comment(tmp_path / "run", "卷积层的输出" * 8 + "完")
    async with opened(path, 3, size=(100, 30)) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        row = pane.line - 1 - int(pane.scroll_y)
        assert pane.render_line(row).text.rstrip().endswith("# relu → [4, 8, 8, 8]")
        pane.focus()
        await press(pilot, *["right"] * 40)
        drawn = pane.render_line(row).text
        assert "完" in drawn and drawn.rstrip().endswith("# relu → [4, 8, 8, 8]")
        assert drawn.index("完") > drawn.index("▶") + 8  # scrolled just far enough: code still shows


@pytest.mark.parametrize("loss, extra, title", [
    (59.87, {"optimizer_step_skipped": "GradScaler: inf/NaN gradients"},
     "step 1  loss 59.87  no update: GradScaler: inf/NaN gradients"),
    (2.16, {"losses": [2.09, 2.16], "losses_not_applied": [0]},
     "step 1  loss 2.16 (of 2 backward losses, 1 not applied: gradients zeroed before the step)"),
])
async def test_the_step_view_says_what_the_steps_loss_did_not_do(tmp_path, loss, extra, title):
    with RunWriter(tmp_path / "run") as w:
        _meta(w, TRAIN, "2026-12-01T10:00:00")
        write_step(w, 1, np.random.default_rng(0))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=CALLS_PER_STEP, loss=loss,
                              phase_ns={"forward": 9000}, peak_bytes=3 << 20, extra={"wall_ns": 9000, **extra}))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2) as pilot:
        await press(pilot, "p")
        assert title in screen_text(pilot.app)


async def test_a_folder_read_that_returns_after_the_list_is_gone_is_dropped(runs_dir):
    """ctrl+r reads the folder on a thread; the list may be gone when it returns (the app
    closing: CI once failed on it)."""
    from textual.widgets import DataTable

    async with opened(runs_dir) as pilot:
        picker = pilot.app.screen
        await picker.query_one(DataTable).remove()
        picker._reloaded([])  # no NoMatches: the read is dropped


async def test_a_theme_change_redraws_the_lines_the_panes_keep(healthy_run):
    """The tree and source pane keep the lines they drew (stepping redraws few): a new
    theme draws them all again in its colours."""
    async with opened(healthy_run, 10) as pilot:
        screen = pilot.app.screen
        tree, source = screen.query_one(CallTree), screen.query_one(SourcePane)
        tree_y, source_y = tree.cursor - int(tree.scroll_y), source.line - 1 - int(source.scroll_y)
        before = [tree.render_line(tree_y), source.render_line(source_y)]
        pilot.app.theme = "textual-light" if pilot.app.theme != "textual-light" else "nord"
        await settle(pilot)
        after = [tree.render_line(tree_y), source.render_line(source_y)]
        for old, new in zip(before, after):
            assert old.text == new.text
            assert [s.style for s in old] != [s.style for s in new]


async def test_esc_on_a_run_opened_on_its_own_says_there_is_no_list(healthy_run):
    async with opened(healthy_run, 10) as pilot:
        await press(pilot, "escape")
        assert isinstance(pilot.app.screen, DebuggerScreen)
        assert _notices(pilot)[-1].startswith("this run was opened on its own: there is no run list")


async def test_a_smaller_window_keeps_the_selected_call_and_its_line_in_view(healthy_run):
    async with opened(healthy_run, 35, size=(120, 40)) as pilot:
        await pilot.resize_terminal(50, 12)
        await settle(pilot)
        tree, source = pilot.app.screen.query_one(CallTree), pilot.app.screen.query_one(SourcePane)
        top, height = int(tree.scroll_y), tree.scrollable_content_region.height
        assert top <= tree.cursor < top + height, (top, height, tree.cursor)
        top, height = int(source.scroll_y), source.scrollable_content_region.height
        assert top < source.cursor_line <= top + height, (top, height, source.cursor_line)
        assert "▶" in screen_text(pilot.app)  # the cursor is drawn, not only scrolled to


async def test_nan_only_in_a_gradient_is_flagged_and_continue_stops_there(tmp_path):
    # Forward finite, backward NaN (a sqrt at 0): the call whose output gradient holds it
    # is where a NaN hunt must land, not the optimizer step after it.
    path = tmp_path / "grad-nan"
    with RunWriter(path) as w:
        _meta(w, TRAIN, "2026-12-03T10:00:00")
        write_step(w, 1, np.random.default_rng(2))
        grad = np.ones((4, 512), np.float32)
        grad[0, :3] = np.nan
        w.put_slots(7, [tensor_slot("grad", 0, "out", grad, keep=False)])
        w.put_nonfinite_grad(7)
        w.close(status="ok", steps_recorded=1, ended_at="2026-12-03T10:00:01")
    async with opened(path, 1) as pilot:
        assert "NaN/Inf" not in screen_text(pilot.app)
        await press(pilot, "c")
        text = screen_text(pilot.app)
        assert "call 7 of 13  NaN/Inf in gradient" in text
        assert "blocks.0.fc NaN/Inf grad" in text
        await press(pilot, "c")
        assert "call 7 of 13" in screen_text(pilot.app)  # nothing later: it stays
        await press(pilot, "end", "exclamation_mark")
        assert "call 7 of 13  NaN/Inf in gradient" in screen_text(pilot.app)


async def test_the_inspector_names_the_modules_settings(tmp_path):
    # An LSTM's batch_first, a Dropout's p: what the module was built with (sweep O).
    config = "3, 8, kernel_size=(3, 3), padding=[1]"  # brackets are no markup
    with RunWriter(tmp_path / "run") as w:
        _meta(w, "train.py", "2026-12-01T10:00:00")
        write_step(w, 1, np.random.default_rng(0), extras={"conv1": {"config": config}})
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 3) as pilot:
        assert f"inspector  Conv2d({config})" in screen_text(pilot.app)
        await press(pilot, "S")  # the model's call: a module of the script's, no settings of its own
        text = screen_text(pilot.app)
        assert "─ inspector ─" in text and "Conv2d(" not in text
