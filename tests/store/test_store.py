"""The store round-trips what the writer puts, in order, and survives a killed writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import lmdb
import numpy as np
import pytest

from tvis_tui.errors import TvisError
from tvis_tui.store import CallRecord, RunReader, RunWriter, Site, Slot, StepRecord, TensorStats, layout
from tvis_tui.store.runs import claim_run_path, find_runs, run_status


def _call(seq, parent=0, depth=0, step=1, phase="forward", name="m", line=10, **kw):
    return CallRecord(seq=seq, parent=parent, depth=depth, step=step, phase=phase, kind="module",
                      name=name, type="Linear", call_site=Site("/src/train.py", line),
                      def_site=Site("/lib/linear.py", 5), **kw)


def test_calls_children_and_sites_round_trip(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_call(_call(1, name="model"))
        w.put_call(_call(2, parent=1, depth=1, name="model.fc1", line=20))
        w.put_call(_call(3, parent=1, depth=1, name="model.fc1", line=20))
        w.put_call(_call(4, phase="loss", name="criterion", line=11))
        w.put_call(_call(2, parent=1, depth=1, name="model.fc1", line=20, duration_ns=7), first=False)
    r = RunReader(tmp_path / "run")
    assert r.call_count() == 4
    assert r.call(2).duration_ns == 7
    assert r.call(2).call_site == Site("/src/train.py", 20)
    assert r.children(0) == [1, 4]
    assert r.children(1) == [2, 3]
    assert r.children(1, after=2) == [3]
    assert r.calls_at("/src/train.py", 20) == [2, 3]
    assert [c.seq for c in r.calls(2, 3)] == [2, 3]
    assert [(p.phase, p.first_seq, p.last_seq) for p in r.phases(1)] == [("forward", 1, 3), ("loss", 4, 4)]


def test_slots_and_values_round_trip_including_nan(tmp_path):
    arr = np.array([[1.0, np.nan], [np.inf, -2.0]], dtype=np.float32)
    stats = TensorStats(numel=4, min=-2.0, max=1.0, nan=1, posinf=1)
    with RunWriter(tmp_path / "run") as w:
        w.put_call(_call(1, nonfinite_output=True))
        w.put_slot(1, Slot("input", 0, "args[0]", repr="3"))
        w.put_slot(1, Slot("output", 0, "out", shape=(2, 2), dtype="float32", stats=stats,
                           hist=(1, 1), hist_lo=-2.0, hist_hi=1.0, values_dtype="float32"),
                   arr.tobytes())
    r = RunReader(tmp_path / "run")
    out = r.slots(1, "output")[0]
    assert out.shape == (2, 2) and out.stats.nonfinite == 2 and out.hist == (1, 1)
    np.testing.assert_array_equal(r.values(1, out), arr)
    assert [s.role for s in r.slots(1)] == ["input", "output"]
    assert r.nonfinite_calls() == [1]


def test_map_grows_instead_of_failing(tmp_path):
    blob = os.urandom(1 << 20)
    with RunWriter(tmp_path / "run") as w:
        for seq in range(1, 101):  # 100 MiB > the 64 MiB initial map
            w.put_call(_call(seq))
            w.put_slot(seq, Slot("output", 0, "out", shape=(len(blob),), dtype="uint8",
                                 values_dtype="uint8"), blob)
    r = RunReader(tmp_path / "run")
    assert r.call_count() == 100
    assert r.values(100, r.slots(100)[0]).tobytes() == blob


def test_steps_and_meta(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", status="running")
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=9, loss=0.5, phase_ns={"forward": 3}))
        w.close(status="ok", steps_recorded=1)
    r = RunReader(tmp_path / "run")
    assert r.meta()["status"] == "ok"
    assert r.step(1).loss == 0.5 and r.step(1).phase_ns == {"forward": 3}
    assert [s.step for s in r.steps()] == [1]


def test_killed_writer_leaves_committed_calls_readable(tmp_path):
    run = tmp_path / "run"
    code = textwrap.dedent(f"""
        import sys, time
        from tvis_tui.store import CallRecord, RunWriter
        w = RunWriter({str(run)!r}, max_pending_seconds=0.0)
        w.put_meta(status="running", pid=0)
        for seq in range(1, 1_000_000):
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward",
                                  kind="module", name="m"))
            if seq == 500:
                print("ready", flush=True)
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    r = RunReader(run)
    n = r.call_count()
    assert n >= 499
    assert [c.seq for c in r.calls(1, n)] == list(range(1, n + 1))
    assert run_status(r.meta()) == "stopped"


def test_not_a_run_gives_one_line_error(tmp_path):
    with pytest.raises(TvisError, match="no such run folder"):
        RunReader(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(TvisError, match="not a tvis run"):
        RunReader(tmp_path / "empty")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "data.mdb").write_bytes(b"garbage" * 100)
    with pytest.raises(TvisError) as err:
        RunReader(tmp_path / "junk")
    assert "\n" not in str(err.value)


