"""`tvis ls` and `tvis export` on runs built through the real writer."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tvis_tui.cli import main
from tvis_tui.store import CallRecord, RunWriter, Site, Slot, StepRecord, TensorStats
from tvis_tui.store.processes import identity


@pytest.fixture
def run_dir(tmp_path):
    runs = tmp_path / "runs"
    with RunWriter(runs / "20260101-000000-train") as w:
        w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module",
                              name="model", type="Net", call_site=Site("/x/train.py", 7)))
        stats = TensorStats(numel=2, min=0.0, max=float("inf"), posinf=1)
        w.put_slot(1, Slot("output", 0, "out", shape=(2,), dtype="float32", stats=stats,
                           values_dtype="float32"), np.array([0, np.inf], np.float32).tobytes())
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=1, loss=float("nan")))
        w.close(status="crashed", steps_recorded=1)
    return runs


def test_ls_lists_runs_with_status(run_dir, capsys):
    assert main(["ls", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "20260101-000000-train" in out and "train.py" in out and "crashed" in out


def test_ls_on_missing_dir_is_one_line_error(tmp_path, capsys):
    assert main(["ls", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tvis: error:") and err.count("\n") == 1


def test_export_jsonl_is_strict_json_per_line(run_dir, capsys):
    run = next(run_dir.iterdir())
    assert main(["export", str(run), "--format", "jsonl"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [obj["record"] for obj in lines] == ["meta", "step", "call"]
    assert lines[0]["status"] == "crashed"
    assert lines[1]["loss"] == "nan"
    call = lines[2]
    assert call["name"] == "model" and call["call_site"] == {"file": "/x/train.py", "line": 7}
    assert call["slots"][0]["stats"]["max"] == "inf" and call["slots"][0]["shape"] == [2]


def test_export_json_document(run_dir, tmp_path):
    run = next(run_dir.iterdir())
    out = tmp_path / "run.json"
    assert main(["export", str(run), "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert set(doc) == {"meta", "steps", "calls", "data"} and len(doc["calls"]) == 1
    assert doc["data"] == []  # no DataLoader batches in this run


def test_export_of_non_run_is_one_line_error(tmp_path, capsys):
    assert main(["export", str(tmp_path)]) == 2
    assert "not a tvis run" in capsys.readouterr().err


# -- user-derived text is never read as Rich markup ---------------------------------------

@pytest.mark.parametrize("name", ["md[/x]", "[red]dir", "a[bold]b", ":smile:"])
def test_ls_of_an_empty_folder_prints_its_name_as_is(tmp_path, capsys, name):
    folder = tmp_path / name
    folder.mkdir(parents=True)
    assert main(["ls", str(folder)]) == 0
    captured = capsys.readouterr()
    assert captured.out == f"no runs in {folder}\n" and captured.err == ""


def test_ls_prints_run_and_script_names_as_is(tmp_path, capsys):
    with RunWriter(tmp_path / "runs" / "exp[bold]1") as w:
        w.put_meta(script="[red]y.py", started_at="2026-01-01T00:00:00", status="ok")
    assert main(["ls", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "exp[bold]1" in out and "[red]y.py" in out


def test_ls_writes_control_characters_in_names_as_escapes(tmp_path, capsys):
    """A script named with a newline or an escape sequence keeps its row whole and cannot
    recolour the terminal."""
    with RunWriter(tmp_path / "runs" / "run\x1b[2J") as w:
        w.put_meta(script="a\nb\x1b[31m.py", started_at="2026-01-01T00:00:00", status="ok")
    assert main(["ls", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and len(out.splitlines()) == 2
    assert "run\\x1b[2J" in out and "a\\nb\\x1b[31m.py" in out


# -- a run whose recorder was killed: counts from the store, status as ls says ------------

@pytest.fixture
def killed_run(tmp_path):
    """Meta still says "running" (no close ran); pid 0 is no live process. Calls 1..5 and 8
    are stored (8, not 6: fewer stored than the highest number), 2 steps ended, a 3rd is open."""
    run = tmp_path / "runs" / "killed"
    with RunWriter(run) as w:
        w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running", pid=0)
        for seq in (1, 2, 3, 4, 5, 8):
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward",
                                  kind="module", name="m"))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=2))
        w.put_step(StepRecord(step=2, first_seq=3, last_seq=4))
        w.put_step(StepRecord(step=3, first_seq=5, last_seq=8, complete=False))
    return run


def test_ls_counts_the_steps_and_calls_a_killed_run_stored(killed_run, capsys):
    assert main(["ls", str(killed_run.parent)]) == 0
    row = capsys.readouterr().out.splitlines()[1].split()
    assert row[0] == "killed" and row[-1] == "stopped"
    assert row[4:6] == ["2", "6"]  # steps that ended, calls stored


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_export_reports_the_status_ls_shows(killed_run, capsys, fmt):
    assert main(["export", str(killed_run), "--format", fmt]) == 0
    out = capsys.readouterr().out
    meta = json.loads(out.splitlines()[0]) if fmt == "jsonl" else json.loads(out)["meta"]
    assert meta["status"] == "stopped"


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process start times: Linux")
@pytest.mark.parametrize("recorded, status", [("same", "running"), ("other", "stopped")])
def test_a_killed_runs_pid_taken_by_another_process_does_not_read_running(
        tmp_path, capsys, recorded, status):
    """The recorder was SIGKILLed and its pid went to a later process (here: this test's
    own, which is alive): the run must not read "running" for as long as that one lives."""
    me = os.getpid()
    process = identity(me) if recorded == "same" else "0f0f0f0f-old-boot:12345"
    with RunWriter(tmp_path / "runs" / "r") as w:
        w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running",
                   pid=me, host=socket.gethostname(), process=process)
    assert main(["ls", str(tmp_path / "runs")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == status


@pytest.mark.skipif(not os.path.exists("/proc/self/stat"), reason="process states: Linux")
def test_a_killed_recorder_its_parent_has_not_reaped_reads_stopped(tmp_path, capsys):
    """A zombie is no recorder: a run its parent started and has not yet waited for."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    stat = Path(f"/proc/{child.pid}/stat")
    try:
        for _ in range(200):  # exited, not reaped: no wait() until the end
            if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.05)
        with RunWriter(tmp_path / "runs" / "r") as w:
            w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running",
                       pid=child.pid, host=socket.gethostname(), process=identity(child.pid))
        assert main(["ls", str(tmp_path / "runs")]) == 0
        assert capsys.readouterr().out.splitlines()[1].split()[-1] == "stopped"
    finally:
        child.wait()
