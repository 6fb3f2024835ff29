"""Paths to the bundled scripts and fixtures the vram tests read; helpers that write
purpose-built scripts and run the CLI in-process."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPTS = HERE / "scripts"
FIXTURES = HERE / "fixtures"


@pytest.fixture
def script():
    return lambda name: str(SCRIPTS / f"{name}.py")


@pytest.fixture
def fixture():
    return lambda name: str(FIXTURES / f"{name}.py")


@pytest.fixture
def write(tmp_path):
    """Writes a purpose-built script (text, or bytes as they are) and gives its path."""
    def write(name: str, source: str | bytes) -> str:
        path = tmp_path / name
        if isinstance(source, bytes):
            path.write_bytes(source)
        else:
            path.write_text(textwrap.dedent(source))
        return str(path)
    return write


@pytest.fixture
def tvis(capsys):
    """Runs `tvis ARGS...` in-process: (exit code, stdout, stderr)."""
    from tvis_tui.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err
    return run
