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


def train_plain_and_under_tvis(cwd: Path, script: str, plain_args: list[str], tvis_args: list[str],
                               flags: tuple[str, ...] = (), out: str = "runs",
                               timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `script` with python, then under `tvis run FLAGS`; both must succeed and print the
    same losses. Returns the tvis run's process (its stderr has tvis's summary)."""
    plain = subprocess.run([sys.executable, script, *plain_args], cwd=cwd, env=tvis_env(),
                           capture_output=True, text=True, timeout=timeout)
    assert plain.returncode == 0, plain.stderr
    traced = tvis_cli("run", *flags, "--out", out, script, *tvis_args, cwd=cwd, timeout=timeout)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout and "loss" in plain.stdout
    return traced


def assert_same_state(plain: Path, traced: Path) -> None:
    """The training state the two runs saved (params, optimizer state, RNG) is bitwise equal."""
    import torch

    _assert_identical(torch.load(plain), torch.load(traced))


def _assert_identical(a, b, path="state"):
    import torch

    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_identical(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{path}[{i}]")
    else:
        assert a == b, path
