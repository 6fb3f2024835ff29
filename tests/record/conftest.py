"""Running small purpose-built scripts under the recorder, in-process or through the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tvis_tui.record.runner import Options, Target, record
from tvis_tui.store import RunReader

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def write_script(directory: Path, source: str, name: str = "train.py") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture
def run_inprocess(tmp_path):
    """Record a script in this process (torch is imported once): returns (exit code, reader)."""
    readers: list[RunReader] = []

    def run(source: str, *args: str, steps: int | None = None, max_bytes: int = 1 << 20):
        script = write_script(tmp_path, source)
        name = f"r{len(readers)}"
        code = record(Target(str(script), tuple(args)),
                      Options(out_dir=str(tmp_path / "runs"), name=name, steps=steps,
                              max_tensor_bytes=max_bytes))
        reader = RunReader(tmp_path / "runs" / name)
        readers.append(reader)
        return code, reader

    yield run
    for reader in readers:
        reader.close()


def tvis_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


def tvis_cli(*args: str, cwd: Path, timeout: float = 60, **kwargs) -> subprocess.CompletedProcess:
    """`tvis ARGS` as a user runs it, in a fresh Python process."""
    return subprocess.run([sys.executable, "-m", "tvis_tui.cli", *args], cwd=cwd, env=tvis_env(),
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def tvis_popen(*args: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tvis_tui.cli", *args], cwd=cwd, env=tvis_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
