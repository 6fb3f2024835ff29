"""The source pane labels lines with the run's per-line shapes when it holds them."""

from __future__ import annotations

import numpy as np
from conftest import CALLS_PER_STEP, MODEL, _meta, line_of, write_step
from pilot import opened, press

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


HELPERS = "/p/helpers.py"
HELPERS_TEXT = ("import torch\ndef pool(h, mask):\n    m = mask.unsqueeze(-1).float()\n"
                "    s = (h * m).sum(1)\n    return s / m.sum(1)\n")
MAIN = "/p/train.py"
MAIN_TEXT = "from helpers import pool\nh = emb(ids)\nv = pool(h, mask)\nloss = fc(v).mean()\n"


def _run_with_a_function(path, helpers_source: bool = True, lines: bool = True):
    with RunWriter(path) as w:
        _meta(w, MAIN, "2026-12-01T10:00:00")
        w.put_source(MAIN, MAIN_TEXT)
        if helpers_source:
            w.put_source(HELPERS, HELPERS_TEXT)
        for seq, name, kind, line, def_site in ((1, "emb", "module", 2, None),
                                                (2, "pool", "function", 3, Site(HELPERS, 2))):
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward", kind=kind,
                                  name=name, type=name, call_site=Site(MAIN, line), def_site=def_site,
                                  start_ns=seq, duration_ns=1000))
            w.put_slots(seq, [(Slot("output", 0, "out", shape=(4, 8), dtype="float32"), None)])
        if lines:
            w.put_lines(1, [(HELPERS, LineRecord(3, 1, (LineShape("m", (4, 5, 1), "float32"),))),
                            (HELPERS, LineRecord(4, 1, (LineShape("s", (4, 8), "float32"),))),
                            (MAIN, LineRecord(3, 1, (LineShape("v", (4, 8), "float32"),)))])
        w.close(status="ok", steps_recorded=1)
    return path


async def test_d_shows_a_functions_own_lines_and_what_they_bound(tmp_path):
    """The body of a function of the script's was never shown: the shapes its lines bound
    were stored and out of reach (sweep Q)."""
    async with opened(_run_with_a_function(tmp_path / "run"), 2) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        assert (pane.path, pane.line, dict(pane.shapes)) == (MAIN, 3, {3: "v [4, 8]"})
        await press(pilot, "d")
        assert (pane.path, pane.line) == (HELPERS, 2)
        assert dict(pane.shapes) == {3: "m [4, 5, 1]", 4: "s [4, 8]"}
        assert str(pane.border_title) == "helpers.py:2 · definition"
        await press(pilot, "S")  # a module of torch's: its source is not in the run
        assert (pane.path, pane.line) == (MAIN, 2)
        assert str(pane.border_title) == "train.py:2 · call site (definition not in the run)"
        await press(pilot, "s", "d")  # d again: back to call sites
        assert (pane.path, pane.line, str(pane.border_title)) == (MAIN, 3, "train.py:3")


async def test_d_without_the_definitions_source_stays_at_the_call_site(tmp_path):
    async with opened(_run_with_a_function(tmp_path / "run", helpers_source=False), 2) as pilot:
        await press(pilot, "d")
        pane = pilot.app.screen.query_one(SourcePane)
        assert (pane.path, pane.line, dict(pane.shapes)) == (MAIN, 3, {3: "v [4, 8]"})


async def test_d_in_a_run_without_line_shapes_labels_no_line_of_the_definition(tmp_path):
    """The shapes of the calls made around this one are the caller's lines: drawn on the
    definition, they labelled helpers.py's lines 2 and 3 with train.py's (review)."""
    async with opened(_run_with_a_function(tmp_path / "run", lines=False), 2) as pilot:
        pane = pilot.app.screen.query_one(SourcePane)
        assert dict(pane.shapes) == {2: "emb → [4, 8]", 3: "pool → [4, 8]"}
        await press(pilot, "d")
        assert (pane.path, dict(pane.shapes)) == (HELPERS, {})
