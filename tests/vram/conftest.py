"""Paths to the bundled training scripts and fixtures the vram tests read."""

from __future__ import annotations

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
