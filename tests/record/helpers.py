"""Helpers for the recorder tests: writing small scripts and running `tvis` as a user does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def write_script(directory: Path, source: str, name: str = "train.py") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


def tvis_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def tvis_cli(*args: str, cwd: Path, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """`tvis ARGS` as a user runs it, in a fresh Python process."""
    return subprocess.run([sys.executable, "-m", "tvis_tui.cli", *args], cwd=cwd, env=tvis_env(),
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def tvis_popen(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tvis_tui.cli", *args], cwd=cwd, env=tvis_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
