"""Under an output encoding that lacks characters tvis prints (PYTHONIOENCODING=ascii, a
latin-1 terminal), its commands print "?" for them instead of failing with a traceback;
`tvis run` leaves the script's own prints to fail as they do under python."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _tvis(*argv: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONIOENCODING": "ascii", "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "tvis_tui.cli", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


@pytest.mark.parametrize("argv", [
    ("check", "--explain", "TV034"),  # its explanation is not all ASCII
    ("vram", "examples/image_classifier/train.py", "--gpu", "a100-40gb"),
])
def test_a_command_prints_what_the_encoding_lacks_as_question_marks(argv):
    proc = _tvis(*argv)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "?" in proc.stdout


def test_run_leaves_the_scripts_own_prints_as_python_has_them(tmp_path):
    script = tmp_path / "say.py"
    script.write_text('print("naïve")\n')
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONIOENCODING": "ascii"}, timeout=60)
    recorded = _tvis("run", "--out", str(tmp_path / "runs"), str(script), cwd=tmp_path)
    assert plain.returncode == 1 and "UnicodeEncodeError" in plain.stderr
    assert recorded.returncode == 1 and "UnicodeEncodeError" in recorded.stderr and recorded.stdout == ""
