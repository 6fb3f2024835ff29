"""Damaged runs and dangerous paths: one line on stderr and exit 2, never a crash, and one
bad run never hides the good ones (`tvis ls`, `tvis export`, `tvis tui`)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tvis_tui.cli import main
from tvis_tui.store import CallRecord, RunWriter, Slot, StepRecord

PAGE = 4096


def _write_run(path: Path, calls: int = 40) -> Path:
    """A finished run of `calls` calls, each with a 1 KiB output: ~25 LMDB pages."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running")
        for seq in range(1, calls + 1):
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward",
                                  kind="module", name=f"m{seq}"))
            w.put_slot(seq, Slot("output", 0, "out", shape=(256,), dtype="float32",
                                 values_dtype="float32"), np.zeros(256, np.float32).tobytes())
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=calls))
        w.close(status="ok", steps_recorded=1)
    return path


def _truncated(src: Path, dst: Path, size: int) -> Path:
    shutil.copytree(src, dst)
    os.truncate(dst / "data.mdb", size)
    return dst


def _tvis(*argv: str) -> subprocess.CompletedProcess[str]:
    """tvis in a child process: for cases where a regression would be a SIGBUS, which
    would otherwise kill the whole test run."""
    return subprocess.run([sys.executable, "-m", "tvis_tui.cli", *argv], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60)


def _one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    assert captured.err.startswith("tvis: error: ") and captured.err.count("\n") == 1, captured.err
    return captured.err


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    return _write_run(tmp_path_factory.mktemp("good_run") / "good")


# -- 1: a truncated data.mdb (LMDB maps the file: a missing page is a SIGBUS) -----------

