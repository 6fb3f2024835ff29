"""`tvis tui` on bad paths: one line on stderr, exit 2, no traceback; docs stay in sync."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tvis_tui.app import TvisApp
from tvis_tui.cli import main
from tvis_tui.screens.help import key_reference_markdown
from tvis_tui.store import CallRecord, RunWriter

ROOT = Path(__file__).resolve().parents[2]


def _error(capsys, *argv: str) -> str:
    assert main(["tui", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tvis: error: ") and err.count("\n") == 1, err
    return err


def test_missing_path(tmp_path, capsys):
    assert "no such run or folder" in _error(capsys, str(tmp_path / "nope"))


def test_folder_without_runs(tmp_path, capsys):
    (tmp_path / "notes").mkdir()
    assert "no tvis runs here" in _error(capsys, str(tmp_path))


def test_a_file_is_not_a_run(tmp_path, capsys):
    (tmp_path / "train.py").write_text("print(1)\n")
    assert "train.py" in _error(capsys, str(tmp_path / "train.py"))


def test_an_unknown_image_method(healthy_run, capsys, monkeypatch):
    with pytest.raises(SystemExit) as exited:  # argparse's own usage error
        main(["tui", str(healthy_run), "--images", "sixels"])
    assert exited.value.code == 2 and "invalid choice: 'sixels'" in capsys.readouterr().err
    monkeypatch.setenv("TVIS_IMAGES", "sixels")
    err = _error(capsys, str(healthy_run))
    assert "'sixels' is not a drawing method; use one of auto, sixel, kitty, halfcell" in err


def test_corrupt_run(tmp_path, capsys):
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"garbage" * 100)
    assert "junk" in _error(capsys, str(tmp_path / "junk"))


def test_call_number_out_of_range(healthy_run, capsys):
    assert "calls 1 to 39" in _error(capsys, str(healthy_run), "--call", "40")


@pytest.fixture
def no_terminal_app(monkeypatch):
    """For errors found only once the run is read: the app must not start instead (without
    a terminal it would wait forever)."""
    def refuse(self, *args, **kwargs):
        raise AssertionError("the app started instead of an error")
    monkeypatch.setattr(TvisApp, "run", refuse)


def test_call_on_a_folder_of_runs_is_refused(tmp_path, capsys, no_terminal_app):
    with RunWriter(tmp_path / "runs" / "a") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward",
                              kind="module", name="m"))
    err = _error(capsys, str(tmp_path / "runs"), "--call", "5")
    assert f"--call 5: {tmp_path / 'runs'} is a folder, not a run" in err


def test_call_on_a_run_without_calls_says_it_has_none(tmp_path, capsys, no_terminal_app):
    with RunWriter(tmp_path / "empty") as w:
        w.put_meta(script="train.py", status="crashed")
    err = _error(capsys, str(tmp_path / "empty"), "--call", "1")
    assert err.endswith("has no calls\n") and "1 to 0" not in err


def test_a_failed_app_exits_non_zero(healthy_run, monkeypatch):
    # Textual prints the traceback as the app ends; the shell must see the failure too.
    def fails(self, *args, **kwargs):
        self._return_code = 1
    monkeypatch.setattr(TvisApp, "run", fails)
    assert main(["tui", str(healthy_run), "--images", "halfcell"]) == 1


def test_key_reference_doc_matches_the_bindings():
    doc = (ROOT / "docs" / "tui-keys.md").read_text()
    assert doc == key_reference_markdown(), "run: python -m tvis_tui.screens.help > docs/tui-keys.md"


@pytest.mark.parametrize("module", ["tvis_tui.app", "tvis_tui.commands.tui"])
def test_viewer_never_imports_torch_or_the_recorder(module):
    code = (f"import sys, {module}, tvis_tui.screens.debugger, tvis_tui.screens.values; "
            "bad = [m for m in sys.modules if m == 'torch' or m.startswith('tvis_tui.record')]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
