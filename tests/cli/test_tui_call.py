"""`tvis tui --call N`: refused, in one line, where it cannot apply."""

from __future__ import annotations

import pytest

from tvis_tui.app import TvisApp
from tvis_tui.cli import main
from tvis_tui.store import CallRecord, RunWriter


@pytest.fixture(autouse=True)
def no_terminal_app(monkeypatch):
    """The app must not start: without a terminal it would wait forever."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the app started instead of an error")
    monkeypatch.setattr(TvisApp, "run", refuse)


def _error(capsys, *argv: str) -> str:
    assert main(["tui", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tvis: error: ") and err.count("\n") == 1, err
    return err


def test_call_on_a_folder_of_runs_is_refused(tmp_path, capsys):
    with RunWriter(tmp_path / "runs" / "a") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward",
                              kind="module", name="m"))
    err = _error(capsys, str(tmp_path / "runs"), "--call", "5")
    assert f"--call 5: {tmp_path / 'runs'} is a folder, not a run" in err


def test_call_on_a_run_without_calls_says_it_has_none(tmp_path, capsys):
    with RunWriter(tmp_path / "empty") as w:
        w.put_meta(script="train.py", status="crashed")
    err = _error(capsys, str(tmp_path / "empty"), "--call", "1")
    assert err.endswith("has no calls\n") and "1 to 0" not in err