@pytest.fixture(scope="module")
def truncated_runs(good_run, tmp_path_factory) -> dict[str, Path]:
    full = (good_run / "data.mdb").stat().st_size
    assert full > 8 * PAGE  # else the sizes below would not cut pages off
    root = tmp_path_factory.mktemp("truncated")
    sizes = {"half": full // 2 + 17, "two-pages": 2 * PAGE, "one-byte-short": full - 1}
    return {name: _truncated(good_run, root / name, size) for name, size in sizes.items()}


@pytest.mark.parametrize("size", ["half", "two-pages", "one-byte-short"])
@pytest.mark.parametrize("command", ["ls", "export", "tui"])
def test_truncated_run_is_one_line_error_not_a_bus_error(truncated_runs, command, size):
    # In a child process: before the fix this killed the process (SIGBUS, rc 135).
    run = truncated_runs[size]
    proc = _tvis(command, str(run))
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith(f"tvis: error: {run}: corrupt or truncated run (data.mdb is ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_empty_data_file_says_so(tmp_path, capsys):
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "data.mdb").write_bytes(b"")
    assert main(["export", str(tmp_path / "victim")]) == 2
    assert "corrupt or truncated run (data.mdb is empty)" in _one_error_line(capsys)


# -- 2: `-o` inside the run being read --------------------------------------------------

@pytest.mark.parametrize("inside", ["data.mdb", "lock.mdb", "export.jsonl", "../{run}/x.json"])
def test_export_refuses_output_inside_the_run(good_run, tmp_path, capsys, inside):
    run = shutil.copytree(good_run, tmp_path / "run")
    before = (run / "data.mdb").read_bytes()
    output = run / inside.format(run=run.name)
    proc = _tvis("export", str(run), "-o", str(output))  # truncating data.mdb: SIGBUS
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert proc.stderr.startswith(f"tvis: error: -o {output}: inside the run folder {run};")
    assert (run / "data.mdb").read_bytes() == before  # the recording is intact
    assert sorted(p.name for p in run.iterdir()) == ["data.mdb", "lock.mdb"]
    assert main(["ls", str(run)]) == 0 and "ok" in capsys.readouterr().out


def test_export_refuses_output_inside_another_run(good_run, tmp_path):
    # `-o runs/b/data.mdb` while exporting runs/a overwrote run b (robustness sweep).
    run = shutil.copytree(good_run, tmp_path / "a")
    other = shutil.copytree(good_run, tmp_path / "b")
    before = (other / "data.mdb").read_bytes()
    proc = _tvis("export", str(run), "-o", str(other / "data.mdb"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "inside the run folder" in proc.stderr and "would damage that run" in proc.stderr
    assert (other / "data.mdb").read_bytes() == before


def test_export_refuses_a_hard_link_to_the_run_data(good_run, tmp_path, capsys):
    run = shutil.copytree(good_run, tmp_path / "run")
    link = tmp_path / "elsewhere.mdb"
    os.link(run / "data.mdb", link)
    proc = _tvis("export", str(run), "-o", str(link))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "the same file as one in the run folder" in proc.stderr
    assert (run / "data.mdb").stat().st_size > 0


def test_export_next_to_the_run_still_works(good_run, tmp_path):
    out = tmp_path / "run.jsonl"  # beside the run folder, not inside it
    assert main(["export", str(good_run), "-o", str(out)]) == 0
    assert out.read_text().count("\n") == 1 + 1 + 40  # meta, step, calls


def test_export_to_a_missing_folder_is_one_line_error(good_run, tmp_path, capsys):
    assert main(["export", str(good_run), "-o", str(tmp_path / "nope" / "x.jsonl")]) == 2
    assert "cannot write (No such file or directory)" in _one_error_line(capsys)


def test_an_export_cut_short_by_a_full_disk_leaves_no_file(good_run, tmp_path, capsys, monkeypatch):
    from tvis_tui import export

    def full_disk(reader, out):
        out.write("{}\n" * 10)
        out.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(export, "export_jsonl", full_disk)
    out = tmp_path / "run.jsonl"
    assert main(["export", str(good_run), "-o", str(out)]) == 2
    assert "cannot write (No space left on device)" in _one_error_line(capsys) and not out.exists()


def test_a_failed_export_leaves_the_file_that_was_there_and_no_partial_one(good_run, tmp_path, capsys,
                                                                             monkeypatch):
    from tvis_tui import export

    def full_disk(reader, out):
        out.write("{}\n" * 10)
        raise OSError(28, "No space left on device")

    out = tmp_path / "run.jsonl"
    out.write_text("yesterday's export\n")
    monkeypatch.setattr(export, "export_jsonl", full_disk)
    assert main(["export", str(good_run), "-o", str(out)]) == 2
    assert "cannot write (No space left on device)" in _one_error_line(capsys)
    assert out.read_text() == "yesterday's export\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.jsonl"]


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="Linux's /dev/full")
def test_an_export_to_a_device_that_fails_leaves_the_device(good_run, tmp_path, capsys):
    # `-o /dev/full` removed the system's /dev/full: a failed export unlinked its target.
    device = tmp_path / "full"
    os.symlink("/dev/full", device)
    assert main(["export", str(good_run), "-o", str(device)]) == 2
    assert "cannot write (No space left on device)" in _one_error_line(capsys)
    assert os.path.exists("/dev/full") and device.is_symlink()


def test_an_export_through_a_symlink_writes_the_file_it_points_to(good_run, tmp_path):
    real = tmp_path / "exports" / "run.jsonl"
    real.parent.mkdir()
    real.write_text("old\n")
    (tmp_path / "latest.jsonl").symlink_to(real)
    assert main(["export", str(good_run), "-o", str(tmp_path / "latest.jsonl")]) == 0
    assert (tmp_path / "latest.jsonl").is_symlink() and real.read_text().count("\n") == 42


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="Linux's /dev/full")
@pytest.mark.parametrize("command", [["export"], ["export", "--format", "json"], ["ls"]])
def test_standard_output_on_a_full_disk_is_a_one_line_error(good_run, command):
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-m", "tvis_tui.cli", *command, str(good_run)],
                              stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
    assert proc.returncode == 1
    assert proc.stderr == "tvis: error: cannot write (No space left on device)\n"


# -- 3: one unreadable run among good ones ----------------------------------------------

@pytest.fixture
def mixed_folder(good_run, tmp_path) -> Path:
    runs = tmp_path / "runs"
    shutil.copytree(good_run, runs / "good")
    (runs / "victim").mkdir()
    (runs / "victim" / "data.mdb").write_bytes(b"")  # what the tester's runs4/victim held
    _truncated(good_run, runs / "trunc", 70000)
    return runs


def test_ls_lists_good_runs_and_marks_the_unreadable_ones(mixed_folder):
    proc = _tvis("ls", str(mixed_folder))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in lines[1:] if line.strip()}
    assert rows["good"][-1] == "ok" and rows["good"][4:6] == ["1", "40"]  # steps, calls
    assert rows["trunc"][-1] == "unreadable" and rows["victim"][-1] == "unreadable"
    assert [line.split()[0] for line in lines[1:4]] == ["good", "trunc", "victim"]
    assert "trunc: corrupt or truncated run (data.mdb is 70,000 bytes; its pages need" in "\n".join(lines)
    assert "victim: corrupt or truncated run (data.mdb is empty)" in lines


