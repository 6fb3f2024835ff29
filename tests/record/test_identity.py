"""Observing must not change training: each bundled example ends bitwise identical (params,
optimizer state, RNG state, printed losses) with and without tvis, in separate processes."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from tvis_tui.store import RunReader

from .helpers import EXAMPLES, tvis_cli, tvis_env


def _assert_identical(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_identical(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.parametrize("example", ["image_classifier", "char_lm"])
def test_training_is_bitwise_identical_under_tvis(tmp_path, example):
    script = str(EXAMPLES / example / "train.py")
    args = ["--max-steps", "6"]
    plain = subprocess.run([sys.executable, script, *args, "--save-state", "plain.pt"], cwd=tmp_path,
                           env=tvis_env(), capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    # tvis's own limit is above the script's, so the script runs to its end and saves.
    traced = tvis_cli("run", "--steps", "50", "--out", "runs", script, *args, "--save-state", "tvis.pt",
                      cwd=tmp_path, timeout=120)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout and "loss" in plain.stdout
    _assert_identical(torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "tvis.pt"))
    assert "recorded 6 steps" in traced.stderr


USER_CODE = '''
import sys
import torch
from torch import nn

def noisy(x):
    return nn.functional.dropout(x, 0.3) + torch.randn_like(x) * 0.01

def running_mean(xs):
    total = torch.zeros_like(xs[0])
    for x in xs:
        total = total + x
    return total / len(xs)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(6, 6)
        self.head = nn.Linear(6, 2)

    def forward(self, x):
        h = noisy(self.lin(x))
        return self.head(running_mean([h, h.flip(0)]))

def train_step(net, opt, x, y):
    loss = nn.functional.cross_entropy(net(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss

torch.manual_seed(0)
net = Net()
opt = torch.optim.Adam(net.parameters(), lr=1e-2)
for i in range(5):
    x, y = torch.randn(16, 6), torch.randint(2, (16,))
    print(f"loss {train_step(net, opt, x, y).item():.10f}")
torch.save({"params": net.state_dict(), "opt": opt.state_dict(),
            "rng": torch.get_rng_state()}, sys.argv[1])
'''


@pytest.mark.parametrize("flags", [[], ["--no-lines"]], ids=["lines", "no-lines"])
def test_user_functions_and_lines_leave_training_bitwise_identical(tmp_path, flags):
    """Tracing user functions and lines (sys.settrace) must not change a thing either."""
    script = tmp_path / "train.py"
    script.write_text(USER_CODE)
    plain = subprocess.run([sys.executable, str(script), "plain.pt"], cwd=tmp_path, env=tvis_env(),
                           capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    traced = tvis_cli("run", *flags, "--out", "runs", str(script), "tvis.pt", cwd=tmp_path, timeout=120)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout and "loss" in plain.stdout
    _assert_identical(torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "tvis.pt"))
    assert "recorded 5 steps" in traced.stderr
    with RunReader(next((tmp_path / "runs").iterdir())) as run:
        names = {c.name for c in run.calls(1, run.call_count()) if c.kind == "function"}
        assert {"train_step", "noisy", "running_mean"} <= names
        assert run.has_line_shapes() == (flags == [])
