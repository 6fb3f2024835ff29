"""Per-line tensor shapes: the tensors each line of user code bound, per step, capped."""

from __future__ import annotations

import io
import json

from tvis_tui.export import export_json, export_jsonl
from tvis_tui.record.lines import MAX_ENTRIES
from tvis_tui.store.lines import LineShape

SCRIPT = """
import torch
from torch import nn

def ramps(n):
    total = torch.zeros(())
    for i in range(n):
        part = torch.arange(float(i + 1))
        total = total + part.sum()
    return total

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(5, 4)
    out = model(x)
    big = out.double().sum() + ramps(10)
    opt.zero_grad()
    big.float().backward()
    opt.step()
"""
# Lines of SCRIPT (the first is empty).
TOTAL, FOR, PART, ACCUMULATE = 6, 7, 8, 9
MODEL, X, OUT, BIG = 12, 15, 16, 17


def test_module_level_lines_bind_names_to_shapes(run_inprocess, tmp_path):
    code, run = run_inprocess(SCRIPT, steps=2)
    assert code == 0
    shapes = run.line_shapes(str(tmp_path / "train.py"), 1)
    assert shapes[OUT] == [LineShape("out", (5, 2), "float32", 1)]
    assert shapes[BIG] == [LineShape("big", (), "float64", 1)]
    # x was bound before the first call, in the first iteration: step 1's too (sweep L).
    assert shapes[X] == [LineShape("x", (5, 4), "float32", 1)]
    assert run.line_shapes(str(tmp_path / "train.py"), 2)[X] == [LineShape("x", (5, 4), "float32", 1)]
    # What ran before the loop is no step's: the model's and the optimizer's lines.
    step_1 = {r["line"] for r in _exported_lines(run) if r["step"] == 1}
    assert {X - 1, X} <= step_1 and not step_1 & {MODEL, MODEL + 1}


def test_a_loop_counts_hits_and_keeps_the_first_distinct_entries(run_inprocess, tmp_path):
    _, run = run_inprocess(SCRIPT, steps=2)
    shapes = run.line_shapes(str(tmp_path / "train.py"), 1)
    # part has a new shape each iteration: the first ones are kept, the rest counted.
    assert shapes[PART] == [LineShape("part", (i + 1,), "float32", 1) for i in range(MAX_ENTRIES)]
    assert shapes[ACCUMULATE] == [LineShape("total", (), "float32", 10)]
    assert shapes[TOTAL] == [LineShape("total", (), "float32", 1)]
    records = {r["line"]: r for r in _exported_lines(run) if r["step"] == 1}
    assert records[PART]["hits"] == 10 and records[PART]["dropped"] == 10 - MAX_ENTRIES
    assert records[FOR]["hits"] == 11 and records[FOR]["entries"] == []


def test_each_step_has_its_own_lines(run_inprocess, tmp_path):
    _, run = run_inprocess(SCRIPT, steps=2)
    path = str(tmp_path / "train.py")
    assert run.line_shapes(path, 2)[OUT] == [LineShape("out", (5, 2), "float32", 1)]
    assert run.line_shapes(path, 3) == {}  # not recorded: the run stopped after step 2


def test_lines_after_the_last_step_that_make_no_call_are_no_steps(run_inprocess, tmp_path):
    # They were written under step 4, which has no step record: the export listed lines
    # of a step that is not there (sweep L).
    code, run = run_inprocess(SCRIPT + "done = torch.ones(2)\n")
    path = str(tmp_path / "train.py")
    assert code == 0 and [s.step for s in run.steps()] == [1, 2, 3]
    assert run.line_shapes(path, 3)[OUT] == [LineShape("out", (5, 2), "float32", 1)]
    assert run.line_shapes(path, 4) == {}
    assert {r["step"] for r in _exported_lines(run)} == {1, 2, 3}