def test_tui_picker_shows_unreadable_run_and_opening_it_says_why(mixed_folder):
    from textual.widgets import DataTable

    from tvis_tui.app import make_app
    from tvis_tui.screens.run_picker import RunPickerScreen

    # In this process a regression would be a SIGBUS: the truncated run is covered above.
    shutil.rmtree(mixed_folder / "trunc")

    async def scenario() -> tuple[list[list[str]], list[str], object]:
        app = make_app(mixed_folder)
        async with app.run_test(size=(120, 20)) as pilot:
            await pilot.pause()
            table = app.screen.query_one(DataTable)
            rows = [[str(cell) for cell in table.get_row_at(r)] for r in range(table.row_count)]
            table.move_cursor(row=1)
            await pilot.press("enter")
            await pilot.pause()
            return rows, [n.message for n in app._notifications], app.screen

    rows, notes, screen = asyncio.run(scenario())
    assert [(r[0], r[1]) for r in rows] == [("good", "ok"), ("victim", "unreadable")]
    assert isinstance(screen, RunPickerScreen)  # not opened
    assert notes == [f"{mixed_folder / 'victim'}: corrupt or truncated run (data.mdb is empty)"]


# -- 8: the data file instead of its folder ---------------------------------------------

def test_export_of_the_data_file_names_the_run_folder(good_run, capsys):
    assert main(["export", str(good_run / "data.mdb")]) == 2
    err = _one_error_line(capsys)
    assert f"not a run folder (a file; the run is {good_run})" in err
    assert "no such run folder" not in err


def test_ls_of_the_data_file_names_the_run_folder(good_run, capsys):
    assert main(["ls", str(good_run / "data.mdb")]) == 2
    assert f"(a file; the run is {good_run})" in _one_error_line(capsys)


def test_export_of_another_file_says_it_is_a_file(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("x")
    assert main(["export", str(tmp_path / "notes.txt")]) == 2
    assert "not a run folder (a file)" in _one_error_line(capsys)


def test_a_run_copied_without_its_lock_file_is_read_without_making_one(good_run, tmp_path, capsys):
    # A lock file is LMDB's mapped memory: made on a full disk it would kill the process.
    run = tmp_path / "copied"
    run.mkdir()
    shutil.copy(good_run / "data.mdb", run / "data.mdb")
    assert main(["export", str(run)]) == 0 and '"record": "call"' in capsys.readouterr().out
    assert [p.name for p in run.iterdir()] == ["data.mdb"]


# -- 9: a malformed record (bit rot, or a run made by hand) ------------------------------

class _Payload:
    """Unpickled, it would leave a file behind: opening a run must never run its code."""

    def __init__(self, witness: Path) -> None:
        self.witness = witness

    def __reduce__(self):
        return (Path.write_text, (self.witness, "code ran"))


def _with_record(good_run: Path, dst: Path, db: bytes, key: bytes, value: bytes) -> Path:
    dst.mkdir(parents=True)
    shutil.copy(good_run / "data.mdb", dst / "data.mdb")
    _put(dst, db, key, value)
    return dst


def _put(run: Path, db: bytes, key: bytes, value: bytes) -> None:
    import lmdb

    env = lmdb.open(str(run), max_dbs=64, lock=False)
    handle = env.open_db(db)  # before the write transaction: opening one takes its own
    with env.begin(write=True) as txn:
        txn.put(key, value, db=handle)
    env.close()


def _malformed(good_run: Path, tmp_path: Path) -> dict[str, Path]:
    import pickle

    from tvis_tui.store import codec, layout

    witness = tmp_path / "witness"
    pickled = pickle.dumps(_Payload(witness))
    return {name: _with_record(good_run, tmp_path / "runs" / name, db, key, value) for name, db, key, value in [
        ("pickled_call", layout.CALLS, codec.u64(2), pickled),
        ("pickled_meta", layout.META, b"status", pickled),
        ("not_msgpack", layout.CALLS, codec.u64(2), b"\xc1\xc1"),
        ("call_is_a_list", layout.CALLS, codec.u64(2), codec.pack([1, 2])),
        ("step_is_a_number", layout.STEPS, codec.u32(1), codec.pack(7)),
        ("schema_as_text", layout.META, b"schema_version", codec.pack("1")),
        # A key cut short, and a seq whose next does not fit a key (robustness sweep).
        ("short_call_key", layout.CALLS, b"\x01", codec.pack({"seq": 1})),
        ("largest_seq", layout.CALLS, codec.u64(2), codec.pack(
            {**CallRecord(seq=2, parent=0, depth=0, step=1, phase="forward", kind="module", name="m").to_wire(),
             "seq": 2**64 - 1})),
        ("largest_parent", layout.CALLS, codec.u64(2), codec.pack(
            {**CallRecord(seq=2, parent=0, depth=0, step=1, phase="forward", kind="module", name="m").to_wire(),
             "parent": 2**64 - 1})),
    ]}


def test_a_malformed_record_is_a_one_line_error_and_runs_no_code(good_run, tmp_path):
    runs = _malformed(good_run, tmp_path)
    for name, run in runs.items():
        out = tmp_path / f"{name}.jsonl"
        proc = _tvis("export", str(run), "-o", str(out))
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1, (name, proc.stderr)
        assert proc.stderr.startswith(f"tvis: error: {run}: corrupt run (")
        assert not out.exists()  # no cut export left behind
    # Named: which record is damaged (sweep Q)
    assert "a malformed call record, call 2: ExtraData" in _tvis("export", str(runs["pickled_call"])).stderr
    assert "its schema version is '1'" in _tvis("export", str(runs["schema_as_text"])).stderr
    assert not (tmp_path / "witness").exists()


def test_ls_lists_runs_with_a_malformed_record_as_unreadable_beside_good_ones(good_run, tmp_path):
    _malformed(good_run, tmp_path)
    shutil.copytree(good_run, tmp_path / "runs" / "good")
    proc = _tvis("ls", str(tmp_path / "runs"))
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()[1:] if line.strip()}
    assert rows["good"].rstrip().endswith("ok")
    for name in ("pickled_meta", "schema_as_text"):  # ls reads a finished run's meta only
        assert rows[name].rstrip().endswith("unreadable"), rows
    assert not (tmp_path / "witness").exists()


