"""Observing must not change training: each bundled example ends bitwise identical (params,
optimizer state, RNG state, printed losses) with and without tvis, in separate processes."""

from __future__ import annotations

import pytest

from tvis_tui.store import RunReader, samples

from .helpers import EXAMPLES, assert_same_state, train_plain_and_under_tvis, write_script


@pytest.mark.parametrize("example", ["image_classifier", "char_lm"])
def test_training_is_bitwise_identical_under_tvis(tmp_path, example):
    script = str(EXAMPLES / example / "train.py")
    args = ["--max-steps", "6"]
    # tvis's own limit is above the script's, so the script runs to its end and saves.
    traced = train_plain_and_under_tvis(tmp_path, script, [*args, "--save-state", "plain.pt"],
                                        [*args, "--save-state", "tvis.pt"], flags=("--steps", "50"))
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")
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
    script = write_script(tmp_path, USER_CODE)
    traced = train_plain_and_under_tvis(tmp_path, str(script), ["plain.pt"], ["tvis.pt"], flags=tuple(flags))
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")
    assert "recorded 5 steps" in traced.stderr
    with RunReader(next((tmp_path / "runs").iterdir())) as run:
        names = {c.name for c in run.calls(1, run.call_count()) if c.kind == "function"}
        assert {"train_step", "noisy", "running_mean"} <= names
        assert run.has_line_shapes() == (flags == [])


WORKERS = '''
import sys
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

class Noisy(Dataset):  # random augmentation drawn in the worker, from its own seed
    def __len__(self):
        return 32

    def __getitem__(self, i):
        x = torch.full((6,), float(i)) / 32
        return x + torch.randn(6) * 0.1, i % 2

if __name__ == "__main__":  # a spawned worker imports this file
    torch.manual_seed(0)
    net = nn.Linear(6, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    loader = DataLoader(Noisy(), batch_size=8, shuffle=True, num_workers=2,
                        multiprocessing_context=sys.argv[2])
    for x, y in loader:
        loss = nn.functional.cross_entropy(net(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(f"loss {loss.item():.10f}")
    torch.save({"params": net.state_dict(), "rng": torch.get_rng_state()}, sys.argv[1])
'''


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers_leave_training_bitwise_identical(tmp_path, context):
    """Workers fetch under tvis's observation too (their samples are recorded)."""
    script = write_script(tmp_path, WORKERS)
    traced = train_plain_and_under_tvis(tmp_path, str(script), ["plain.pt", context], ["tvis.pt", context])
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")
    assert "recorded 4 steps" in traced.stderr
    with RunReader(next((tmp_path / "runs").iterdir())) as run:
        assert {b["worker"] for b in samples.batches(run)} == {0, 1}
