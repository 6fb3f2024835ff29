"""The source pane labels lines with the run's per-line shapes when it holds them."""

from __future__ import annotations

import numpy as np
from conftest import CALLS_PER_STEP, MODEL, _meta, line_of, write_step
from pilot import opened

from tvis_tui.store import RunWriter
from tvis_tui.store.lines import LineRecord, LineShape
from tvis_tui.store.records import CallRecord, Site, Slot
from tvis_tui.widgets.source_pane import SourcePane

CONV = line_of(MODEL, "x = self.relu(self.conv1(images))")


def _run_with_lines(path):
    rng = np.random.default_rng(0)
    with RunWriter(path) as w:
        _meta(w, MODEL, "2026-12-01T10:00:00")
        for step in (1, 2):
            write_step(w, step, rng)
        # Step 1 only: step 2 shows what runs without line shapes show.
        w.put_lines(1, [(MODEL, LineRecord(CONV, 1, (LineShape("x", (4, 8, 8, 8), "float32"),))),
                        (MODEL, LineRecord(CONV + 1, 1, tuple(
                            LineShape(n, (4, 512), "float32") for n in "abc")))])
        w.close(status="ok", steps_recorded=2)
    return path


async def test_recorded_line_shapes_name_what_each_line_bound(tmp_path):
    async with opened(_run_with_lines(tmp_path / "run"), 3) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        assert pane.shapes == {CONV: "x [4, 8, 8, 8]", CONV + 1: "a [4, 512]  b [4, 512]  …"}


async def test_a_step_without_line_shapes_falls_back_to_call_outputs(tmp_path):
    async with opened(_run_with_lines(tmp_path / "run"), CALLS_PER_STEP + 3) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        assert pane.shapes[line_of(MODEL, "self.head(x)")] == "head → [4, 10]"


async def test_calls_named_by_their_place_in_a_sequential_are_labelled_by_class(tmp_path):
    script = "import torch\nmodel = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())\nout = model(x)\n"
    with RunWriter(tmp_path / "run") as w:
        _meta(w, "/p/train.py", "2026-12-01T10:00:00")
        w.put_source("/p/train.py", script)
        site = Site("/p/train.py", 3)
        for seq, parent, name, type_ in ((1, 0, "Sequential", "Sequential"), (2, 1, "0", "Linear"),
                                         (3, 1, "1", "ReLU")):
            w.put_call(CallRecord(seq=seq, parent=parent, depth=min(parent, 1), step=1, phase="forward",
                                  kind="module", name=name, type=type_, call_site=site, start_ns=seq,
                                  duration_ns=1000))
            w.put_slots(seq, [(Slot("output", 0, "out", shape=(3, 8), dtype="float32"), None)])
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 3) as pilot:
        assert pilot.app.screen.query_one(SourcePane).shapes == {3: "ReLU → [3, 8]"}
