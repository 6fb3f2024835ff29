"""End to end: record a bundled example with `tvis run`, open it with `tvis tui` in a real
tmux session, step forward three times and back twice, open the step view (its sample
drawn), and read the screen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tvis_tui.store import RunReader

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "image_classifier" / "train.py"
TVIS = Path(sys.executable).with_name("tvis")

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")


def _tmux(socket: str, *args: str) -> str:
    # Without COLUMNS/LINES (pytest's plugins export 80x24): the app would take them over
    # the window's real size, as shutil.get_terminal_size does.
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    return subprocess.run(["tmux", "-L", socket, *args], capture_output=True, text=True, check=True,
                          env=env).stdout


def _screen_with(socket: str, text: str, timeout: float = 20.0) -> str:
    deadline = time.monotonic() + timeout
    screen = ""
    while time.monotonic() < deadline:
        screen = _tmux(socket, "capture-pane", "-p", "-t", "tvis")
        if text in screen:
            return screen
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never appeared on screen:\n{screen}")


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory) -> Path:
    if not EXAMPLE.is_file():
        pytest.skip(f"{EXAMPLE} is not in this checkout")
    out = tmp_path_factory.mktemp("e2e")
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([str(TVIS), "run", "--steps", "1", "--out", str(out), "--name", "ic", str(EXAMPLE)],
                          capture_output=True, text=True, env=env, cwd=out, timeout=240)
    assert proc.returncode == 0, proc.stderr
    return out / "ic"


def test_step_forward_three_and_back_two_in_tmux(recorded_run, tmp_path):
    socket = f"tvis-test-{os.getpid()}"
    with RunReader(recorded_run) as reader:
        total = reader.call_count()
        call = reader.call(2)
        shapes = [s.shape for s in reader.slots(2, "output") if s.is_tensor]
    command = f"{TVIS} tui {recorded_run}"
    _tmux(socket, "new-session", "-d", "-x", "120", "-y", "40", "-s", "tvis", command)
    try:
        _screen_with(socket, f"call 1 of {total}")
        screen = ""
        for key, seq in (("s", 2), ("s", 3), ("s", 4), ("S", 3), ("S", 2)):
            _tmux(socket, "send-keys", "-t", "tvis", key)
            screen = _screen_with(socket, f"call {seq} of {total}")
        assert call.name in screen
        assert f"{Path(call.call_site.file).name}:{call.call_site.line}" in screen
        assert shapes and "[" + ", ".join(map(str, shapes[0])) + "]" in screen
        # The step view: a plotext plot and the decoded predictions, then back to the call.
        _tmux(socket, "send-keys", "-t", "tvis", "p")
        _screen_with(socket, "predictions from CrossEntropyLoss")  # read by a worker
        # The table's rows (a class and its probability) come later in the same frame, which
        # the terminal may be given in parts: wait for them too (a CI run caught the title alone).
        screen = _screen_with(socket, "%")
        assert "loss per step" in screen and " right" in screen
        assert max(len(line) for line in screen.splitlines()) == 120  # the app has the whole window
        assert any(name in screen for name in ("stripes", "checks", "ring", "blob"))
        # The first sample as its transforms made it. `--images auto` asked the terminal:
        # tmux (3.3, built without sixel) offers no image protocol, so half blocks: the
        # 16 x 16 picture, a cell per pixel column. Words are read however the pane wraps.
        screen = _screen_with(socket, "▀" * 16)
        words = " ".join(screen.split())
        assert "transform input (Compose)" in words and "float32 [3, 16, 16]" in words
        _tmux(socket, "send-keys", "-t", "tvis", "Escape")
        _screen_with(socket, f"call 2 of {total}")
        _tmux(socket, "send-keys", "-t", "tvis", "q")
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True)