def test_tui_closes_a_run_found_malformed_while_shown_with_its_reason(good_run, tmp_path):
    from textual.widgets import DataTable

    from tvis_tui.app import make_app
    from tvis_tui.screens.run_picker import RunPickerScreen

    runs = _malformed(good_run, tmp_path)
    bad = runs["pickled_call"]

    async def through_the_list() -> tuple[object, list[str]]:
        app = make_app(bad.parent)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            table = app.screen.query_one(DataTable)
            names = [str(table.get_row_at(r)[0]) for r in range(table.row_count)]
            table.move_cursor(row=names.index("pickled_call"))
            await pilot.press("enter")
            await pilot.pause()
            await pilot.press("n", "n")  # to call 2, which cannot be read
            await pilot.pause()
            return app.screen, [n.message for n in app._notifications]

    screen, notes = asyncio.run(through_the_list())
    assert isinstance(screen, RunPickerScreen)
    assert any(n.startswith(f"{bad}: corrupt run (a malformed call record") for n in notes), notes

    async def on_its_own() -> tuple[int | None, str | None]:
        app = make_app(bad)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            await pilot.press("n", "n")
            await pilot.pause()
        return app.return_code, app.damage

    code, damage = asyncio.run(on_its_own())
    assert code == 2 and damage.startswith(f"{bad}: corrupt run (a malformed call record")
    assert not (tmp_path / "witness").exists()


# -- 10: a well-formed record whose fields have the wrong types -------------------------

_CALL = {"seq": 2, "parent": 0, "depth": 0, "step": 1, "phase": "forward", "kind": "module", "name": "m2"}
_STEP = {"step": 1, "first_seq": 1, "last_seq": 40}
_SLOT = {"role": "output", "index": 0, "path": "out", "shape": [256], "dtype": "float32",
         "values_dtype": "float32"}


