"""Text UTF-8 cannot hold (a file name on a disk that is not UTF-8, as `os.fsdecode` gives
it) never costs a run its records: it is stored with the odd byte escaped, and a run folder
so named opens like any other (robustness sweep)."""

from __future__ import annotations

import os

from tvis_tui.store import CallRecord, RunReader, RunWriter
from tvis_tui.store import codec
from tvis_tui.store.runs import find_runs

ODD = os.fsdecode(b"/data/img_\xff.png")  # '/data/img_\udcff.png'


def test_a_surrogate_in_a_record_is_stored_as_the_byte_it_stood_for():
    record = {"exception": f"ValueError: cannot decode {ODD}", ODD: [ODD, "\ud800"], "n": 3}
    assert codec.unpack(codec.pack(record)) == {
        "exception": "ValueError: cannot decode /data/img_\\xff.png",
        "/data/img_\\xff.png": ["/data/img_\\xff.png", "\\ud800"], "n": 3}
    assert codec.unpack(codec.pack({"plain": "é"})) == {"plain": "é"}  # nothing else changes
    assert codec.text(ODD) == b"/data/img_\\xff.png"


def test_a_run_in_a_folder_whose_name_is_not_utf8_is_written_listed_and_read(tmp_path):
    path = tmp_path / os.fsdecode(b"run\xff")
    with RunWriter(path) as w:
        w.put_meta(script=ODD, argv=[ODD], started_at="2026-12-01T10:00:00", status="running")
        w.put_source(ODD, "x = 1\n")
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="m",
                              error=f"OSError: {ODD}"))
        w.close(status="ok", steps_recorded=1)
    (run,) = find_runs(tmp_path)
    assert run.path == path and run.status == "ok"
    with RunReader(path) as reader:
        assert reader.meta()["script"] == "/data/img_\\xff.png"
        assert reader.source("/data/img_\\xff.png") == "x = 1\n"
        assert reader.calls(1, 1)[0].error == "OSError: /data/img_\\xff.png"
