"""`tvis tui` on bad paths: one line on stderr, exit 2, no traceback; docs stay in sync."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest

from tvis_tui.app import TvisApp
from tvis_tui.cli import main
from tvis_tui.screens.help import key_reference_markdown
from tvis_tui.store import CallRecord, RunWriter

ROOT = Path(__file__).resolve().parents[2]


def _error(capsys, *argv: str) -> str:
    assert main(["tui", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tvis: error: ") and err.count("\n") == 1, err
    return err


def test_missing_path(tmp_path, capsys):
    assert "no such run or folder" in _error(capsys, str(tmp_path / "nope"))


def test_folder_without_runs(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert "no tvis runs here" in _error(capsys, str(tmp_path))


def test_a_file_is_not_a_run(tmp_path, capsys):
    (tmp_path / "train.py").write_text("print(1)\n")
    assert "train.py" in _error(capsys, str(tmp_path / "train.py"))


def test_an_unknown_image_method(healthy_run, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        main(["tui", str(healthy_run), "--images", "sixels"])
    assert exited.value.code == 2 and "invalid choice: 'sixels'" in capsys.readouterr().err
    monkeypatch.setenv("TVIS_IMAGES", "sixels")
    err = _error(capsys, str(healthy_run))
    assert "'sixels' is not a drawing method; use one of auto, sixel, kitty, halfcell" in err


def test_corrupt_run(tmp_path, capsys):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"garbage" * 100)
    assert "junk" in _error(capsys, str(tmp_path / "junk"))


def test_call_number_out_of_range(healthy_run, capsys):
    assert "calls 1 to 39" in _error(capsys, str(healthy_run), "--call", "40")


@pytest.fixture
def no_terminal_app(monkeypatch):
    """For errors found only once the run is read: the app must not start instead (without
    a terminal it would wait forever)."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the app started instead of an error")
    monkeypatch.setattr(TvisApp, "run", refuse)


def test_call_on_a_folder_of_runs_is_refused(tmp_path, capsys, no_terminal_app):
    with RunWriter(tmp_path / "runs" / "a") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward",
                              kind="module", name="m"))
    err = _error(capsys, str(tmp_path / "runs"), "--call", "5")
    assert f"--call 5: {tmp_path / 'runs'} is a folder, not a run" in err


def test_call_on_a_run_without_calls_says_it_has_none(tmp_path, capsys, no_terminal_app):
    with RunWriter(tmp_path / "empty") as w:
        w.put_meta(script="train.py", status="crashed")
    err = _error(capsys, str(tmp_path / "empty"), "--call", "1")
    assert err.endswith("has no calls\n") and "1 to 0" not in err


def test_a_failed_app_exits_non_zero(healthy_run, monkeypatch):
    # Textual prints the traceback as the app ends; the shell must see the failure too.
    def fails(self, *args, **kwargs):
        self._return_code = 1
    monkeypatch.setattr(TvisApp, "run", fails)
    monkeypatch.setattr("tvis_tui.commands.tui._need_a_terminal", lambda: None)
    assert main(["tui", str(healthy_run), "--images", "halfcell"]) == 1


def test_key_reference_doc_matches_the_bindings():
    doc = (ROOT / "docs" / "tui-keys.md").read_text()
    assert doc == key_reference_markdown(), "run: python -m tvis_tui.screens.help > docs/tui-keys.md"


@pytest.mark.parametrize("module", ["tvis_tui.app", "tvis_tui.commands.tui"])
def test_viewer_never_imports_torch_or_the_recorder(module):
    code = (f"import sys, {module}, tvis_tui.screens.debugger, tvis_tui.screens.values; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('tvis_tui.record')]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _in_a_pty(argv: list[str], *, stdout_to_a_pipe: bool = False) -> tuple[int, str]:
    """Runs `argv` with a pseudo-terminal for stdin, stdout and stderr (stdout a pipe when
    asked): its exit status and what it wrote to the terminal."""
    master, slave = pty.openpty()
    proc = subprocess.run(argv, stdin=slave, stdout=subprocess.PIPE if stdout_to_a_pipe else slave,
                          stderr=slave, timeout=60)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: nothing left, the other side closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.returncode, out.decode(errors="replace")


NO_TERMINAL = "(over ssh: ssh -t; to read a run in a script: tvis export)"


def test_without_a_terminal_it_says_so_instead_of_hanging(healthy_run):
    # `ssh host tvis tui runs` without -t, or cron: it hung, writing escape codes to stderr.
    proc = subprocess.run([sys.executable, "-m", "tvis_tui.cli", "tui", str(healthy_run)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr == f"tvis: error: tvis tui needs a terminal, and its stdin, stdout and stderr are not one {NO_TERMINAL}\n"


def test_with_its_output_piped_it_names_the_stream_that_is_not_a_terminal(healthy_run):
    # `tvis tui runs | cat` drew at 80 x 24 whatever the terminal's size.
    code, written = _in_a_pty([sys.executable, "-m", "tvis_tui.cli", "tui", str(healthy_run)], stdout_to_a_pipe=True)
    assert code == 2 and f"tvis: error: tvis tui needs a terminal, and its stdout is not one {NO_TERMINAL}" in written


def _answering(master: int, written: bytearray) -> None:
    """A terminal like xterm on the far side of a pty: it answers the device-attributes
    query and the cell-size query (not kitty's graphics query), keeping what was written."""
    answers = {b"\x1b[c": b"\x1b[?62c", b"\x1b[16t": b"\x1b[6;20;10t"}
    seen = 0
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side closed
            return
        if not chunk:
            return
        written += chunk
        for query, answer in answers.items():
            if query in written[seen:]:
                os.write(master, answer)
        seen = len(written)


def test_a_key_typed_while_it_starts_leaves_no_terminal_answer_to_be_read_as_keys():
    # textual-image asks the terminal what it can draw and stops reading at a typed key;
    # the answers behind it were read by the app as keys (a search opened with "2c" in it).
    probe = ("import select, termios, tty\n"
             "from tvis_tui.widgets.picture import choose\n"
             "choose('auto')\n"
             "tty.setcbreak(0, termios.TCSANOW)\n"  # not TCSAFLUSH: what is left is the point
             "print('left over:', bool(select.select([0], [], [], 0.3)[0]))\n")
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    os.write(master, b"x")  # typed while tvis started
    written = bytearray()
    terminal = threading.Thread(target=_answering, args=(master, written), daemon=True)
    terminal.start()
    proc = subprocess.run([sys.executable, "-c", probe], stdin=slave, stdout=slave, stderr=slave, timeout=60)
    os.close(slave)
    terminal.join(10)
    os.close(master)
    assert proc.returncode == 0 and b"left over: False" in written, bytes(written)


async def test_ctrl_z_suspends_the_app(healthy_run, monkeypatch):
    from tvis_tui.app import make_app

    suspended = []
    monkeypatch.setattr(TvisApp, "action_suspend_process", lambda self: suspended.append(True))
    async with make_app(healthy_run).run_test() as pilot:
        await pilot.pause()
        await pilot.press("ctrl+z")
        await pilot.pause()
    assert suspended == [True]