def _mistyped() -> dict[str, tuple[bytes, bytes, Any, str]]:
    """name -> (database, key, record, what the error names)."""
    from tvis_tui.store import codec, layout

    call, step, slot = codec.u64(2), codec.u32(1), codec.slot_key(2, 1, 0)
    return {
        "call name a number": (layout.CALLS, call, {**_CALL, "name": 5}, "call record, call 2: TypeError: field 'name' holds int 5"),
        "call seq as text": (layout.CALLS, call, {**_CALL, "seq": "2"}, "field 'seq' holds str '2'"),
        "negative parent": (layout.CALLS, call, {**_CALL, "parent": -3}, "field 'parent' holds int -3"),
        "step a list": (layout.CALLS, call, {**_CALL, "step": [1]}, "field 'step' holds list [1]"),
        "no phase": (layout.CALLS, call, {**_CALL, "phase": None}, "field 'phase' holds NoneType None"),
        "site as text": (layout.CALLS, call, {**_CALL, "call_site": "x.py:3"}, "field 'call_site' holds str"),
        "site's line as text": (layout.CALLS, call, {**_CALL, "call_site": {"file": "x.py", "line": "a"}},
                                "field 'line' holds str 'a'"),
        "site's file id as text": (layout.CALLS, call, {**_CALL, "def_site": ["a", 3]},
                                   "field 'def_site.file' holds str 'a'"),
        "lrs as text": (layout.CALLS, call, {**_CALL, "kind": "optimizer", "extra": {"lrs": "abc"}},
                        "field 'extra.lrs' holds str 'abc'"),
        "step loss as text": (layout.STEPS, step, {**_STEP, "loss": "x"}, "step record, step 1: TypeError: field 'loss'"),
        "step extra as text": (layout.STEPS, step, {**_STEP, "extra": "x"}, "field 'extra' holds str 'x'"),
        "step wall time as text": (layout.STEPS, step, {**_STEP, "extra": {"wall_ns": "1 ms"}},
                                   "field 'extra.wall_ns' holds str '1 ms'"),
        "phase times a list": (layout.STEPS, step, {**_STEP, "phase_ns": [1]}, "field 'phase_ns' holds list [1]"),
        "step past its key": (layout.STEPS, step, {**_STEP, "step": 2**32}, "field 'step' holds int 4294967296"),
        "histogram of text": (layout.SLOTS, slot, {**_SLOT, "hist": ["a"]}, "slot record, call 2: TypeError: field 'hist'"),
        "count as text": (layout.SLOTS, slot, {**_SLOT, "stats": {"numel": "x"}}, "field 'numel' holds str 'x'"),
        "status a number": (layout.META, b"status", 5, "meta record: TypeError: field 'status' holds int 5"),
        "failing seq as text": (layout.META, b"failing_seq", "3", "field 'failing_seq' holds str '3'"),
        "negative step count": (layout.META, b"steps_recorded", -5, "field 'steps_recorded' holds -5, a negative count"),
    }


@pytest.mark.parametrize("case", list(_mistyped()))
def test_a_field_of_the_wrong_type_is_a_one_line_error_naming_it(good_run, tmp_path, capsys, case):
    from tvis_tui.store import codec

    db, key, record, says = _mistyped()[case]
    run = _with_record(good_run, tmp_path / "run", db, key, codec.pack(record))
    assert main(["export", str(run), "-o", str(tmp_path / "out.jsonl")]) == 2
    err = _one_error_line(capsys)
    assert err.startswith(f"tvis: error: {run}: corrupt run (a malformed ") and says in err, err
    assert not (tmp_path / "out.jsonl").exists()


def test_a_meta_field_that_decides_how_to_read_the_run_is_named_when_damaged(good_run, tmp_path, capsys):
    from tvis_tui.store import layout

    run = _with_record(good_run, tmp_path / "run", layout.META, b"status", b"\xc1")
    assert main(["export", str(run)]) == 2
    assert _one_error_line(capsys).startswith(f"tvis: error: {run}: corrupt run (a malformed meta 'status': ")


def test_a_damaged_key_is_named_with_its_run(data_run, tmp_path, capsys):
    from tvis_tui.store import codec, samples

    run = _with_record(data_run, tmp_path / "run", samples.BATCHES, b"\x00\x00\x00\x05", codec.pack(_BATCH))
    assert main(["export", str(run)]) == 1
    assert capsys.readouterr().err.startswith(f"tvis: warning: {run}: ")


def test_a_schema_version_below_the_first_is_a_one_line_error(good_run, tmp_path, capsys):
    from tvis_tui.store import codec, layout

    run = _with_record(good_run, tmp_path / "run", layout.META, b"schema_version", codec.pack(0))
    assert main(["export", str(run)]) == 2
    assert _one_error_line(capsys) == f"tvis: error: {run}: corrupt run (its schema version is 0)\n"


