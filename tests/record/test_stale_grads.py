"""Optimizer steps that apply a gradient an earlier step applied: no zero_grad between."""

from __future__ import annotations

import pytest

MODEL = """
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(6, 4), torch.randn(6, 2)
def loss_of():
    return nn.functional.mse_loss(model(x), y)
"""

NO_ZERO_GRAD = MODEL + """
for step in range(3):
    loss_of().backward()
    opt.step()
"""
NAMES = ["Sequential.0.weight", "Sequential.0.bias", "Sequential.2.weight", "Sequential.2.bias"]


def _not_zeroed(run) -> list[tuple[list[str], int] | None]:
    """Per optimizer step: (names, count) of the gradients not zeroed, None where all were."""
    steps = [c for c in run.calls(1, run.call_count()) if c.kind == "optimizer"]
    return [(c.extra["not_zeroed"], c.extra["not_zeroed_count"]) if "not_zeroed" in c.extra else None
            for c in steps]


def test_a_loop_without_zero_grad_reports_every_parameter_from_its_second_step(run_inprocess):
    code, run = run_inprocess(NO_ZERO_GRAD)
    assert code == 0
    assert _not_zeroed(run) == [None, (NAMES, 4), (NAMES, 4)]


def test_zeroing_only_the_head_reports_the_rest(run_inprocess):
    code, run = run_inprocess(MODEL + """
for step in range(2):
    model[2].zero_grad()
    loss_of().backward()
    opt.step()
""")
    assert code == 0
    assert _not_zeroed(run) == [None, (NAMES[:2], 2)]


ZEROED_LOOPS = {
    "optimizer zero_grad": "opt.zero_grad()\n    loss_of().backward()\n    opt.step()",
    "zero_grad set_to_none=False": "opt.zero_grad(set_to_none=False)\n    loss_of().backward()\n    opt.step()",
    "zero_grad after the step": "loss_of().backward()\n    opt.step()\n    model.zero_grad()",
    "grad = None by hand": ("loss_of().backward()\n    opt.step()\n"
                            "    for p in model.parameters():\n        p.grad = None"),
    "grad.zero_() by hand": ("for p in model.parameters():\n        if p.grad is not None:\n"
                             "            p.grad.zero_()\n    loss_of().backward()\n    opt.step()"),
    # Old tutorials: through .data, which leaves the version counter where it was.
    "grad.data.zero_() by hand": ("for p in model.parameters():\n        if p.grad is not None:\n"
                                  "            p.grad.data.zero_()\n    loss_of().backward()\n    opt.step()"),
    # Two micro-batches a step: they add up on purpose, after a zero_grad.
    "accumulation": ("opt.zero_grad()\n    for micro in range(2):\n"
                     "        (loss_of() / 2).backward()\n    opt.step()"),
}


@pytest.mark.parametrize("loop", ZEROED_LOOPS)
def test_loops_that_zero_the_gradients_report_nothing(run_inprocess, loop):
    code, run = run_inprocess(MODEL + "for step in range(3):\n    " + ZEROED_LOOPS[loop] + "\n")
    assert code == 0
    assert _not_zeroed(run) == [None, None, None]


def test_a_gan_whose_generator_backward_reaches_the_discriminator_reports_nothing(run_inprocess):
    # DCGAN's loop: G's loss backward adds to D's gradients after D stepped; D.zero_grad()
    # clears them before D steps again.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
G, D = nn.Linear(2, 4), nn.Sequential(nn.Linear(4, 1), nn.Sigmoid())
opt_g, opt_d = torch.optim.Adam(G.parameters()), torch.optim.Adam(D.parameters())
bce = nn.BCELoss()
for step in range(3):
    real, z = torch.randn(8, 4), torch.randn(8, 2)
    D.zero_grad()
    d_loss = bce(D(real), torch.ones(8, 1)) + bce(D(G(z).detach()), torch.zeros(8, 1))
    d_loss.backward()
    opt_d.step()
    G.zero_grad()
    bce(D(G(z)), torch.ones(8, 1)).backward()
    opt_g.step()
""")
    assert code == 0
    assert _not_zeroed(run) == [None] * 6


def test_the_status_line_and_the_parameters_view_say_so(run_inprocess):
    from tvis_tui.store.parameters import parameter_history
    from tvis_tui.widgets.inspector import optimizer_rows
    from tvis_tui.widgets.status_line import status_text

    code, run = run_inprocess(NO_ZERO_GRAD)
    assert code == 0
    steps = [c for c in run.calls(1, run.call_count()) if c.kind == "optimizer"]
    text = status_text("run", steps[1], run.call_count(), None, "ok").plain
    assert "4 grads not zeroed" in text
    rows = [(f"{r.role} {r.path}", r.repr) for r in optimizer_rows(steps[1])]
    assert rows[1:3] == [("not zeroed Sequential.0.weight", "holds the last step's gradient too"),
                         ("not zeroed Sequential.0.bias", "holds the last step's gradient too")]
    assert not [r for r in optimizer_rows(steps[0]) if r.role == "not zeroed"]
    history = parameter_history(run)
    assert history.not_zeroed == {2: 4, 3: 4}