def test_find_runs_newest_first(tmp_path):
    for name, started in [("a", "2026-01-01T00:00:00"), ("b", "2026-02-01T00:00:00")]:
        with RunWriter(tmp_path / name) as w:
            w.put_meta(script=f"{name}.py", started_at=started, status="ok", steps_recorded=2)
    (tmp_path / "not-a-run").mkdir()
    runs = find_runs(tmp_path)
    assert [r.script for r in runs] == ["b.py", "a.py"]
    assert runs[0].status == "ok" and runs[0].steps == 2


def test_a_claimed_run_path_is_a_new_folder(tmp_path):
    first = claim_run_path(tmp_path / "runs", "train.py", name="x")
    assert first.is_dir() and first.name == "x"
    assert claim_run_path(tmp_path / "runs", "train.py", name="x").name == "x-2"


def test_nearest_sibling_nonfinite_and_line_lookups(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_call(_call(1, name="model"))
        for seq in (2, 3, 4):
            w.put_call(_call(seq, parent=1, depth=1, name=f"model.l{seq}", line=20,
                             nonfinite_output=seq != 3))
        w.put_call(_call(5, name="loss", line=30))
    r = RunReader(tmp_path / "run")
    assert r.sibling(3, 1) == 4 and r.sibling(3, 1, forward=False) == 2
    assert r.sibling(4, 1) is None and r.sibling(2, 1, forward=False) is None
    assert r.sibling(1, 0) == 5 and r.sibling(5, 0, forward=False) == 1
    assert r.nonfinite_near(2) == 4 and r.nonfinite_near(4, forward=False) == 2
    assert r.nonfinite_near(4) is None and r.nonfinite_near(2, forward=False) is None
    assert r.call_at_line_near("/src/train.py", 20, 2) == 3
    assert r.call_at_line_near("/src/train.py", 20, 5, forward=False) == 4
    assert r.call_at_line_near("/src/train.py", 20, 4) is None
    assert r.call_at_line_near("/elsewhere.py", 20, 0) is None


def test_calls_matching_by_name_or_type_any_case(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        for seq, name in enumerate(["model", "model.Fc1", "loss", "model.fc2"], 1):
            w.put_call(_call(seq, name=name))
    r = RunReader(tmp_path / "run")
    assert list(r.calls_matching("FC", 1, 4)) == [2, 4]
    assert list(r.calls_matching("fc", 1, 4, reverse=True)) == [4, 2]
    assert list(r.calls_matching("linear", 2, 3)) == [2, 3]  # the type matches too
    assert list(r.calls_matching("fc", 3, 3)) == []


def test_calls_matching_by_module_path_under_the_models_name(tmp_path):
    """Two towers each with an `out` layer: `b.out` (as the optimizer names `b.out.weight`)
    finds b's alone (sweep S: "no call matching 'b.out'")."""
    with RunWriter(tmp_path / "run") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="function",
                              name="train_step", type="function"))
        for seq, (parent, name) in enumerate([(1, "a"), (2, "out"), (1, "b"), (4, "enc"),
                                              (5, "enc.0"), (4, "out"), (1, "outer")], 2):
            w.put_call(_call(seq, parent=parent, name=name))
        # a layer that b's forward calls through a helper function of the script's (review)
        w.put_call(CallRecord(seq=9, parent=4, depth=1, step=1, phase="forward", kind="function",
                              name="block", type="function"))
        w.put_call(_call(10, parent=9, name="head"))
    r = RunReader(tmp_path / "run")
    assert list(r.calls_matching("b.head", 1, 10)) == [10]
    assert list(r.calls_matching("b.out", 1, 8)) == [7]
    assert list(r.calls_matching("A.OUT", 1, 8)) == [3]
    assert list(r.calls_matching("b.enc.0", 1, 8)) == [6]  # the outermost module names the model
    assert list(r.calls_matching(".out", 1, 8)) == [3, 7]
    assert list(r.calls_matching("b.enc", 1, 8, reverse=True)) == [6, 5]
    assert list(r.calls_matching("train_step.outer", 1, 8)) == []  # a function is no model
    assert list(r.calls_matching("out", 1, 8)) == [3, 7, 8]


def test_a_closed_call_keeps_every_field_it_opened_with():
    import dataclasses

    from tvis_tui.store.records import CallRecord, Site

    opened = CallRecord(seq=7, parent=3, depth=2, step=4, phase="forward", kind="module",
                        name="enc.0", type="Linear", call_site=Site("/t.py", 3),
                        def_site=Site("/m.py", 9), start_ns=11, extra={"k": 1})
    closed = opened.closed(99, True, "ValueError: x", {"k": 1, "more": 2})
    assert closed == dataclasses.replace(opened, duration_ns=99, nonfinite_output=True,
                                         error="ValueError: x", extra={"k": 1, "more": 2})
    # every field is set by name or carried over: a new field must be added to closed() too
    assert len(dataclasses.fields(CallRecord)) == 15


