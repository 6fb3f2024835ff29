"""Recorded times leave tvis's own work out; on CUDA they come from events (faked here)."""

from __future__ import annotations

import threading
import time

import torch

from tvis_tui.record import calls, slots, timing
from tvis_tui.record.data import DataCapture
from tvis_tui.record.options import CaptureOptions

MS = 1_000_000

NESTED = """
import time
import torch
from torch import nn

class Inner(nn.Module):
    def forward(self, x):
        time.sleep(0.020)
        return x * 2

class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.w = nn.Parameter(torch.ones(4))

    def forward(self, x):
        y = self.inner(x) * self.w
        time.sleep(0.010)
        return y

model = Outer()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.ones(4)).sum().backward()
    opt.step()
"""

TVIS_WORK_S = 0.030
"""Far more than sleep() overshoots on a loaded machine, so the bounds below hold there."""


def _slow_capture(monkeypatch, cls, name):
    original = getattr(cls, name)

    def slow(*args, **kwargs):
        time.sleep(TVIS_WORK_S)
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, slow)


def test_durations_and_step_times_leave_tvis_capture_work_out(run_inprocess, monkeypatch):
    _slow_capture(monkeypatch, slots.SlotMaker, "make")  # 30 ms of "capture" per slot set
    code, run = run_inprocess(NESTED)
    assert code == 0
    by_name = {c.name: c for c in run.calls(1, run.call_count()) if c.step == 2}
    # Inner: 20 ms of sleep; Outer: 30 ms. Its child's open and close (2 x 30 ms) would
    # add 60 ms if they were counted.
    assert 19 * MS <= by_name["inner"].duration_ns < 20 * MS + TVIS_WORK_S * 1e9 / 2
    assert 29 * MS <= by_name["Outer"].duration_ns < 30 * MS + TVIS_WORK_S * 1e9
    step = run.steps()[1]
    overhead = step.extra["tvis_overhead_ns"]
    assert overhead >= 6 * TVIS_WORK_S * 1e9  # at least 6 slot sets in a step
    wall = step.extra["wall_ns"]
    assert 29 * MS <= wall < 30 * MS + overhead / 2
    assert sum(step.phase_ns.values()) == wall  # "other" is the rest of wall_ns
    # Inside Outer: Inner's open and close (Outer's own are between calls).
    assert step.extra["tvis_overhead_phase_ns"]["forward"] >= 2 * TVIS_WORK_S * 1e9
    assert run.meta()["tvis_overhead_ns"] >= overhead


def test_durations_leave_out_what_tvis_does_when_a_tensor_dies_in_the_script(run_inprocess, monkeypatch):
    from tvis_tui.record.live_tensors import LiveTensors

    _slow_capture(monkeypatch, LiveTensors, "_forget")  # 30 ms each time a seen tensor dies
    code, run = run_inprocess("""
import time
import torch
from torch import nn

class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Identity()

    def forward(self, x):
        for _ in range(3):
            x = self.inner(x * 2)  # the last x dies here: in the script's code, not a hook
        time.sleep(0.010)
        return x

Outer()(torch.ones(4))
""", capture=CaptureOptions(lines=False))  # the line tracer's own callbacks would see them die
    assert code == 0
    outer = next(c for c in run.calls(1, run.call_count()) if c.name == "Outer")
    # Two of inner's outputs die inside Outer's forward: 60 ms if they were counted.
    assert 9 * MS <= outer.duration_ns < 10 * MS + TVIS_WORK_S * 1e9


def test_batch_duration_leaves_the_data_capture_out(run_inprocess, monkeypatch):
    _slow_capture(monkeypatch, DataCapture, "_deliver")
    code, run = run_inprocess("""
import time
import torch
from torch.utils.data import DataLoader, Dataset

class Slow(Dataset):
    def __len__(self):
        return 8
    def __getitem__(self, i):
        time.sleep(0.010)
        return torch.tensor([float(i)])

for batch in DataLoader(Slow(), batch_size=1):
    pass
""")
    assert code == 0
    batches = [c for c in run.calls(1, run.call_count()) if c.kind == "data" and not c.extra.get("exhausted")]
    assert batches
    for call in batches:
        assert 9 * MS <= call.duration_ns < 10 * MS + TVIS_WORK_S * 1e9 * 0.6


class FakeEvent:
    """A CUDA event that says 7 ms passed between any two, and notes where it waited."""

    waited_on: list[str] = []

    def record(self) -> None:
        self.recorded = True

    def synchronize(self) -> None:
        FakeEvent.waited_on.append(threading.current_thread().name)

    def elapsed_time(self, end: "FakeEvent") -> float:
        assert self.recorded and end.recorded
        return 7.0


