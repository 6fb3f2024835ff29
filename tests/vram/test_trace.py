"""`--trace`: the script itself on fake tensors, against the same script on real ones."""

from __future__ import annotations

import json

import pytest

from tvis_tui.cli import main
from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings
from tvis_tui.vram.trace import trace

torch = pytest.importorskip("torch")

TRACED_LABEL = "traced with fake CUDA tensors" if torch.cuda.is_available() else "traced on CPU"
"""Never "exact": on a machine without CUDA the trace runs CPU kernels, which do not keep
what CUDA's kernels keep (test_trace_cli.py)."""


@pytest.mark.parametrize("name", ["gpt_sdpa", "lstm", "cnn", "gan"])
def test_fake_trace_matches_real_tensors_and_the_static_estimate(script, name):
    fake = trace(script(name))
    real = trace(script(name), fake=False)
    assert fake.error is None and len(fake.step_peaks) == 2
    assert fake.peak_bytes == pytest.approx(real.peak_bytes, rel=0.03)
    assert sum(fake.parts.values()) == fake.peak_bytes
    static = estimate(script(name), Settings(device="cpu")).tensor_bytes
    assert static == pytest.approx(real.peak_bytes, rel=0.10)


def test_trace_cli_json_with_script_arguments(script, capsys):
    assert main(["vram", script("gpt_manual"), "--trace", "--format", "json",
                 "--script-args", "--batch-size 2 --layers 2"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["confidence"] == TRACED_LABEL
    assert doc["breakdown"]["parameters"] > 0 and doc["breakdown"]["optimizer_state"] > 0
    small = trace(script("gpt_manual"), ["--batch-size", "2", "--layers", "2"])
    tensors = doc["peak_bytes"] - doc["breakdown"]["cuda_context"] - doc["breakdown"]["allocator_overhead"]
    assert tensors == small.peak_bytes


def test_a_script_that_fails_under_trace_is_a_one_line_error(tmp_path, capsys):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\nraise ValueError('no data here')\n")
    assert main(["vram", str(bad), "--trace"]) == 2
    err = capsys.readouterr().err
    assert "ValueError: no data here" in err and err.count("\n") == 1


def test_cuda_script_traces_on_a_machine_without_cuda(fixture):
    traced = trace(fixture("cuda_only"))
    assert traced.error is None and len(traced.step_peaks) == 2
    static = estimate(fixture("cuda_only"), Settings(device="cpu"))
    assert static.facts.autocast == "bfloat16" and static.facts.scaler_line == 7
    assert static.tensor_bytes == pytest.approx(traced.peak_bytes, rel=0.10)


def test_a_dead_weak_proxy_anywhere_in_the_process_does_not_stop_the_trace(tmp_path):
    script = tmp_path / "proxy.py"
    script.write_text("""
import weakref
import torch
class Holder:
    pass
holder = Holder()
kept = [weakref.proxy(holder)]  # its object dies: touching the proxy raises ReferenceError
del holder
model = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    model(torch.randn(16, 8)).sum().backward()
    opt.step()
    opt.zero_grad()
""")
    traced = trace(script)
    assert traced.error is None and len(traced.step_peaks) == 2
    assert traced.parts["parameters"] == (8 * 4 + 4) * 4


def test_a_trace_says_what_the_step_was_running_at_its_peak(tmp_path):
    """Sweep S: a traced estimate said "peak reached at: traced". Here the peak is the
    optimizer step's (Adam's state made on the first step, and its temporaries), then
    backward's (the weight's gradient beside what backward keeps)."""
    script = tmp_path / "train.py"
    script.write_text("""
import torch
w = torch.nn.Parameter(torch.zeros(1000, 1000))
opt = torch.optim.Adam([w], foreach=False)
for _ in range(2):
    (w * 2).sum().backward()
    opt.step()
""")
    result = trace(script, steps=1)
    assert result.error is None and result.peak_phase == "optimizer step"
    script.write_text("""
import torch
w = torch.nn.Parameter(torch.zeros(1000, 1000))
opt = torch.optim.SGD([w], lr=0.1)
for _ in range(3):
    (w.exp() * w).sum().backward()
    opt.step()
    opt.zero_grad()
""")
    result = trace(script)
    assert result.error is None and result.peak_phase == "backward"
