"""CPU peak memory: live tensor storage tvis sees, against sizes computed by hand."""

from __future__ import annotations

import gc

import torch

from tvis_tui.record.live_tensors import LiveTensors
from tvis_tui.record.options import CaptureOptions
from tvis_tui.vram.trace import trace

from .helpers import write_script

B, IN, H, OUT = 512, 256, 512, 128
F32 = 4
PARAMS = (IN * H + H + H * OUT + OUT) * F32
ADAM_STEPS = 4 * F32  # one float32 `step` tensor per parameter
BATCH = B * IN * F32 + B * OUT * F32  # x and y, alive all along
HIDDEN = B * H * F32  # the first Linear's output, and ReLU's
LOSS = B * OUT * F32
"""CPU mse_loss returns a 0-dim view of its elementwise buffer: the loss holds B x OUT floats."""

MLP = f"""
import torch
import torch.nn.functional as F
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear({IN}, {H}), nn.ReLU(), nn.Linear({H}, {OUT}))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x, y = torch.randn({B}, {IN}), torch.randn({B}, {OUT})
for _ in range(3):
    opt.zero_grad()
    loss = F.mse_loss(model(x), y)
    loss.backward()
    opt.step()
"""


def _near(measured: int, expected: int, rel: float = 0.03) -> bool:
    return abs(measured - expected) <= rel * expected


def _op_by_op_peaks(tmp_path, source: str) -> list[int]:
    """Step peaks of live storage counted at every op (tvis vram's tracker, real tensors)."""
    return trace(write_script(tmp_path / "ref", source), fake=False).step_peaks


def test_mlp_peak_is_params_adam_state_batch_and_activations(run_inprocess, tmp_path):
    code, run = run_inprocess(MLP)
    assert code == 0
    steps = run.steps()
    assert len(steps) == 3
    # From step 2 on Adam's state (2 x params) is resident during forward. The peak is as
    # ReLU returns: its input (the Linear's output, which no backward saves and which dies
    # next) and its output are alive, and the previous step's loss is still bound to `loss`.
    forward_peak = PARAMS + 2 * PARAMS + ADAM_STEPS + BATCH + 2 * HIDDEN + LOSS
    # After backward: activations freed, gradients made.
    optimizer_peak = PARAMS + PARAMS + 2 * PARAMS + ADAM_STEPS + BATCH + LOSS
    reference = _op_by_op_peaks(tmp_path, MLP)
    for step in steps[1:]:
        assert step.extra["peak_method"].startswith("live tensor storage")
        phases = step.extra["peak_phase_bytes"]
        assert _near(phases["forward"], forward_peak), (phases, forward_peak)
        assert _near(phases["optimizer"], optimizer_peak), (phases, optimizer_peak)
        # The step's peak is inside backward (gradients in flight while saved activations
        # are still held); counted op by op it is the same.
        assert step.peak_bytes == phases["backward"] == max(phases.values())
        assert _near(step.peak_bytes, reference[1], 0.01), (step.peak_bytes, reference)
        assert step.extra["rss_peak_bytes"] > 0  # the process's peak, for comparison
    # Step 1: no Adam state during forward; the state appears at its optimizer step.
    assert _near(steps[0].peak_bytes, reference[0], 0.01), (steps[0].peak_bytes, reference)
    assert run.meta()["live_tensor_peak_bytes"] == max(s.peak_bytes for s in steps)


def test_views_count_once_and_storage_is_released_when_the_last_dies():
    live = LiveTensors()
    t = torch.zeros(1000)
    view = t[10:20]
    live.see(t)
    live.see(view)
    assert live.total == 4000
    del t
    gc.collect()
    assert live.total == 4000  # the view still holds the storage
    del view
    gc.collect()
    assert live.total == 0 and live.peak == 4000


def test_grad_requiring_outputs_count_until_backward_returns():
    live = LiveTensors()
    w = torch.ones(100, requires_grad=True)
    out = torch.relu(w * 2)  # relu saves its result for backward
    live.see(out, "forward", activation=True)
    plain = torch.ones(50)
    live.see(plain, "forward", activation=True)  # no grad_fn: not kept for backward
    del out, plain
    gc.collect()
    assert live.total == 400  # autograd may have saved it
    live.backward_done()
    assert live.total == 0
    peak, phases = live.end_step()
    assert peak == 600 and phases == {"forward": 600, "backward": 400}


