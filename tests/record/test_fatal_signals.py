"""A recording process that dies of a fatal signal (a segfault in an extension, a C++
abort) runs no Python code to close its run: the run is read as crashed, with the signal
and the stack faulthandler wrote as it died (sweep R: it read "stopped: recorder killed")."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from .helpers import tvis_env, write_script
from tvis_tui.cli import main
from tvis_tui.store import RunReader
from tvis_tui.store.layout import FATAL_FILE

TRAIN_THEN = """
import ctypes, os, signal, time, torch
from torch import nn
m = nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(1, 4):
    loss = m(torch.randn(3, 4)).sum(); opt.zero_grad(); loss.backward(); opt.step()
time.sleep(0.8)  # the writer thread commits what the steps recorded

def native_crash():
    {crash}

{then}
"""


def _run(tmp_path, then: str, crash: str = "ctypes.string_at(0)", **env: str) -> subprocess.CompletedProcess:
    script = write_script(tmp_path, TRAIN_THEN.format(crash=crash, then=then))
    environ = {k: v for k, v in tvis_env().items() if k != "PYTHONFAULTHANDLER"} | env
    return subprocess.run([sys.executable, "-m", "tvis_tui.cli", "run", "--out", "runs", "--name", "r",
                           str(script)], cwd=tmp_path, env=environ, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.parametrize("crash, signum, says", [
    ("ctypes.string_at(0)", signal.SIGSEGV, "Fatal Python error: Segmentation fault"),
    ("os.abort()", signal.SIGABRT, "Fatal Python error: Aborted"),
])
def test_a_run_whose_process_died_of_a_fatal_signal_reads_as_crashed_with_its_stack(
        tmp_path, capsys, crash, signum, says):
    proc = _run(tmp_path, "native_crash()", crash)
    assert proc.returncode == -signum  # as under python: the signal ends the process
    assert "Fatal Python error" not in proc.stderr  # python would print none either
    run = tmp_path / "runs" / "r"
    with RunReader(run) as reader:
        meta = reader.meta()
        assert (meta["status"], meta["exception"]) == ("crashed", says)
        assert 'train.py", line 10 in native_crash' in meta["traceback"]
        assert 'train.py", line 12 in <module>' in meta["traceback"]
        assert reader.complete_steps() >= 2 and reader.stored_calls() > 0
    assert main(["ls", str(tmp_path / "runs")]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "crashed"


def test_the_report_file_is_there_while_recording_and_gone_once_the_run_ends(tmp_path):
    proc = _run(tmp_path, f"print('report file:', os.path.exists('runs/r/{FATAL_FILE}'))")
    assert proc.returncode == 0 and "report file: True" in proc.stdout
    assert not (tmp_path / "runs" / "r" / FATAL_FILE).exists()


@pytest.mark.parametrize("where", [
    "import atexit; atexit.register(native_crash)",  # after the run has closed
    "pid = os.fork()\nif pid == 0:\n    native_crash()\nos.waitpid(pid, 0)",  # in a fork
])
def test_a_handler_the_script_turns_on_is_left_as_it_is(tmp_path, where):
    """Review: closing the run (and forking) turned faulthandler off, the script's own
    handler with it (torchelastic's `@record` turns one on): its report never came."""
    proc = _run(tmp_path, f"import faulthandler, sys\nfaulthandler.enable(sys.stderr)\n{where}")
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert 'in native_crash' in proc.stderr


def test_a_forked_child_dying_of_a_signal_is_not_the_runs_end(tmp_path):
    """A DataLoader worker's segfault is its parent's exception; the parent killed later
    (nothing written at its end) is a stopped run, not one crashed by its child's signal."""
    proc = _run(tmp_path, """
pid = os.fork()
if pid == 0:
    native_crash()
os.waitpid(pid, 0)
os.kill(os.getpid(), signal.SIGKILL)
""")
    assert proc.returncode == -signal.SIGKILL
    with RunReader(tmp_path / "runs" / "r") as reader:
        meta = reader.meta()
        assert meta["status"] == "running" and "exception" not in meta  # read as stopped by `ls`


def test_a_user_who_turned_faulthandler_on_gets_its_report_on_stderr(tmp_path):
    proc = _run(tmp_path, "native_crash()", PYTHONFAULTHANDLER="1")
    assert proc.returncode == -signal.SIGSEGV
    assert "Fatal Python error: Segmentation fault" in proc.stderr
    assert not (tmp_path / "runs" / "r" / FATAL_FILE).exists()
