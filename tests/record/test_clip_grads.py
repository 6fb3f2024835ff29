"""Gradient clipping calls: in the tree where the script made them, and one made before
backward (it clips nothing) says so."""

from __future__ import annotations

from .helpers import assert_same_state, train_plain_and_under_tvis, write_script

SCRIPT = """
import sys
import torch
from torch import nn
from torch.nn.utils import clip_grad_norm_
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(3):
    opt.zero_grad()
    loss = nn.functional.mse_loss(model(torch.randn(6, 4)), torch.randn(6, 2))
    early = clip_grad_norm_(model.parameters(), 0.1)  # the bug: nothing to clip yet
    loss.backward()
    torch.nn.utils.clip_grad_value_(parameters=model.parameters(), clip_value=0.05)
    opt.step()
    print("loss", loss.item(), float(early))
torch.save({"model": model.state_dict(), "rng": torch.get_rng_state()}, sys.argv[1])
"""


def test_clip_calls_are_recorded_and_the_early_one_says_it_clipped_nothing(run_inprocess, tmp_path):
    from tvis_tui.widgets.status_line import status_text

    code, run = run_inprocess(SCRIPT, str(tmp_path / "state.pt"))
    assert code == 0
    calls = run.calls(1, run.call_count())
    clips = [c for c in calls if c.name.startswith("clip_grad")]
    assert [(c.name, c.step, c.phase) for c in clips] == [
        (name, step, "optimizer") for step in (1, 2, 3) for name in ("clip_grad_norm_", "clip_grad_value_")]
    early, late = clips[0], clips[1]
    assert (early.extra["clip_params"], early.extra["clip_grads"]) == (4, 0)
    assert (late.extra["clip_params"], late.extra["clip_grads"]) == (4, 4)
    # In call order: the early clip before the step's backward, the late one after it.
    backward = next(c for c in calls if c.kind == "backward" and c.step == 1)
    assert early.seq < backward.seq < late.seq
    assert [s.repr for s in run.slots(early.seq, "input")] == ["0.1"]  # max_norm; not the parameters
    assert [s.path for s in run.slots(late.seq, "input")] == ["kwargs['clip_value']"]
    assert "no gradient to clip (before backward?)" in status_text("run", early, len(calls), None, "ok").plain
    assert "no gradient to clip" not in status_text("run", late, len(calls), None, "ok").plain


def test_clipping_under_tvis_trains_bitwise_as_without(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    train_plain_and_under_tvis(tmp_path, str(script), ["plain.pt"], ["tvis.pt"])
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")