def test_counts_are_what_the_store_holds(tmp_path):
    """A killed recorder leaves no final steps_recorded; the reader counts records instead:
    calls stored (not the highest number) and steps that ended (not the open last one)."""
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(status="running", pid=0)
        for seq in (1, 2, 3, 7):
            w.put_call(_call(seq))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=2))
        w.put_step(StepRecord(step=2, first_seq=3, last_seq=7, complete=False))
    with RunReader(tmp_path / "run") as r:
        assert (r.call_count(), r.stored_calls(), r.complete_steps()) == (7, 4, 1)
    summary = find_runs(tmp_path / "run")[0]
    assert (summary.steps, summary.calls, summary.status) == (1, 4, "stopped")


def test_find_runs_keeps_going_past_an_unreadable_run(tmp_path):
    with RunWriter(tmp_path / "good") as w:
        w.put_meta(script="a.py", started_at="2026-01-01T00:00:00", status="ok")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "data.mdb").write_bytes(b"garbage" * 1000)
    runs = find_runs(tmp_path)
    assert [(r.path.name, r.status) for r in runs] == [("good", "ok"), ("bad", "unreadable")]
    assert runs[1].reason.startswith("unreadable run (MDB_INVALID") and "\n" not in runs[1].reason
    with pytest.raises(TvisError, match="bad: unreadable run"):  # asked for by name: an error
        find_runs(tmp_path / "bad")


def test_data_file_instead_of_its_folder_names_the_folder(tmp_path):
    with RunWriter(tmp_path / "run"):
        pass
    with pytest.raises(TvisError, match=r"data.mdb: not a run folder \(a file; the run is .*run\)$"):
        RunReader(tmp_path / "run" / "data.mdb")


def test_refresh_refuses_a_file_cut_short_after_opening(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        for seq in range(1, 200):
            w.put_call(_call(seq))
    r = RunReader(tmp_path / "run")
    os.truncate(tmp_path / "run" / "data.mdb", 3 * 4096)
    with pytest.raises(TvisError, match="corrupt or truncated run"):
        r.refresh()  # before any page past the new end is read


def test_processes_starting_together_each_claim_a_folder(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        paths = list(pool.map(lambda _: claim_run_path(tmp_path, "train.py", name="x"), range(8)))
    assert sorted(p.name for p in paths) == sorted(["x", *(f"x-{n}" for n in range(2, 9))])
    assert all(p.is_dir() for p in paths)


def test_a_close_that_cannot_write_the_last_records_still_writes_the_final_meta(tmp_path, monkeypatch):
    write = RunWriter.write

    def full_disk(self, pending):  # only small metadata still fits
        if any(db != layout.META for db, _, _ in pending):
            raise lmdb.Error("mdb_txn_commit: No space left on device")
        write(self, pending)

    # No commit interval: the final metadata's own put commits the records left first.
    w = RunWriter(tmp_path / "run", max_pending_seconds=0)
    monkeypatch.setattr(RunWriter, "write", full_disk)
    w._pending.append((layout.CALLS, b"k", b"v"))  # a record left buffered
    with pytest.raises(lmdb.Error):
        w.close(status="ok", steps_recorded=2)
    with RunReader(tmp_path / "run") as r:
        meta = r.meta()
    assert (meta["status"], meta["steps_recorded"], meta["incomplete"]) == ("ok", 2, True)


def test_a_run_or_folder_that_cannot_be_looked_into_is_one_line(tmp_path, monkeypatch):
    # Someone else's 700 runs folder on a shared GPU box (robustness sweep); chmod does not
    # stop root, so the refusal is the file system's, stood in for here.
    import pathlib

    from tvis_tui.app import make_app

    with RunWriter(tmp_path / "runs" / "b") as w:
        w.close(status="ok")
    is_file = pathlib.Path.is_file

    def refused(path):
        if "locked" in path.parts:
            raise PermissionError(13, "Permission denied")
        return is_file(path)

    monkeypatch.setattr(pathlib.Path, "is_file", refused)
    (tmp_path / "runs").rename(tmp_path / "locked")
    for attempt in (lambda: find_runs(tmp_path / "locked"), lambda: make_app(tmp_path / "locked"),
                    lambda: make_app(tmp_path / "locked" / "b"), lambda: RunReader(tmp_path / "locked" / "b")):
        with pytest.raises(TvisError, match=r"locked.*(cannot be read|unreadable run) \(Permission denied\)$"):
            attempt()
