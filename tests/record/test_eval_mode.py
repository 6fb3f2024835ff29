"""Module calls in eval mode: a model left in eval mode while training is a bug."""

from __future__ import annotations

import pytest

SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Dropout(0.5))
        self.head = nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.body(x))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def validate():
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 4))
for step in range(2):
    {before}
    opt.zero_grad()
    nn.functional.cross_entropy(model(torch.randn(6, 4)), torch.randint(0, 2, (6,))).backward()
    opt.step()
    validate(){after}
"""

CASES = {
    # validate() leaves the model in eval mode; nothing puts it back: step 2 trains in it.
    "model.train() forgotten": ("pass", "", [[], ["Net"]]),
    "model.train() each step": ("model.train()", "", [[], []]),
    # Fine-tuning on purpose: the body's BatchNorm keeps its running statistics.
    "frozen BatchNorm": ("model.train(); model.body[1].eval()", "", [[], []]),
}


@pytest.mark.parametrize("case", CASES)
def test_a_model_in_eval_mode_while_training_is_named_by_its_step(run_inprocess, case):
    from tvis_tui.screens.step_view import eval_mode_models

    before, after, expected = CASES[case]
    code, run = run_inprocess(SCRIPT.format(before=before, after=after))
    assert code == 0
    assert [eval_mode_models(run, step) for step in (1, 2)] == expected


def test_each_module_call_says_it_ran_in_eval_mode(run_inprocess):
    from tvis_tui.widgets.status_line import status_text

    code, run = run_inprocess(SCRIPT.format(before="pass", after=""))
    assert code == 0
    calls = run.calls(1, run.call_count())
    training = [c for c in calls if c.kind == "module" and c.phase == "forward"]
    assert not [c for c in training if c.step == 1 and "eval_mode" in c.extra]
    assert {c.name for c in training if c.step == 2 and c.extra.get("eval_mode")} == {
        "Net", "body", "body.0", "body.1", "body.2", "body.3", "head"}
    dropout = next(c for c in training if c.step == 2 and c.name == "body.3")
    assert "forward  call" in status_text("run", dropout, len(calls), None, "ok").plain
    assert "eval mode" in status_text("run", dropout, len(calls), None, "ok").plain