def test_cuda_calls_are_timed_by_events_resolved_on_the_writer_thread(run_inprocess, monkeypatch):
    FakeEvent.waited_on = []

    def fake_timer() -> timing.CudaTimer:
        return timing.CudaTimer(event=FakeEvent, initialized=lambda: True,
                                is_cuda=lambda value: isinstance(value, torch.Tensor))

    monkeypatch.setattr(calls, "CudaTimer", fake_timer)
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
""")
    assert code == 0
    timed = [c for c in run.calls(1, run.call_count()) if c.kind in ("module", "backward")]
    assert timed and all(c.duration_ns == 7 * MS for c in timed)
    assert all(c.extra["clock"] == "cuda events" and "cpu_duration_ns" in c.extra for c in timed)
    step = run.steps()[1]
    assert step.phase_ns["forward"] == 7 * MS and step.phase_ns["backward"] == 7 * MS
    assert step.extra["phase_clock"] == "cuda events" and "forward" in step.extra["cpu_phase_ns"]
    assert FakeEvent.waited_on and set(FakeEvent.waited_on) == {"tvis-writer"}


def test_backward_duration_leaves_the_activation_grad_capture_out(run_inprocess, monkeypatch):
    from tvis_tui.record.gradients import ActivationGrads

    _slow_capture(monkeypatch, ActivationGrads, "record")  # runs in tensor hooks in backward
    code, run = run_inprocess("""
import time
import torch
from torch import nn

class Slow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 1
    @staticmethod
    def backward(ctx, g):
        time.sleep(0.020)
        return g

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)
    def forward(self, x):
        return self.b(Slow.apply(self.a(x)))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
""")
    assert code == 0
    backward = [c for c in run.calls(1, run.call_count()) if c.kind == "backward" and c.step == 2][0]
    grads = [s for c in run.calls(1, run.call_count()) if c.step == 2 for s in run.slots(c.seq, "grad")]
    assert len(grads) >= 3  # three outputs' grads were captured, 30 ms each
    assert 19 * MS <= backward.duration_ns < 20 * MS + TVIS_WORK_S * 1e9


def test_garbage_collections_outside_hooks_count_as_overhead():
    import gc
    from types import SimpleNamespace

    log = SimpleNamespace(_thread=SimpleNamespace(hook_depth=0, overhead_ns=0))
    undo = timing.count_gc_as_overhead(log)
    try:
        gc.collect()
        outside = log._thread.overhead_ns
        log._thread.hook_depth = 1  # inside a hook: its own clock has it
        gc.collect()
        assert outside > 0 and log._thread.overhead_ns == outside
    finally:
        undo()
    log._thread.hook_depth = 0
    gc.collect()
    assert log._thread.overhead_ns == outside


SLEEPY = """
import time
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

class SlowFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, secs):
        ctx.secs = secs
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        time.sleep(ctx.secs)
        return g, None

class Slow(nn.Module):
    def __init__(self, secs):
        super().__init__()
        self.secs = secs
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return SlowFn.apply(self.lin(x), self.secs)
"""


SLOW_BACKWARD = SLEEPY + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.slow = Slow(0.030)
        self.b = nn.Linear(4, 2)

    def forward(self, x):
        return self.b(self.slow(torch.relu(self.a(x))))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(3, 4)).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
"""


def test_each_module_call_has_its_backward_time(run_inprocess, monkeypatch):
    _slow_capture(monkeypatch, slots.SlotMaker, "make")  # the activation grads' capture: 30 ms each
    code, run = run_inprocess(SLOW_BACKWARD, capture=CaptureOptions(lines=False))
    assert code == 0
    calls = {c.name: c for c in run.calls(1, run.call_count()) if c.step == 2}
    took = {name: calls[name].extra.get("backward_ns") for name in ("Net", "a", "slow", "b")}
    assert 30 * MS <= took["slow"] < 30 * MS + TVIS_WORK_S * 1e9 / 2
    # Three outputs' grads were captured inside Net's backward: 90 ms if they were counted.
    assert took["slow"] <= took["Net"] < 30 * MS + TVIS_WORK_S * 1e9 / 2
    assert 0 < took["a"] < 10 * MS and 0 < took["b"] < 10 * MS
    assert took["Net"] <= calls["backward"].duration_ns


def test_no_backward_time_for_calls_without_a_graph(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(3, 4)).sum().backward()
opt.step()
with torch.no_grad():
    model(torch.randn(3, 4))