@pytest.mark.parametrize("key, value", [
    (b"warnings", "abc"), (b"warnings", [1, 2]), (b"traceback", ["x"]), (b"failing_site", 5),
    (b"script", None), (b"host", b"\xc1"), (b"argv", b"\xc1"), (b"ended_at", b"\xc1"),
])
def test_a_damaged_descriptive_meta_field_is_left_out_and_the_run_still_reads(good_run, tmp_path, capsys,
                                                                              key, value):
    """A field that only describes the run (its warnings, traceback, host) does not decide
    how to read it: the calls and steps stay readable, and the run says what was left out."""
    from tvis_tui.store import codec, layout

    raw = b"\xc1" if value == b"\xc1" else codec.pack(value)  # \xc1: not MessagePack at all
    run = _with_record(good_run, tmp_path / "run", layout.META, key, raw)
    assert main(["export", str(run), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["calls"]) == 40 and len(doc["steps"]) == 1
    assert key == b"warnings" or key.decode() not in doc["meta"]
    assert f"the run's {key.decode()} is damaged and left out" in doc["meta"]["warnings"]
    assert main(["ls", str(run.parent)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[-1] == "ok"


@pytest.mark.parametrize("slot, says", [
    ({**_SLOT, "values_dtype": "object"}, "values of dtype 'object'"),
    ({**_SLOT, "shape": [7]}, "cannot reshape"),
    ({**_SLOT, "values_dtype": "no-such-dtype"}, "TypeError"),
    ({**_SLOT, "values_from": [1, "no-such-role", 0]}, "KeyError: 'no-such-role'"),
])
def test_stored_values_that_do_not_fit_their_slot_are_a_corrupt_run(good_run, tmp_path, slot, says):
    from tvis_tui.errors import TvisError
    from tvis_tui.store import RunReader, codec, layout

    run = _with_record(good_run, tmp_path / "run", layout.SLOTS, codec.slot_key(2, 1, 0), codec.pack(slot))
    with RunReader(run) as reader:
        (read,) = reader.slots(2)
        with pytest.raises(TvisError, match="corrupt run") as caught:
            reader.values(2, read)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_tui_shows_why_a_run_with_a_malformed_step_cannot_be_opened(good_run, tmp_path):
    """The step records are read as the run opens (before its screen is shown)."""
    from textual.widgets import DataTable

    from tvis_tui.app import make_app
    from tvis_tui.screens.run_picker import RunPickerScreen
    from tvis_tui.store import codec, layout

    bad = _with_record(good_run, tmp_path / "runs" / "bad", layout.STEPS, codec.u32(1),
                       codec.pack({**_STEP, "loss": "x"}))

    async def on_its_own() -> tuple[int | None, str | None]:
        app = make_app(bad)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
        return app.return_code, app.damage

    code, damage = asyncio.run(on_its_own())
    assert code == 2 and damage.startswith(f"{bad}: corrupt run (a malformed step record, step 1: "
                                           "TypeError: field 'loss'")

    async def from_the_list() -> tuple[object, list[str]]:
        app = make_app(bad.parent)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            assert app.screen.query_one(DataTable).row_count == 1
            await pilot.press("enter")
            await pilot.pause()
            return app.screen, [n.message for n in app._notifications]

    screen, notes = asyncio.run(from_the_list())
    assert isinstance(screen, RunPickerScreen)
    assert any(n.startswith(f"{bad}: corrupt run (a malformed step record") for n in notes), notes


# -- 11: the data half (batches, samples, tokenizer calls, predictions) and line shapes --

_IMAGE = {"shape": [2, 2, 1], "data": bytes(4), "layout": "HW", "lo": 0.0, "hi": 1.0, "stride": 1}
_ITEM = {"kind": "tuple", "length": 2, "items": [
    [0, {"kind": "tensor", "shape": [2, 2], "dtype": "float32", "values": bytes(16), "values_dtype": "float32",
         "image": _IMAGE}],
    [1, {"kind": "scalar", "value": 3}]]}
_BATCH = {"seq": 1, "step": 1, "indices": [7], "size": 1, "detailed": 1, "collate": "default_collate",
          "worker": None, "dataset": "Shapes", "tokens": [], "transforms": []}
_SAMPLE = {"position": 0, "index": 7, "item": _ITEM,
           "transforms": [{"attr": "transform", "name": "Compose", "input": {"kind": "text", "text": "a"},
                           "stages": [{"name": "0:Upper", "value": {"kind": "text", "text": "A"}}]}]}
_PREDICTION = {"kind": "classes", "names": True, "classes": 2, "rows": 1, "leading": 1, "step": 1,
               "loss": "CrossEntropyLoss", "loss_seq": 2, "after_seq": 2,
               "samples": [{"top": [["cat", 0, 0.75], ["dog", 1, 0.25]], "target": "cat", "target_index": 0,
                            "correct": True}]}
_TOKENS = {"tokenizer": "Chars", "method": "encode", "text": "ab", "ids": [1, 2], "n_ids": 2, "step": 1,
           "after_seq": 1}
_LINE = {"hits": 1, "dropped": 0, "entries": [{"name": "x", "shape": [2, 2], "dtype": "float32", "hits": 1}]}


@pytest.fixture(scope="module")
def data_run(tmp_path_factory) -> Path:
    """A run with one of each data record and a line record, all well formed."""
    from tvis_tui.store.lines import LineRecord, LineShape
    from tvis_tui.store.samples import put_batch, put_prediction, put_sample, put_tokens

    path = tmp_path_factory.mktemp("data_run") / "run"
    with RunWriter(path) as w:
        w.put_meta(script="train.py", started_at="2026-01-01T00:00:00", status="running")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="data", kind="function", name="fetch"))
        w.put_call(CallRecord(seq=2, parent=0, depth=0, step=1, phase="loss", kind="module", name="loss"))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=2))
        put_batch(w, _BATCH)
        put_sample(w, 1, _SAMPLE)
        put_prediction(w, _PREDICTION)
        put_tokens(w, 1, _TOKENS)
        w.put_lines(1, [("/x/train.py", LineRecord(3, 1, (LineShape("x", (2, 2), "float32"),)))])
        w.close(status="ok", steps_recorded=1)
    return path


