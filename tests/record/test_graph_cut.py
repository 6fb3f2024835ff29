"""A call of the forward that cut the autograd graph: given an input that requires grad, it
returned floating-point tensors that do not (`.detach()`, `.data`, a numpy round trip), so
nothing before it gets a gradient through it. Marked on the call and listed in the step."""

from __future__ import annotations

import pytest

CUT = """
import numpy as np
import torch
from torch import nn
torch.manual_seed(0)

def standardize(h):
    return {body}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(8, 16), nn.ReLU())
        self.head = nn.Linear(16, 3)
    def forward(self, x):
        return self.head(standardize(self.encoder(x)))

model = Model()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = torch.randn(32, 8), torch.randint(3, (32,))
    logits = model(x)
    predicted = logits.argmax(1)  # an integer result needs no gradient
    with torch.no_grad():
        model(x)  # nothing cut under no_grad: by design
    loss = nn.functional.cross_entropy(logits, y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def _cut_calls(run) -> list[tuple[int, str]]:
    return [(c.seq, c.name) for c in run.calls(1, run.call_count()) if c.extra.get("graph_cut")]


@pytest.mark.parametrize("body, cut", [
    ("((h - h.mean(0)) / h.std(0)).detach()", True),  # sweep O
    ("torch.from_numpy(h.detach().numpy() * 2)", True),  # through numpy
    ("h.data * 2", True),
    ("(h - h.mean(0)) / h.std(0)", False),
])
def test_a_call_that_cut_the_graph_is_marked_and_listed_in_its_step(run_inprocess, body, cut):
    code, run = run_inprocess(CUT.format(body=body))
    assert code == 0
    cuts = _cut_calls(run)
    assert [name for _, name in cuts] == (["standardize", "standardize"] if cut else [])
    for step, (seq, _) in zip(run.steps(), cuts):
        assert step.extra["graph_cuts"] == [[seq, "standardize"]]
    if not cut:
        assert all("graph_cuts" not in step.extra for step in run.steps())
