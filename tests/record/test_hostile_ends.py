"""Runs that end in ways a store could lose them by: an exception naming a file whose name
is not UTF-8, a crash whose traceback cannot be written, a script that deletes the run's
folder, a SIGTERM from a scheduler. Each keeps its record and says how it ended
(robustness sweep)."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from .helpers import tvis_cli, tvis_env, write_script
from tvis_tui.store import RunReader

STEPS_THEN = """
import os, torch
from torch import nn
m = nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(1, 4):
    loss = m(torch.randn(3, 4)).sum(); opt.zero_grad(); loss.backward(); opt.step()
{then}
"""


def test_a_crash_naming_a_file_whose_name_is_not_utf8_keeps_the_run_and_the_crash(tmp_path):
    then = "path = os.fsdecode(b'/data/img_\\xff.png')\nraise ValueError('cannot decode ' + path)"
    script = write_script(tmp_path, STEPS_THEN.format(then=then))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 1 and "incomplete" not in proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["steps_recorded"]) == ("crashed", 3)
        assert meta["exception"] == "ValueError: cannot decode /data/img_\\xff.png"


def test_a_latin1_script_is_stored_as_python_read_it(tmp_path):
    script = tmp_path / "train.py"
    source = "# -*- coding: latin-1 -*-\nname = 'café'\n" + STEPS_THEN.format(then="")
    script.write_bytes(source.encode("latin-1"))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        assert run.source(str(script)) == source


def _tvis_in_shell(redirect: str, name: str, script, cwd) -> subprocess.CompletedProcess:
    """`tvis run` with its stderr redirected as a shell user does (`2>&-`, `2>&1 | true`)."""
    # The installed `tvis` command: what takes a closed fd 2 first depends on what python
    # opens before tvis does (under `python -m`, another file than the run's data file).
    tvis = shlex.quote(str(Path(sys.executable).parent / "tvis"))
    command = f"{tvis} run --out runs --name {name} {script} {redirect}"
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=tvis_env(), capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("redirect", [
    "2>&1 | true",  # the reader of the pipe gone: `| head`, or `| tee` killed by the same Ctrl-C
    "2>&-",  # closed: the run's data file would have taken fd 2, and the traceback gone into it
])
def test_a_crash_whose_traceback_cannot_be_written_is_still_recorded_as_a_crash(tmp_path, redirect):
    script = write_script(tmp_path, STEPS_THEN.format(then='raise RuntimeError("diverged at step 3")'))
    done = _tvis_in_shell(f"{redirect}; exit ${{PIPESTATUS[0]}}", "r", script, tmp_path)
    assert done.returncode == 1  # as python's (not 120: a failed flush at exit)
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["exit_status"], meta["steps_recorded"]) == ("crashed", 1, 3)
        assert meta["exception"] == "RuntimeError: diverged at step 3"


def test_listing_and_exporting_with_stdout_closed_print_nothing_and_succeed(tmp_path):
    script = write_script(tmp_path, STEPS_THEN.format(then=""))
    assert tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path).returncode == 0
    for command in ("ls runs", "export runs/r"):
        done = subprocess.run(["bash", "-c", f"{shlex.quote(sys.executable)} -m tvis_tui.cli {command} >&-"],
                              cwd=tmp_path, env=tvis_env(), capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stderr) == (0, ""), command


def test_a_run_whose_folder_the_script_deleted_is_written_again_at_its_end(tmp_path):
    # tvis's default --out is TensorBoard's default log folder, which scripts clear.
    then = "import shutil\nshutil.rmtree('runs')\nloss = m(torch.randn(3, 4)).sum(); loss.backward(); opt.step()"
    script = write_script(tmp_path, STEPS_THEN.format(then=then))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "runs/r was deleted while recording (by the script?); written again at its end" in proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["steps_recorded"]) == ("ok", 4)
        assert [s.step for s in run.steps()] == [1, 2, 3, 4]


def test_a_child_the_script_forked_ends_as_under_python_and_leaves_the_run_alone(tmp_path):
    # The child raising went through tvis's runner: its crash was written into the
    # parent's run (status ok beside an exception) and its own "run saved" line printed.
    script = write_script(tmp_path, STEPS_THEN.format(then="""