def test_the_well_formed_data_run_exports_whole(data_run, capsys):
    assert main(["export", str(data_run)]) == 0
    kinds = [line.split('"', 4)[3] for line in capsys.readouterr().out.splitlines()]
    assert {"batch", "sample", "prediction", "tokens", "line"} <= set(kinds)


def _data_cases() -> dict[str, tuple[bytes, bytes, dict, str]]:
    from tvis_tui.store import codec, lines, samples

    batch, sample = (samples.BATCHES, codec.u64(1)), (samples.SAMPLES, samples.sample_key(1, 0))
    prediction, tokens = (samples.PREDICTIONS, codec.u32(1)), (samples.TOKENS, codec.u64(1))
    line = (lines.LINES, lines.line_key(1, 1, 3))
    short = {**_ITEM["items"][0][1], "values": bytes(8)}
    small_picture = {**_ITEM["items"][0][1], "image": {**_IMAGE, "data": bytes(3)}}
    return {
        "batch size as text": (*batch, {**_BATCH, "size": "x"}, "batch record, call 1: TypeError: field 'size' holds str 'x'"),
        "batch seq as text": (*batch, {**_BATCH, "seq": "1"}, "field 'seq' holds str '1'"),
        "transforms not a list": (*sample, {**_SAMPLE, "transforms": "x"}, "sample record, call 1 sample 0: TypeError: field 'transforms'"),
        "a stage not a map": (*sample, {**_SAMPLE, "transforms": [{**_SAMPLE["transforms"][0], "stages": [5]}]},
                              "field 'transforms'"),
        "an item's member not a pair": (*sample, {**_SAMPLE, "item": {"kind": "tuple", "items": [[0, 5]]}},
                                        "field 'item'"),
        "values short of their shape": (*sample, {**_SAMPLE, "item": short},
                                        "ValueError: 8 bytes of float32 for shape [2, 2]"),
        "a picture short of its shape": (*sample, {**_SAMPLE, "item": small_picture},
                                         "ValueError: a picture of 3 bytes for shape [2, 2, 1]"),
        "prediction rows as text": (*prediction, {**_PREDICTION, "rows": "x"}, "prediction record, step 1: TypeError: field 'rows'"),
        "top not triples": (*prediction, {**_PREDICTION, "samples": [{"top": ["cat"]}]}, "field 'samples'"),
        "predicted text a list": (*prediction, {**_PREDICTION, "kind": "tokens", "samples": [{"predicted": [1]}]},
                                  "field 'samples'"),
        "token ids as text": (*tokens, {**_TOKENS, "ids": "x"}, "tokenizer record, number 1: TypeError: field 'ids'"),
        "a line's shape of text": (*line, {**_LINE, "entries": [{**_LINE["entries"][0], "shape": ["a"]}]},
                                   "line record, step 1 line 3: TypeError: field 'entries'"),
    }


_LEFT_OUT = {"batch": {"batch"}, "sample": {"sample"}, "prediction": {"prediction"},
             "tokenizer": {"tokens"}, "line": {"line"}}
