"""Which phase a call is filed under, and so which of a step's phase times it counts in."""

from __future__ import annotations

from tvis_tui.record.options import CaptureOptions

SCRIPT = """
import time
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        with torch.no_grad():  # the usual probe for the head's input size
            n = self.features(torch.zeros(1, 4)).shape[1]
        self.head = nn.Linear(n, 3)

    def forward(self, x):
        return self.head(self.features(x))

@torch.no_grad()
def evaluate(model, x, y):
    return nn.CrossEntropyLoss()(model(x), y).item()

torch.manual_seed(0)
model = Net()
frozen = nn.Linear(4, 4).requires_grad_(False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
x, y = torch.randn(6, 4), torch.randint(3, (6,))
for step in range(2):
    with torch.no_grad():
        x_in = frozen(x)  # a frozen part, run without autograd
    loss = criterion(model(x_in), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    evaluate(model, x, y)
    with torch.inference_mode():
        torch.nn.functional.cross_entropy(model(x), y)
"""


def _top_level(run, step):
    return [(c.phase, c.name) for c in run.calls(1, run.call_count()) if c.step == step and c.depth == 0]


def test_calls_made_with_autograd_off_are_the_no_grad_phase(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    assert _top_level(run, 2) == [
        ("no_grad", "Linear"),  # the frozen layer
        ("forward", "Net"),
        ("loss", "CrossEntropyLoss"),
        ("backward", "backward"),
        ("optimizer", "SGD"),
        ("no_grad", "evaluate"),  # a @torch.no_grad() user function
        ("no_grad", "Net"),  # inference_mode
        ("no_grad", "F.cross_entropy"),
    ]
    calls = run.calls(1, run.call_count())
    evaluate = next(c for c in calls if c.step == 2 and c.name == "evaluate")
    inside = [(c.phase, c.name) for c in calls if c.parent == evaluate.seq]
    assert inside == [("no_grad", "Net"), ("no_grad", "CrossEntropyLoss")]
    # A criterion's own F.cross_entropy is not recorded again as a call inside it.
    criteria = {c.seq for c in calls if c.name == "CrossEntropyLoss"}
    assert not [c for c in calls if c.parent in criteria]


def test_a_probe_while_building_the_model_is_not_the_first_steps_forward(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    first = _top_level(run, 1)
    assert first[0] == ("no_grad", "Sequential")  # the probe in Net.__init__ (no Net call yet)
    one, two = run.steps()
    # The probe, the frozen layer and the evaluations are timed apart from the forward.
    assert one.phase_ns["no_grad"] > 0 and two.phase_ns["no_grad"] > 0
    calls = run.calls(1, run.call_count())
    for step in (one, two):
        forward = sum(c.duration_ns for c in calls
                      if c.step == step.step and c.depth == 0 and c.phase == "forward")
        assert step.phase_ns["forward"] == forward
    assert sum(one.phase_ns.values()) == one.extra["wall_ns"]


def test_no_grad_inside_a_model_call_stays_in_its_forward(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.target = nn.Linear(4, 4)
        self.online = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            t = self.target(x)
        return (self.online(x) - t).pow(2).mean()

model = Net()
opt = torch.optim.SGD(model.online.parameters(), lr=0.1)
model(torch.randn(2, 4)).backward()
opt.step()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert [(c.phase, c.name) for c in run.calls(1, run.call_count()) if c.kind == "module"] == \
        [("forward", "Net"), ("forward", "target"), ("forward", "online")]


def test_per_sample_loss_still_comes_from_the_training_loss(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    step = run.steps()[1]
    assert step.extra["per_sample_loss"]["trains"] is True
    train_loss = next(c for c in run.calls(1, run.call_count())
                      if c.step == 2 and c.phase == "loss" and c.name == "CrossEntropyLoss")
    assert step.extra["per_sample_loss"]["seq"] == train_loss.seq
