"""A module call's settings (`extra_repr`) and a recurrent layer fed its batch on the
dimension it reads as time (record/module_config.py)."""

from __future__ import annotations

import pytest

LSTM = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
torch.manual_seed(0)

class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(4, 8{batch_first})
        self.fc = nn.Linear(8, 2)
    def forward(self, x):
        out, _ = self.lstm({feed})
        return self.fc(out[{last}])

data = TensorDataset(torch.randn(24, 5, 4), torch.randint(2, (24,)))
model = Classifier()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(data, batch_size=6):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
    break
"""


def _call(run, name: str):
    return next(c for c in run.calls(1, run.call_count()) if c.name == name)


@pytest.mark.parametrize("batch_first, feed, last, mismatch", [
    # nn.LSTM(F, H) fed (B, T, F): T sequences of B steps; out[:, -1] is still (B, H) (sweep O)
    ("", "x", ":, -1", {"batch_first": False, "shape": [6, 5, 4], "batch": 6}),
    (", batch_first=True", "x", ":, -1", None),
    ("", "x.transpose(0, 1)", "-1", None),  # (T, B, F), as the layer reads it
    (", batch_first=True", "x.transpose(0, 1)", "-1", {"batch_first": True, "shape": [5, 6, 4], "batch": 6}),
])
def test_a_recurrent_layer_fed_its_batch_as_time_says_so(run_inprocess, batch_first, feed, last, mismatch):
    code, run = run_inprocess(LSTM.format(batch_first=batch_first, feed=feed, last=last))
    assert code == 0
    lstm = _call(run, "lstm")
    assert lstm.extra.get("batch_dim_mismatch") == mismatch
    assert lstm.extra["config"] == "4, 8" + batch_first


def test_a_calls_settings_are_its_modules_extra_repr(run_inprocess):
    code, run = run_inprocess(LSTM.format(batch_first="", feed="x", last=":, -1"))
    assert code == 0
    assert _call(run, "fc").extra["config"] == "in_features=8, out_features=2, bias=True"
    assert "config" not in _call(run, "Classifier").extra  # no extra_repr of its own