"""What one damaged record of each kind costs an export: itself alone (a damaged batch took
its samples along, sweep S)."""


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
@pytest.mark.parametrize("case", list(_data_cases()))
def test_a_malformed_data_record_is_left_out_of_the_export_and_named(data_run, tmp_path, capsys, case, fmt):
    """Sweep R: one damaged line or prediction record cut the export short (exit 2, a
    partial stream). It is an optional record: the rest of the run is exported, the record
    is named on stderr and in a "damaged" record, and the exit status (1) says so."""
    from tvis_tui.store import codec

    db, key, record, says = _data_cases()[case]
    run = _with_record(data_run, tmp_path / "run", db, key, codec.pack(record))
    assert main(["export", str(run), "--format", fmt]) == 1
    captured = capsys.readouterr()
    err = captured.err.splitlines()
    assert len(err) == 1 and err[0].startswith(f"tvis: warning: {run}: corrupt run (a malformed "), err
    assert says in err[0] and err[0].endswith(": left out of the export"), err
    objects = ([json.loads(line) for line in captured.out.splitlines()] if fmt == "jsonl"
               else json.loads(captured.out)["data"])
    kinds = {obj["record"] for obj in objects}
    kind = err[0].split("a malformed ")[1].split(" record")[0]
    assert kinds & {"batch", "sample", "prediction", "tokens", "line"} == \
        {"batch", "sample", "prediction", "tokens", "line"} - _LEFT_OUT[kind]
    damaged = [obj["reason"] for obj in objects if obj["record"] == "damaged"]
    assert len(damaged) == 1 and damaged[0] in err[0]


def test_a_damaged_line_record_is_named_by_its_step_and_line(data_run, tmp_path, capsys):
    from tvis_tui.store import lines

    run = _with_record(data_run, tmp_path / "run", lines.LINES, lines.line_key(1, 1, 3), b"\xc1")
    assert main(["export", str(run), "-o", str(tmp_path / "out.jsonl")]) == 1
    assert "a malformed line record, step 1 line 3: " in capsys.readouterr().err
    assert (tmp_path / "out.jsonl").read_text().count('"record": "damaged"') == 1


def test_many_damaged_records_are_counted_after_the_first_few(data_run, tmp_path, capsys):
    from tvis_tui.commands.export import SHOWN_DAMAGE
    from tvis_tui.store import lines

    run = _with_record(data_run, tmp_path / "run", lines.LINES, lines.line_key(1, 1, 3), b"\xc1")
    for line in range(4, 4 + SHOWN_DAMAGE + 2):
        _put(run, lines.LINES, lines.line_key(1, 1, line), b"\xc1")
    assert main(["export", str(run)]) == 1
    captured = capsys.readouterr()
    assert captured.err.splitlines()[-1] == ("tvis: warning: 3 more damaged records left out "
                                             '("damaged" records in the export)')
    assert captured.out.count('"record": "damaged"') == SHOWN_DAMAGE + 3


def test_step_view_of_a_malformed_sample_closes_the_run_with_the_reason(data_run, tmp_path):
    from tvis_tui.app import make_app
    from tvis_tui.store import codec, samples

    bad = _with_record(data_run, tmp_path / "run", samples.SAMPLES, samples.sample_key(1, 0),
                       codec.pack({**_SAMPLE, "transforms": [{**_SAMPLE["transforms"][0], "stages": [5]}]}))

    async def step_view() -> tuple[int | None, str | None]:
        app = make_app(bad)
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            await pilot.press("p")
            await pilot.pause()
            await pilot.pause()
        return app.return_code, app.damage

    code, damage = asyncio.run(step_view())
    assert code == 2 and damage.startswith(f"{bad}: corrupt run (a malformed sample record, call 1 sample 0: "
                                           "TypeError: field 'transforms'")


def test_a_batch_record_without_its_seq_takes_the_one_its_key_says(good_run, tmp_path, capsys):
    import json

    from tvis_tui.store import codec
    from tvis_tui.store.samples import BATCHES

    run = _with_record(good_run, tmp_path / "run", BATCHES, codec.u64(5), codec.pack({"step": 1, "size": 2}))
    assert main(["export", str(run)]) == 0
    batches = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"batch"' in line]
    assert [(b["seq"], b["size"]) for b in batches] == [(5, 2)]


@pytest.mark.parametrize("key", [b"\x00" * 5 + b"\x01", b"\xff" * 12])
def test_a_sample_key_of_a_damaged_run_costs_the_export_nothing_else(tmp_path, capsys, key):
    """Review: samples exported by their keys' batch stopped the export at a short key
    (exit 2), and a key at the largest call number raised a struct.error traceback."""
    from tvis_tui.store import samples
    from tvis_tui.store.records import CallRecord, StepRecord
    from tvis_tui.store.writer import RunWriter

    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", started_at="2026-12-01T10:00:00", status="running")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="data", kind="data",
                              name="DataLoader", type="DataLoader"))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=1))
        w.put_record(samples.SAMPLES, key, {"position": 0})
        w.close(status="ok", steps_recorded=1)
    assert main(["export", str(tmp_path / "run")]) in (0, 1)
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert [json.loads(line)["record"] for line in captured.out.splitlines()][:3] == ["meta", "step", "call"]