pid = os.fork()
if pid == 0:
    raise ValueError("in the forked child")
_, status = os.waitpid(pid, 0)
print("child exit", os.waitstatus_to_exitcode(status), flush=True)
"""))
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=tvis_env(), capture_output=True,
                           text=True, timeout=60)
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == plain.returncode == 0
    assert proc.stdout == plain.stdout == "child exit 1\n"
    assert proc.stderr.count("ValueError: in the forked child") == 1
    assert [line for line in proc.stderr.splitlines() if line.startswith("tvis:")] == \
        ["tvis: recorded 3 steps (ok); run saved to runs/r"]
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["steps_recorded"]) == ("ok", 3) and "exception" not in meta


def test_a_finally_that_raises_after_the_step_limit_shows_no_tvis_internals(tmp_path):
    script = write_script(tmp_path, """
import torch
m = torch.nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
try:
    for step in range(10):
        loss = m(torch.randn(3, 4)).sum(); opt.zero_grad(); loss.backward(); opt.step()
finally:
    raise OSError("checkpoint disk full")
""")
    proc = tvis_cli("run", "--steps", "2", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 1 and "OSError: checkpoint disk full" in proc.stderr
    assert "StopRecording" not in proc.stderr and "During handling" not in proc.stderr


@pytest.mark.parametrize("status", [0, 3])
def test_a_script_ending_with_os_exit_keeps_its_steps_and_its_exit_status(tmp_path, status):
    # Nothing after os._exit runs: the run was left as the writer thread had last
    # committed it, "stopped" with no steps (robustness sweep).
    script = write_script(tmp_path, STEPS_THEN.format(then=f"""
pid = os.fork()  # a child's os._exit passes through: the run is its parent's
if pid == 0:
    os._exit(7)
print("child exit", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
try:
    os._exit({status})
finally:
    print("never printed")
"""))
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=tvis_env(), capture_output=True,
                           text=True, timeout=60)
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == plain.returncode == status
    assert proc.stdout == plain.stdout == "child exit 7\n"
    said = [line for line in proc.stderr.splitlines() if line.startswith("tvis:")]
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert meta["steps_recorded"] == 3 and len(run.steps()) == 3
        if status == 0:
            assert said == ["tvis: recorded 3 steps (ok); run saved to runs/r"]
            assert meta["status"] == "ok"
        else:
            assert said == ["tvis: train.py:13: the script called os._exit(3): exit status 3 "
                            "(run saved to runs/r)"]
            assert (meta["status"], meta["exception"]) == ("crashed", "os._exit(3)")
            assert meta["failing_site"] == f"{script}:13"


@pytest.mark.parametrize("caller", [
    "threading.Timer(0, os._exit, [4]).start(); time.sleep(60)",  # a watchdog thread
    "signal.signal(signal.SIGUSR1, lambda *a: os._exit(4)); os.kill(os.getpid(), signal.SIGUSR1); "
    "time.sleep(60)",  # a handler, run wherever the main thread is
])
def test_os_exit_from_a_thread_or_a_signal_handler_still_ends_at_once_with_the_run_closed(
        tmp_path, caller):
    script = write_script(tmp_path, STEPS_THEN.format(then=f"import signal, threading, time\n{caller}"))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 4
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["exception"], meta["steps_recorded"]) == ("crashed", "os._exit(4)", 3)


def test_a_helper_that_calls_os_exit_is_still_listed_in_its_step(tmp_path):
    """A helper of the loop waits for its phase until it returns; os._exit() inside it
    ended the run with the helper in no phase span, out of the call tree (review)."""
    script = write_script(tmp_path, """
import os, torch
from torch import nn
model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def finish(step):
    os._exit(0)
for step in range(3):
    loss = model(torch.randn(3, 4)).sum()
    opt.zero_grad(); loss.backward(); opt.step()
    if step == 1:
        finish(step)
""")
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 0
    with RunReader(tmp_path / "runs" / "r") as run:
        finish = run.calls(1, run.call_count())[-1]
        assert (finish.name, finish.step, finish.phase) == ("finish", 2, "optimizer")
        assert any(s.first_seq <= finish.seq <= s.last_seq for s in run.phases(2))
