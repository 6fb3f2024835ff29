"""Every stepping key, from a known call, lands on the call a debugger user expects.

Seqs in the fixture run (13 calls a step): step 1 is 1 loader, 2 model, 3 conv1, 4 relu,
5 blocks, 6 blocks.0, 7 blocks.0.fc, 8 blocks.1, 9 blocks.1.fc, 10 head, 11 criterion,
12 backward, 13 optimizer.step; step 2 is 14-26; step 3 is 27-39 with NaN from 36 (head).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import Callable, Iterator

import numpy as np
import pytest

from conftest import CALLS_PER_STEP, TRAIN, _meta, write_step
from pilot import opened, press
from screen_text import screen_text

from tvis_tui.store import RunWriter

CASES = [
    # keys, start, expected seq
    (["s"], 1, 2), (["f11"], 1, 2), (["S"], 2, 1),
    (["n"], 2, 11), (["f10"], 6, 8), (["N"], 11, 2), (["shift+f10"], 8, 6), (["N"], 3, 2),
    (["f"], 7, 8), (["r"], 9, 10), (["shift+f11"], 3, 11),
    (["F"], 7, 6), (["u"], 6, 5),
    (["c"], 1, 36), (["f5"], 36, 37), (["C"], 39, 37), (["shift+f5"], 37, 36),
    (["o"], 1, 13), (["O"], 20, 13),
    (["right_square_bracket"], 5, 14), (["left_square_bracket"], 20, 1),
    (["1"], 20, 14), (["2"], 14, 15), (["3"], 14, 24), (["4"], 14, 25), (["5"], 14, 26),
    (["exclamation_mark"], 1, 36),
    (["t"], 3, 4), (["ctrl+f10"], 4, 16), (["T"], 17, 16),
    (["g", *"30", "enter"], 1, 30), (["colon", *"7", "enter"], 1, 7), (["g", *"abc", "enter"], 5, 5), (["g", "²", "enter"], 5, 5),
    (["g", *"999", "enter"], 5, 5), (["g", "escape"], 5, 5),
    (["slash", *"head", "enter"], 1, 10), (["slash", *"head", "enter", "semicolon"], 1, 23),
    (["slash", *"head", "enter", "semicolon", "comma"], 1, 10), (["slash", *"blocks.1.fc", "enter"], 20, 22),
    (["g", *"30", "enter", "less_than_sign"], 1, 1), (["g", *"30", "enter", "alt+left", "alt+right"], 1, 30),
    (["g", *"30", "enter", "less_than_sign", "greater_than_sign"], 1, 30),
    (["S"], 1, 1), (["s"], 39, 39), (["F"], 1, 1), (["e"], 4, 4),
]


@pytest.mark.parametrize("keys,start,expected", CASES, ids=[f"{'+'.join(k)}@{s}" for k, s, _ in CASES])
async def test_stepping_key_lands_on_expected_call(healthy_run, keys, start, expected):
    async with opened(healthy_run, start) as pilot:
        await press(pilot, *keys)
        assert pilot.app.screen.seq == expected
        assert f"call {expected} of 39" in screen_text(pilot.app)


async def test_failure_key_and_crashed_run_opens_at_failing_call(crashed_run):
    async with opened(crashed_run) as pilot:
        text = screen_text(pilot.app)
        assert pilot.app.screen.seq == 22
        assert "raised: RuntimeError" in text and "blocks.1.fc" in text
        await press(pilot, "g", "3", "enter")
        await press(pilot, "e")
        assert pilot.app.screen.seq == 22


async def test_a_run_that_crashed_in_the_scripts_own_code_opens_at_its_last_call(tmp_path):
    # `raise FloatingPointError` in the loop after an inf loss: no call raised (sweep M).
    path = tmp_path / "own-raise"
    with RunWriter(path) as w:
        _meta(w, TRAIN, "2026-12-03T10:00:00")
        write_step(w, 1, np.random.default_rng(3))
        w.close(status="crashed", steps_recorded=1, exception="FloatingPointError: loss is inf",
                traceback="Traceback ...\nFloatingPointError: loss is inf\n", failing_site=f"{TRAIN}:18")
    async with opened(path) as pilot:
        assert pilot.app.screen.seq == CALLS_PER_STEP
        await press(pilot, "e")  # no call raised: says so and stays
        assert pilot.app.screen.seq == CALLS_PER_STEP


@pytest.mark.parametrize("pane", ["#source", "#inspector", "#tree"])
async def test_stepping_keys_work_from_every_pane(healthy_run, pane):
    async with opened(healthy_run, 2) as pilot:
        pilot.app.screen.query_one(pane).focus()
        await press(pilot, "n", "s", "S")
        assert pilot.app.screen.seq == 11


WRITER = """
import os, socket, sys
import numpy as np
sys.path.insert(0, {tests!r})
from conftest import write_step
from tvis_tui.store import RunWriter
rng = np.random.default_rng(0)
w = RunWriter({path!r})
w.put_meta(script="train.py", started_at="2026-12-03T00:00:00", status="running",
           pid=os.getpid(), host=socket.gethostname())  # still recording
w.flush()
print("started", flush=True)
for step in range(1, {steps} + 1):
    if step > {first}:
        sys.stdin.readline()
    write_step(w, step, rng)
    w.flush()
    print("step", flush=True)
