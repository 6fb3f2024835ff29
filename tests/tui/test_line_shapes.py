"""The source pane labels lines with the run's per-line shapes when it holds them."""

from __future__ import annotations

import numpy as np
from conftest import CALLS_PER_STEP, MODEL, _meta, line_of, write_step
from pilot import opened

from tvis_tui.store import RunWriter
from tvis_tui.store.lines import LineRecord, LineShape
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
