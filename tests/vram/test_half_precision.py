"""Models in half precision keep half-size activations, however the script gets there
(`.half()`, `--dtype float16`), and a made-up input is reported as assumed, not read."""

from __future__ import annotations

import json

import pytest

CNN = """\
import torch
import torch.nn as nn
from torch.utils.data import DataLoader
from torchvision import datasets

BATCH_SIZE = 128
model = nn.Sequential(
    nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
    nn.Conv2d(64, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10),
).cuda(){cast}
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
loader = DataLoader(datasets.ImageFolder("/data/train"), batch_size=BATCH_SIZE)
for images, target in loader:
    images = images.cuda(){cast}
    loss = nn.functional.cross_entropy(model(images), target.cuda())
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

MLP = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                      nn.Linear(4096, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    x = torch.randn(4096, 1024)
    opt.zero_grad()
    model(x).sum().backward()
    opt.step()
"""


def breakdown(tvis, path, *argv):
    code, out, _ = tvis("vram", path, *argv, "--format", "json")
    assert code == 0
    return json.loads(out)["breakdown"]


def test_an_assumed_input_is_not_also_listed_as_read(write, tvis):
    code, out, _ = tvis("vram", write("cnn.py", CNN.format(cast="")))
    read, assumed = out.split("read from the script:")[1].split("assumed:")
    assert code == 0 and "batch " not in read
    assert "model input 128x3x224x224 float32" in assumed
    assert "the batch itself could not" in assumed


def test_half_model_halves_cnn_activations(write, tvis):
    fp32 = breakdown(tvis, write("fp32.py", CNN.format(cast="")))
    half = breakdown(tvis, write("half.py", CNN.format(cast=".half()")))
    assert half["parameters"] == pytest.approx(fp32["parameters"] / 2, abs=16)  # BN's int64 counters
    assert half["activations"] == pytest.approx(fp32["activations"] / 2, rel=0.01)
    code, out, _ = tvis("vram", write("half.py", CNN.format(cast=".half()")))
    assert "model input 128x3x224x224 float16" in out  # fed what its first layer takes


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_dtype_flag_is_the_same_as_casting_the_model(write, tvis, dtype):
    cast = {"float16": ".half()", "bfloat16": ".bfloat16()"}[dtype]
    flagged = breakdown(tvis, write("fp32.py", CNN.format(cast="")), "--dtype", dtype)
    assert flagged == breakdown(tvis, write("cast.py", CNN.format(cast=cast)))


def test_dtype_flag_shrinks_mlp_batch_memory(write, tvis):
    # Before: the float32 batch made every layer keep a float32 copy of its half weight.
    path = write("mlp.py", MLP)
    fp32, half = breakdown(tvis, path), breakdown(tvis, path, "--dtype", "float16")
    batch_memory = lambda b: b["activations"] + b["workspace"]  # noqa: E731
    # The script's own float32 batch stays float32 (plus a half copy for the first layer).
    assert 0.5 * batch_memory(fp32) < batch_memory(half) < 0.6 * batch_memory(fp32)