def test_export_holds_line_records(run_inprocess, tmp_path):
    _, run = run_inprocess(SCRIPT, steps=1)
    rows = _exported_lines(run)
    out = next(r for r in rows if r["line"] == OUT)
    assert out == {"record": "line", "file": str(tmp_path / "train.py"), "step": 1, "line": OUT,
                   "hits": 1, "dropped": 0,
                   "entries": [{"name": "out", "shape": [5, 2], "dtype": "float32", "hits": 1}]}
    buffer = io.StringIO()
    export_json(run, buffer)
    data = json.loads(buffer.getvalue())["data"]
    assert out in [d for d in data if d["record"] == "line"]


def _exported_lines(run) -> list[dict]:
    buffer = io.StringIO()
    export_jsonl(run, buffer)
    rows = [json.loads(line) for line in buffer.getvalue().splitlines()]
    return [r for r in rows if r["record"] == "line"]


def test_a_line_counts_in_the_step_it_started_in(run_inprocess, tmp_path):
    _, run = run_inprocess(SCRIPT, steps=2)
    path = str(tmp_path / "train.py")
    step_line = SCRIPT.splitlines().index("    opt.step()") + 1
    # opt.step() ends the step: it belongs to the step it ran in, the last one included.
    assert step_line in run.line_shapes(path, 1) and step_line in run.line_shapes(path, 2)
    records = [r for r in _exported_lines(run) if r["line"] == step_line]
    assert [(r["step"], r["hits"]) for r in records] == [(1, 1), (2, 1)]


THREADED = """
import threading
import torch
from torch import nn

def worker(out):
    w = torch.ones(7, 3)
    out.append(w)

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    got = []
    thread = threading.Thread(target=worker, args=(got,))
    thread.start()
    thread.join()
    opt.zero_grad()
    model(got[0]).sum().backward()
    opt.step()
"""


def test_threads_started_while_recording_are_traced(run_inprocess, tmp_path):
    _, run = run_inprocess(THREADED, steps=2)
    w_line = THREADED.splitlines().index("    w = torch.ones(7, 3)") + 1
    # Step 1 starts at the first call, after the first thread ran: step 2 has it.
    assert run.line_shapes(str(tmp_path / "train.py"), 2)[w_line] == [LineShape("w", (7, 3), "float32", 1)]


MICRO_BATCHES = """
import torch
import torch.nn.functional as F

def chunks(x, y, k):
    for j in range(k):
        xs = x[j::k]
        yield xs, y[j::k]

model = torch.nn.Linear(3, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 3); y = torch.randint(0, 2, (4,))
    for xs, ys in chunks(x, y, 2):
        (F.cross_entropy(model(xs), ys) / 2).backward()
    opt.step(); opt.zero_grad()
"""


def test_step_1_has_the_lines_its_step_ran_before_an_inner_loop_s_first_call(run_inprocess, tmp_path):
    """The first call is in the micro-batch loop, whose head runs after `x = ...`: step 1
    missed that line and counted the generator's lines once of twice (sweep Q). The
    lines since the head of the loop the optimizer steps in are step 1's."""
    _, run = run_inprocess(MICRO_BATCHES, steps=2)
    by_step = {step: {(r["line"], r["hits"]) for r in _exported_lines(run) if r["step"] == step}
               for step in (1, 2)}
    assert by_step[1] == by_step[2]
    assert (13, 1) in by_step[1] and (7, 2) in by_step[1]  # x = ..., and xs = ... twice
    path = str(tmp_path / "train.py")
    assert run.line_shapes(path, 1)[13] == [LineShape("x", (4, 3), "float32", 1),
                                            LineShape("y", (4,), "int64", 1)]


def test_step_1_counts_from_the_training_loop_s_head_when_a_loop_goes_over_the_optimizers(
        run_inprocess, tmp_path):
    """`for opt in opts: opt.step()`: the loop the step is taken in began after the first
    call; the iteration is the loop around it."""
    script = MICRO_BATCHES.replace("    opt.step(); opt.zero_grad()",
                                   "    for o in [opt]:\n        o.step(); o.zero_grad()")
    _, run = run_inprocess(script, steps=2)
    by_step = {step: {(r["line"], r["hits"]) for r in _exported_lines(run) if r["step"] == step}
               for step in (1, 2)}
    assert by_step[1] == by_step[2] and (13, 1) in by_step[1]
