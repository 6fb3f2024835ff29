"""BatchNorm and Dropout trained in eval mode: model.train() forgotten after a validation."""

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
wrapper = nn.Sequential(model)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def validate():
    model.eval()
    with torch.no_grad():
        model(torch.randn(4, 4))
for step in range(2):
    {before}
    opt.zero_grad()
    nn.functional.cross_entropy(wrapper(torch.randn(6, 4)), torch.randint(0, 2, (6,))).backward()
    opt.step()
    validate()
"""

CASES = {
    # validate() leaves the model in eval mode; nothing puts it back: step 2 trains in it.
    "model.train() forgotten": ("pass", [[], ["0.body.1", "0.body.3"]]),
    "model.train() each step": ("model.train()", [[], []]),
    # Fine-tuning on purpose: a frozen BatchNorm keeps its running statistics.
    "frozen BatchNorm": ("model.train(); model.body[1].eval(); model.body[1].requires_grad_(False)", [[], []]),
    # The model behind a wrapper that stays in train mode is trained in eval mode all the same.
    "wrapped model left in eval": ("wrapper.train(); model.eval()", [["0.body.1", "0.body.3"]] * 2),
}


@pytest.mark.parametrize("case", CASES)
def test_layers_trained_in_eval_mode_are_named_by_their_step(run_inprocess, case):
    from tvis_tui.store.step_details import eval_layers

    before, expected = CASES[case]
    code, run = run_inprocess(SCRIPT.format(before=before))
    assert code == 0
    assert [eval_layers(run, step) for step in (1, 2)] == expected


def test_eval_mode_that_changes_nothing_or_trains_nothing_is_not_flagged(run_inprocess):
    # A frozen feature network for a perceptual loss, and a model without BatchNorm or
    # Dropout: eval mode on purpose, or with no effect (review).
    from tvis_tui.store.step_details import eval_layers

    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
features = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5)).eval().requires_grad_(False)
plain = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4)).eval()
opt = torch.optim.SGD(plain.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    out = plain(torch.randn(6, 4))
    nn.functional.mse_loss(features(out), features(torch.randn(6, 4))).backward()
    opt.step()
""")
    assert code == 0
    assert [eval_layers(run, step) for step in (1, 2)] == [[], []]


def test_the_status_line_says_a_layer_is_trained_in_eval_mode(run_inprocess):
    from tvis_tui.widgets.status_line import status_text

    code, run = run_inprocess(SCRIPT.format(before="pass"))
    assert code == 0
    calls = run.calls(1, run.call_count())
    dropout = next(c for c in calls if c.step == 2 and c.type == "Dropout" and c.phase == "forward")
    assert "forward  call" in status_text("run", dropout, len(calls), None, "ok").plain
    assert "eval mode while training" in status_text("run", dropout, len(calls), None, "ok").plain
    validation = next(c for c in calls if c.type == "Dropout" and c.phase == "no_grad")
    assert "eval mode" not in status_text("run", validation, len(calls), None, "ok").plain
