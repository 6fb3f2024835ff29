"""Recording small purpose-built scripts in-process (torch is imported once per session)."""

from __future__ import annotations

import pytest

from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.runner import Options, Target, record
from tvis_tui.store import RunReader

from .helpers import write_script


@pytest.fixture
def run_inprocess(tmp_path):
    """Record a script in this process: returns (exit code, reader of its run)."""
    readers: list[RunReader] = []

    def run(source: str, *args: str, steps: int | None = None, max_bytes: int = 1 << 20,
            capture: CaptureOptions = CaptureOptions()):
        script = write_script(tmp_path, source)
        name = f"r{len(readers)}"
        code = record(Target(str(script), tuple(args)),
                      Options(out_dir=str(tmp_path / "runs"), name=name, steps=steps,
                              max_tensor_bytes=max_bytes, capture=capture))
        reader = RunReader(tmp_path / "runs" / name)
        readers.append(reader)
        return code, reader

    yield run
    for reader in readers:
        reader.close()