def test_tensors_saved_inside_a_module_count_in_backward(run_inprocess, tmp_path):
    b, n_in, n_hidden = 256, 128, 1024
    source = f"""
import torch
from torch import nn
torch.manual_seed(0)

class Gate(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear({n_in}, {n_hidden})

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))  # saved by sigmoid and by the product, never an output
        return (h * h).sum(dim=1)

model = Gate()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn({b}, {n_in})
for _ in range(2):
    opt.zero_grad()
    loss = model(x).mean()
    loss.backward()
    opt.step()
"""
    code, run = run_inprocess(source)
    assert code == 0
    params = (n_in * n_hidden + n_hidden) * F32
    saved_hidden = b * n_hidden * F32
    expected = params + b * n_in * F32 + saved_hidden + b * F32 + F32
    step = run.steps()[1]
    # At least what was alive as backward began; a module output could not show it.
    assert step.extra["peak_phase_bytes"]["backward"] >= expected
    reference = _op_by_op_peaks(tmp_path, source)
    assert _near(step.peak_bytes, reference[1], 0.01), (step.peak_bytes, reference)


def test_tensors_past_the_slot_cap_still_count(run_inprocess):
    from tvis_tui.record.slots import MAX_SLOTS

    pieces, size = MAX_SLOTS + 36, 64 * 1024  # 100 outputs of 256 KiB, 64 of them recorded
    code, run = run_inprocess(f"""
import torch
from torch import nn

class Split(nn.Module):
    def forward(self, x):
        return [x * i for i in range({pieces})]

lin, split = nn.Linear(2, 2), Split()
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(2):
    parts = split(torch.ones({size}))
    del parts
    opt.zero_grad(); lin(torch.ones(1, 2)).sum().backward(); opt.step()
""", steps=2)
    assert code == 0
    assert run.steps()[0].peak_bytes >= pieces * size * F32


def test_saved_tensor_hooks_stop_reading_what_the_graph_saved_and_the_run_says_so(run_inprocess):
    """Reading what a node saved would run the script's unpack hook (a recomputation):
    from the step that first uses saved-tensor hooks on, the memory figure leaves what
    autograd saved out, and the run says so; module calls keep their backward time."""
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

model = nn.Sequential(nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    x = torch.randn(4, 8)
    out = checkpoint(model, x, use_reentrant=False) if step else model(x)
    out.sum().backward()
    opt.step()
    opt.zero_grad()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    warnings = [w for w in run.meta()["warnings"] if "saved-tensor hooks" in w]
    assert len(warnings) == 1 and warnings[0].startswith("step 2: ")
    methods = [s.extra["peak_method"] for s in run.steps()]
    assert methods[0].endswith("outputs kept for backward")
    assert methods[1] == methods[2] and methods[1].endswith("(saved-tensor hooks were in use)")
    timed = {c.step: "backward_ns" in c.extra for c in run.calls(1, run.call_count())
             if c.kind == "module" and c.name == "Sequential" and c.phase == "forward"}
    assert timed == {1: True, 2: True, 3: True}


def test_a_step_of_no_grad_calls_counts_its_parameters_in_no_grad_not_forward(run_inprocess):
    # An optimizer made before the first call: its parameters are first counted as that
    # call opens, in the call's phase. A step with no forward showed "forward 48 B".
    code, run = run_inprocess("""
import torch
from torch import nn
model = nn.Linear(3, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
with torch.no_grad():
    for i in range(3):
        out = model(torch.randn(2, 3))
""")
    assert code == 0
    (step,) = run.steps()
    params = (3 * 3 + 3) * F32
    assert step.phase_ns.keys() & {"forward", "no_grad"} == {"no_grad"}
    phases = step.extra["peak_phase_bytes"]
    assert set(phases) == {"no_grad"}
    assert phases["no_grad"] >= params + 2 * 3 * F32
