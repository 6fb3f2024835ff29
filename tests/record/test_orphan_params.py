"""Parameters that get a gradient but that no optimizer steps: they never train."""

from __future__ import annotations

SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone, self.head = nn.Linear(4, 8), nn.Linear(8, 2)

    def forward(self, x):
        return self.head(torch.relu(self.backbone(x)))

net = Net()
{optimizer}
teacher = Net()  # run under no_grad: no gradients, nothing to report
for step in range(2):
    opt.zero_grad()
    x = torch.randn(6, 4)
    with torch.no_grad():
        target = teacher(x)
    nn.functional.mse_loss(net(x), target).backward()
    opt.step()
"""


def _optimizer_calls(run):
    return [c for c in run.calls(1, run.call_count()) if c.kind == "optimizer"]


def test_a_head_left_out_of_the_optimizer_is_named_at_every_step(run_inprocess):
    from tvis_tui.store.parameters import parameter_history
    from tvis_tui.widgets.inspector import optimizer_rows
    from tvis_tui.widgets.status_line import status_text

    code, run = run_inprocess(SCRIPT.format(optimizer="opt = torch.optim.SGD(net.backbone.parameters(), lr=0.1)"))
    assert code == 0
    calls = _optimizer_calls(run)
    assert [(c.extra["not_stepped"], c.extra["not_stepped_count"]) for c in calls] == \
        [(["net.head.weight", "net.head.bias"], 2)] * 2
    assert "2 params in no optimizer" in status_text("run", calls[0], run.call_count(), None, "ok").plain
    rows = [(f"{r.role} {r.path}", r.repr) for r in optimizer_rows(calls[0])]
    assert rows[1:] == [("no optimizer net.head.weight", "has a gradient; no optimizer steps it"),
                        ("no optimizer net.head.bias", "has a gradient; no optimizer steps it")]
    history = parameter_history(run)
    assert history.not_stepped == {"net.head.weight": [1, 2], "net.head.bias": [1, 2]}


def test_every_parameter_in_some_optimizer_reports_nothing(run_inprocess):
    # Two optimizers, one per part (as a GAN's or per-layer learning rates): all covered.
    code, run = run_inprocess(SCRIPT.format(optimizer=(
        "a = torch.optim.SGD(net.backbone.parameters(), lr=0.1)\n"
        "b = torch.optim.Adam(net.head.parameters())\n"
        "class Both:\n"
        "    def zero_grad(self): a.zero_grad(); b.zero_grad()\n"
        "    def step(self): a.step(); b.step()\n"
        "opt = Both()")))
    assert code == 0
    calls = _optimizer_calls(run)
    assert len(calls) == 4 and not [c for c in calls if "not_stepped" in c.extra]


def test_a_part_frozen_when_training_moves_to_a_new_optimizer_is_not_reported(run_inprocess):
    # Its gradients from before the switch are still there, but it no longer trains on
    # purpose (review: reported as "in no optimizer" at every later step).
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(4):
    if step == 2:
        net[0].requires_grad_(False)
        opt = torch.optim.SGD(net[2].parameters(), lr=0.1)
    opt.zero_grad()
    nn.functional.mse_loss(net(torch.randn(6, 4)), torch.randn(6, 2)).backward()
    opt.step()
""")
    assert code == 0
    assert not [c.extra for c in _optimizer_calls(run) if "not_stepped" in c.extra]


BARE = """
import torch
from torch import nn
torch.manual_seed(0)

class Trainer:
    def __init__(self):
        self.net = nn.Linear(4, 3)
        self.log_scale = nn.Parameter(torch.zeros(()))  # a learned loss weight, no module
        self.opt = torch.optim.SGD({params}, lr=0.1)

    def fit(self):
        temperature = nn.Parameter(torch.ones(()))  # learned too, in the loop's own locals
        {temperature_in_opt}
        for step in range(2):
            self.opt.zero_grad()
            logits = self.net(torch.randn(6, 4)) / temperature
            loss = nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2] * 2))
            (loss * self.log_scale.exp()).backward()
            self.opt.step()

Trainer().fit()
"""


def test_a_bare_parameter_the_stepping_code_sees_is_named_when_no_optimizer_steps_it(run_inprocess):
    code, run = run_inprocess(BARE.format(params="self.net.parameters()", temperature_in_opt="pass"))
    assert code == 0
    calls = _optimizer_calls(run)
    assert [(sorted(c.extra["not_stepped"]), c.extra["not_stepped_count"]) for c in calls] == \
        [(["log_scale", "temperature"], 2)] * 2


def test_bare_parameters_an_optimizer_steps_are_not_reported(run_inprocess):
    code, run = run_inprocess(BARE.format(
        params="[*self.net.parameters(), self.log_scale]",
        temperature_in_opt="self.opt.add_param_group({'params': [temperature]})"))
    assert code == 0
    calls = _optimizer_calls(run)
    assert len(calls) == 2 and not [c.extra for c in calls if "not_stepped" in c.extra]