w.close(status="ok")
"""
"""A run another process writes: its meta, then the steps up to `first` at once, then
one step each time it reads a line, saying "started" and "step" when each is on disk."""


@contextlib.contextmanager
def live_run(path: Path, first: int, steps: int, kill: bool = False) -> Iterator[Callable[[], None]]:
    """Start writing the run; yields `more()`, which lets the writer put one more step.
    With `kill`, `more()` kills the writer once the step is on disk."""
    code = WRITER.format(tests=str(Path(__file__).parent), path=str(path), steps=steps, first=first)
    writer = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def more() -> None:
        writer.stdin.write("go\n")
        writer.stdin.flush()
        assert writer.stdout.readline().strip() == "step"
        if kill and writer.poll() is None:
            writer.kill()

    try:
        assert writer.stdout.readline().strip() == "started"
        for _ in range(first):
            assert writer.stdout.readline().strip() == "step"
        yield more
    finally:
        writer.communicate(None if kill else "go\n" * steps, timeout=30)


async def test_refresh_shows_calls_committed_after_opening(tmp_path):
    """A run another process is still writing opens, and ctrl+r shows what it added since."""
    with live_run(tmp_path / "live", first=1, steps=2) as more:
        async with opened(tmp_path / "live") as pilot:
            assert "call 1 of 13" in screen_text(pilot.app)
            more()
            await press(pilot, "ctrl+r", "g", *"20", "enter")
            assert "call 20 of 26" in screen_text(pilot.app)


async def _status_line_once(pilot, words: str) -> str:
    """The status line once it holds `words`, or as it is after 10 s."""
    for _ in range(100):
        status = screen_text(pilot.app).splitlines()[-2]
        if words in status:
            break
        await pilot.pause(0.1)
    return status


async def test_a_run_that_ends_while_open_says_how_it_ended_with_its_calls(tmp_path):
    """Its recorder's process gone, the run was "running: recorder killed" until ctrl+r,
    after it had ended well (sweep Q)."""
    with live_run(tmp_path / "live", first=1, steps=2) as more:
        async with opened(tmp_path / "live") as pilot:
            assert "live [running]  step 1" in screen_text(pilot.app).splitlines()[-2]
            more()  # the last step: the writer closes the run "ok" and exits
            status = await _status_line_once(pilot, "of 26")
            assert status.startswith(" live  step 1") and "call 1 of 26" in status  # ok: no [...]
            messages = [n.message for n in pilot.app._notifications]
            assert "recording ended (ok): 26 calls" in messages


async def test_a_recorder_killed_while_its_run_is_open_shows_as_killed(tmp_path):
    with live_run(tmp_path / "live", first=1, steps=3, kill=True) as more:
        async with opened(tmp_path / "live") as pilot:
            more()
            status = await _status_line_once(pilot, "killed")
            assert "live [stopped: recorder killed]" in status


async def test_refresh_of_a_run_opened_before_its_first_call_shows_call_1(tmp_path):
    with live_run(tmp_path / "live", first=0, steps=1) as more:
        async with opened(tmp_path / "live") as pilot:
            assert "live: no calls recorded yet (ctrl+r reloads)" in screen_text(pilot.app)
            more()
            await press(pilot, "ctrl+r")
            assert "call 1 of 13" in screen_text(pilot.app)


async def test_a_run_that_ended_without_calls_does_not_say_it_is_recording(tmp_path):
    with RunWriter(tmp_path / "empty") as w:
        w.put_meta(script="train.py", status="crashed")
    async with opened(tmp_path / "empty") as pilot:
        assert "empty: crashed, no calls were recorded" in screen_text(pilot.app)


async def test_failing_call_is_marked_in_the_tree(crashed_run):
    async with opened(crashed_run) as pilot:
        assert "blocks.1.fc Linear ✗ raised" in screen_text(pilot.app)


@pytest.mark.parametrize("prompt", ["g", "slash"])
async def test_markup_typed_into_a_prompt_is_shown_as_typed(healthy_run, prompt):
    async with opened(healthy_run, 5) as pilot:
        await press(pilot, prompt, "left_square_bracket", "slash", "right_square_bracket", "enter")
        assert pilot.app.screen.seq == 5  # the app is still running: no MarkupError
        messages = [n.message for n in pilot.app._notifications]
        assert any("'[/]'" in m for m in messages), messages


async def test_search_says_when_it_wraps_around_the_run(healthy_run):
    async with opened(healthy_run, 1) as pilot:
        await press(pilot, "slash", *"head", "enter", "semicolon", "semicolon")
        assert pilot.app.screen.seq == 36 and not pilot.app._notifications  # 10, 23, 36
        await press(pilot, "semicolon")
        assert pilot.app.screen.seq == 10
        assert [n.message for n in pilot.app._notifications] == ["search wrapped to the start of the run"]
        await press(pilot, "comma")
        assert pilot.app.screen.seq == 36
        assert "search wrapped to the end of the run" in [n.message for n in pilot.app._notifications]
        await press(pilot, "slash", *"criterion_never", "enter")
        assert pilot.app.screen.seq == 36
        assert "no call matching 'criterion_never'" in [n.message for n in pilot.app._notifications]


async def test_a_step_cut_short_says_unfinished(crashed_run, healthy_run):
    async with opened(crashed_run) as pilot:
        text = screen_text(pilot.app)
        assert "step 2  unfinished" in text and "step 1  unfinished" not in text
    async with opened(healthy_run) as pilot:
        assert "unfinished" not in screen_text(pilot.app)