""", capture=CaptureOptions(lines=False))
    assert code == 0
    trained, evaluated = [c for c in run.calls(1, run.call_count()) if c.kind == "module"]
    assert trained.extra["backward_ns"] > 0 and "backward_ns" not in evaluated.extra


def _backward_ms(run) -> dict[str, float]:
    return {c.name: c.extra["backward_ns"] / MS for c in run.calls(1, run.call_count())
            if c.kind == "module" and "backward_ns" in c.extra}


def test_backward_time_of_ops_outside_every_call_is_no_calls(run_inprocess):
    code, run = run_inprocess(SLEEPY + """
w = nn.Parameter(torch.randn(2, 4))
emb, norm = Slow(0.0), Slow(0.0)
h = emb(torch.randn(2, 4))
bias = SlowFn.apply(w * 2, 0.05)  # the script's own op: 50 ms of backward
norm.lin.weight.register_post_accumulate_grad_hook(lambda p: time.sleep(0.05))
(norm(h) + bias).sum().backward()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    took = _backward_ms(run)
    assert {"emb", "norm"} <= set(took) and all(ms < 25 for ms in took.values()), took


def test_backward_times_of_several_roots_and_of_a_reentrant_checkpoint(run_inprocess):
    code, run = run_inprocess(SLEEPY + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Slow(0.04), Slow(0.06), Slow(0.02)

    def forward(self, x):
        return self.c(checkpoint(self.b, self.a(x), use_reentrant=True))

net = Net()
net(torch.randn(2, 4, requires_grad=True)).sum().backward()
first, second = Slow(0.03), Slow(0.05)
torch.autograd.backward([first(torch.randn(2, 4)).sum(), second(torch.randn(2, 4)).sum()])
""", capture=CaptureOptions(lines=False))
    assert code == 0
    calls = [c for c in run.calls(1, run.call_count()) if c.kind == "module"]
    took = {(c.name, c.phase): c.extra.get("backward_ns", 0) / MS for c in calls}
    assert 40 <= took[("a", "forward")] < 55 and 20 <= took[("c", "forward")] < 35
    # b is recomputed inside backward, and its backward is timed there, not in Net's
    assert 60 <= took[("b", "backward")] < 75 and took[("b", "forward")] < 10
    assert 60 <= took[("Net", "forward")] < 75
    assert 30 <= took[("first", "forward")] < 45 and 50 <= took[("second", "forward")] < 65


def test_backward_times_under_a_non_reentrant_checkpoint(run_inprocess):
    """Saved-tensor hooks stop tvis reading what the graph saved, not timing its nodes: the
    checkpointed call's backward time includes its recomputation (its forward, again)."""
    code, run = run_inprocess(SLEEPY + """
class Recomputed(Slow):
    def forward(self, x):
        time.sleep(0.03)
        return super().forward(x)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = Slow(0.02), Recomputed(0.04), Slow(0.01)

    def forward(self, x):
        return self.c(checkpoint(self.b, self.a(x), use_reentrant=False))

Net()(torch.randn(2, 4)).sum().backward()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    calls = [c for c in run.calls(1, run.call_count()) if c.kind == "module"]
    took = {(c.name, c.phase): c.extra.get("backward_ns", 0) / MS for c in calls}
    assert 20 <= took[("a", "forward")] < 35 and 10 <= took[("c", "forward")] < 25
    assert 70 <= took[("b", "forward")] < 90
    assert 100 <= took[("Net", "forward")] < 125
    assert any("saved-tensor hooks" in w for w in run.meta()["warnings"])


def test_an_optimizer_steps_closure_is_timed_in_its_own_phases(run_inprocess):
    code, run = run_inprocess("""
import time
import torch
from torch import nn

class Slow(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(4))
    def forward(self, x):
        time.sleep(0.020)
        return x * self.w

class TwoLooks(torch.optim.Optimizer):  # SAM-like: two closure runs, then its own work
    def __init__(self, params):
        super().__init__(params, {})
    @torch.no_grad()
    def step(self, closure):
        for _ in range(2):
            with torch.enable_grad():
                closure()
        time.sleep(0.010)
        for group in self.param_groups:
            for p in group["params"]:
                p -= 0.1 * p.grad

model = Slow()
opt = TwoLooks(model.parameters())
def closure():
    opt.zero_grad()
    loss = model(torch.ones(4)).sum()
    loss.backward()
    return loss
for _ in range(2):
    opt.step(closure)
""")
    assert code == 0
    step = run.steps()[1]
    phases = step.phase_ns
    assert 40 * MS <= phases["forward"] < 55 * MS  # two forwards of 20 ms, not the optimizer's
    assert 10 * MS <= phases["optimizer"] < 25 * MS  # its own 10 ms and the closures' glue
    assert phases.get("backward", 0) > 0 and sum(phases.values()) == step.extra["wall_ns"]
