"""Runs that end in ways a store could lose them by: an exception naming a file whose name
is not UTF-8, a crash whose traceback cannot be written, a script that deletes the run's
folder, a SIGTERM from a scheduler. Each keeps its record and says how it ended
(robustness sweep)."""

from __future__ import annotations

from .helpers import tvis_cli, write_script
from tvis_tui.store import RunReader

STEPS_THEN = """
import os, torch
from torch import nn
m = nn.Linear(4, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
for step in range(1, 4):
    loss = m(torch.randn(3, 4)).sum(); opt.zero_grad(); loss.backward(); opt.step()
{then}
"""


def test_a_crash_naming_a_file_whose_name_is_not_utf8_keeps_the_run_and_the_crash(tmp_path):
    then = "path = os.fsdecode(b'/data/img_\\xff.png')\nraise ValueError('cannot decode ' + path)"
    script = write_script(tmp_path, STEPS_THEN.format(then=then))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 1 and "incomplete" not in proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["status"], meta["steps_recorded"]) == ("crashed", 3)
        assert meta["exception"] == "ValueError: cannot decode /data/img_\\xff.png"


def test_a_latin1_script_is_stored_as_python_read_it(tmp_path):
    script = tmp_path / "train.py"
    source = "# -*- coding: latin-1 -*-\nname = 'café'\n" + STEPS_THEN.format(then="")
    script.write_bytes(source.encode("latin-1"))
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        assert run.source(str(script)) == source
