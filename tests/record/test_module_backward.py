"""The bookkeeping behind each module call's backward time (record/module_backward.py):
which calls a node of the graph belongs to, and what is kept between backwards."""

from __future__ import annotations

import torch

from tvis_tui.record import module_backward
from tvis_tui.record.module_backward import ModuleBackwardTimes, _segments
from tvis_tui.store import CallRecord


def _record(seq: int, step: int = 1) -> CallRecord:
    return CallRecord(seq=seq, parent=0, depth=0, step=step, phase="forward", kind="module", name=f"m{seq}")


def test_a_node_belongs_to_every_call_whose_range_holds_it():
    calls = [(0, 10, _record(1)), (2, 5, _record(2)), (5, 8, _record(3))]
    starts, chains = _segments(calls)
    assert list(zip(starts, chains)) == [(1, (1,)), (3, (1, 2)), (6, (1, 3)), (9, (1,)), (11, ())]


def test_node_times_go_to_the_calls_less_tvis_own_time():
    written: list[CallRecord] = []
    overhead = [0]
    times = ModuleBackwardTimes(lambda: overhead[0], lambda: overhead[0], written.append, lambda: 1)
    x = torch.ones(2, requires_grad=True)
    before = x * 3  # made before the call: no call's
    low = times.low()
    y = x.exp() * 2  # two nodes made inside the call
    times.closed(_record(1), low)
    after = y + 1  # made after it: no call's
    times.begin(now_ns=1_000)
    times.node_ran(y.grad_fn._sequence_nr(), ended_ns=4_000)
    overhead[0] = 500  # tvis's hook between the nodes
    times.node_ran(y.grad_fn.next_functions[0][0]._sequence_nr(), ended_ns=6_000)
    times.node_ran(after.grad_fn._sequence_nr(), ended_ns=9_000)
    times.node_ran(before.grad_fn._sequence_nr(), ended_ns=9_500)
    times.node_ran(None, ended_ns=12_000)  # AccumulateGrad
    times.end()
    assert [r.extra["backward_ns"] for r in written] == [3_000 + 1_500]


def test_the_hook_running_when_backward_begins_is_not_taken_off_the_first_node():
    # backward() is opened from a hook: 300 ns of it before `now_ns`, 200 after. The hook's
    # 500 ns reach the finished total only when it ends, after the first node began.
    written: list[CallRecord] = []
    done, so_far = [0], [300]
    times = ModuleBackwardTimes(lambda: done[0], lambda: so_far[0], written.append, lambda: 1)
    x = torch.ones(2, requires_grad=True)
    low = times.low()
    y = (x * 2).sum()  # a loss of one node, the first backward runs (MSELoss's)
    times.closed(_record(1), low)
    times.begin(now_ns=1_000)
    done[0] = 500
    times.node_ran(y.grad_fn._sequence_nr(), ended_ns=4_000)
    times.end()
    assert [r.extra["backward_ns"] for r in written] == [3_000 - 200]


def test_calls_waiting_for_a_backward_are_bounded(monkeypatch):
    monkeypatch.setattr(module_backward, "MAX_CALLS", 4)
    times = ModuleBackwardTimes(lambda: 0, lambda: 0, lambda record: None, lambda: 1)
    x = torch.ones(2, requires_grad=True)
    for seq in range(1, 8):
        low = times.low()
        x * 2
        times.closed(_record(seq), low)
    assert [record.seq for _, _, record in times._calls] == [5, 6, 7]


def test_a_loss_whose_backward_is_the_first_node_gets_its_time(run_inprocess):
    # MSELoss's backward is one node, the first backward runs: it read 0 ns.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
model, loss_fn = nn.Linear(32, 1), nn.MSELoss()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(3):
    x, y = torch.randn(512, 32), torch.randn(512, 1)
    opt.zero_grad(); loss_fn(model(x), y).backward(); opt.step()
""")
    assert code == 0
    losses = [c for c in run.calls(1, run.call_count()) if c.name == "MSELoss"]
    assert len(losses) == 3 and all(c.extra["backward_ns"] > 0 for c in losses)
