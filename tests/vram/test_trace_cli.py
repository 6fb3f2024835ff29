"""`tvis vram --trace` as a user runs it: how runs that never train end, flags it refuses,
suggestions taken off the traced peak, and what the CPU trace says about attention."""

from __future__ import annotations

import json

import pytest

from tvis_tui.vram.trace import MATH_ATTENTION_NOTE, SAVINGS_NOTE

torch = pytest.importorskip("torch")

TRAIN = """\
import torch
import torch.nn as nn
model = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 10))
opt = torch.optim.Adam(model.parameters())
for step in range(100):
    x = torch.randn(4096, 1024)
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
"""

ENCODER = """\
import torch
import torch.nn as nn
layer = nn.TransformerEncoderLayer(256, 4, 1024, dropout={dropout}, batch_first=True)
model = nn.TransformerEncoder(layer, num_layers=2)
opt = torch.optim.AdamW(model.parameters())
for step in range(100):
    x = torch.randn(8, 1024, 256)
    opt.zero_grad()
    model(x).square().mean().backward()
    opt.step()
"""


def one_line_error(code: int, out: str, err: str) -> str:
    assert code == 2 and "fits" not in out and "peak" not in out, "an error, not a verdict"
    last = err.strip().splitlines()[-1]  # the script's own stderr (argparse usage) comes first
    assert last.startswith("tvis: error: --trace")
    return last


def test_argparse_usage_error_is_an_error_that_names_script_args(write, tvis):
    path = write("needs_args.py", "import argparse\np = argparse.ArgumentParser()\n"
                 "p.add_argument('--hidden', type=int, required=True)\nargs = p.parse_args()\n" + TRAIN)
    last = one_line_error(*tvis("vram", path, "--trace"))
    assert "exited with status 2 before its first training step" in last
    assert '--script-args "..."' in last
    code, out, _ = tvis("vram", path, "--trace", "--script-args", "--hidden 64", "--format", "json")
    assert code == 0 and json.loads(out)["breakdown"]["optimizer_state"] > 0


def test_script_args_with_an_unclosed_quote_are_a_one_line_error(write, tvis):
    code, out, err = tvis("vram", write("train.py", TRAIN), "--trace", "--script-args", '"unclosed')
    assert code == 2 and out == ""
    assert err == "tvis: error: --script-args '\"unclosed': No closing quotation\n"


def test_early_sys_exit_is_an_error(write, tvis):
    path = write("exits_early.py", "import sys\nprint('need a GPU'); sys.exit(1)\n" + TRAIN)
    code, out, err = tvis("vram", path, "--trace")
    assert "exited with status 1 before its first training step" in one_line_error(code, out, err)
    path = write("exits_message.py", "import sys\nsys.exit('no data')\n" + TRAIN)
    assert "exited with the message 'no data'" in one_line_error(*tvis("vram", path, "--trace"))


def test_a_script_that_never_trains_is_an_error(write, tvis):
    path = write("no_step.py", "import torch\nx = torch.randn(3, 3)\nprint(x.sum())\n")
    last = one_line_error(*tvis("vram", path, "--trace"))
    assert "ended before its first training step" in last


def test_a_zero_exit_after_a_step_is_a_traced_figure(write, tvis):
    path = write("one_step.py", TRAIN.replace("    opt.step()\n", "    opt.step()\n    raise SystemExit(0)\n"))
    code, out, _ = tvis("vram", path, "--trace")
    assert code == 0 and "confidence: traced" in out and "for 1 step(s)" in out


@pytest.mark.parametrize("flags", [["--batch-size", "65536"], ["--dtype", "float16"],
                                   ["--seq-len", "8", "--optimizer", "sgd"], ["--params", "7B"]])
def test_overrides_are_refused_with_trace(write, tvis, flags):
    code, out, err = tvis("vram", write("train.py", TRAIN), "--trace", *flags)
    assert code == 2 and out == "" and err.count("\n") == 1
    given = " and ".join(f for f in flags if f.startswith("--"))
    assert f"--trace runs the script as written, so {given} do" in err
    assert "--script-args" in err


def test_traced_figure_is_labelled_traced_not_exact(write, tvis):
    code, out, _ = tvis("vram", write("train.py", TRAIN), "--trace")
    assert code == 0 and "exact" not in out
    label = "traced with fake CUDA tensors" if torch.cuda.is_available() else "traced on CPU"
    assert f"(confidence: {label})" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="the note is about CPU kernels")
def test_unfused_cpu_attention_gets_a_note(write, tvis):
    doc = json.loads(tvis("vram", write("drop.py", ENCODER.format(dropout=0.1)), "--trace",
                          "--format", "json")[1])
    assert MATH_ATTENTION_NOTE in doc["notes"]
    code, out, _ = tvis("vram", write("nodrop.py", ENCODER.format(dropout=0.0)), "--trace")
    assert code == 0 and "note: " + SAVINGS_NOTE in out
    assert "note: CPU attention" not in out, "without dropout the CPU fuses it: no note"


@pytest.mark.parametrize("gpu, verdict", [(["--gpu", "a100-80gb"], "fits"),
                                          (["--gpu-memory", "1GiB"], "does not fit")])
def test_suggestions_under_trace_never_exceed_the_traced_peak(write, tvis, gpu, verdict):
    # Dropout sends CPU attention down the unfused path: the traced peak (1.8 GiB) is twice
    # the static one (0.8 GiB), whose savings are taken off it: one at a time when it fits,
    # in turn when it does not (decided on the traced peak: the static one fits in 1 GiB).
    path = write("drop.py", ENCODER.format(dropout=0.1))
    doc = json.loads(tvis("vram", path, "--trace", *gpu, "--format", "json")[1])
    fixes, peak = doc["suggestions"], doc["peak_bytes"]
    assert doc["gpu"]["verdict"] == verdict
    assert fixes and SAVINGS_NOTE in doc["notes"]
    if verdict == "fits":
        assert all(s["peak_after_bytes"] == peak - s["saves_bytes"] for s in fixes)
    else:
        peaks = [peak] + [s["peak_after_bytes"] for s in fixes]
        assert all(s["saves_bytes"] == a - b for s, a, b in zip(fixes, peaks, peaks[1:]))
    assert all(0 < s["peak_after_bytes"] < peak for s in fixes)


ARGS = """\
import argparse
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
p = argparse.ArgumentParser()
p.add_argument("--hidden", type=int, default=16)
p.add_argument("--batch-size", type=int, default=8)
args = p.parse_args()
model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
opt = torch.optim.Adam(model.parameters())
data = TensorDataset(torch.randn(4 * args.batch_size, 64))
loader = DataLoader(data, batch_size=args.batch_size, num_workers=2, persistent_workers=True)
for epoch in range(3):
    for (x,) in loader:
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print("loss", float(loss))
        torch.save(model.state_dict(), "checkpoint.pt")
"""


def test_a_script_with_workers_checkpoints_and_prints_traces_to_clean_json(write, tvis, tmp_path,
                                                                          monkeypatch):
    """Its workers load in the traced process, its torch.save is skipped (fake tensors
    cannot be pickled; a real checkpoint must not be overwritten) and its prints go to
    stderr: stdout is the JSON alone (sweep P: all three failed or broke the JSON)."""
    monkeypatch.chdir(tmp_path)
    code, out, err = tvis("vram", write("train.py", ARGS), "--trace", "--format", "json",
                          "--script-args", "--hidden 4096 --batch-size 32")
    assert code == 0, err
    report = json.loads(out)
    assert report["breakdown"]["parameters"] == (64 * 4096 + 4096 + 4096 + 1) * 4
    assert any("torch.save skipped" in a for a in report["assumptions"])
    assert "loss" in err and not (tmp_path / "checkpoint.pt").exists()


def test_the_static_reading_shown_beside_a_trace_uses_the_script_args(write, tvis):
    code, out, _ = tvis("vram", write("train.py", ARGS), "--trace", "--script-args", "--hidden 4096")
    assert code == 0 and "model Sequential: 270,337 parameters" in out


def test_values_the_script_reads_out_of_fake_tensors_are_counted_and_said(write, tvis):
    """`int(t)` under the trace is 1 whatever the data: sizes computed from it are not the
    script's (sweep P). Reads inside torch (Adam's step count) are not the script's."""
    code, out, _ = tvis("vram", write("train.py", TRAIN), "--trace", "--format", "json")
    assert code == 0 and not [a for a in json.loads(out)["assumptions"] if "taken as 1" in a]
    reads = "import torch\nn = int(torch.randint(5, 20, (1,)))\nif torch.rand(()) > 2:\n    pass\n"
    code, out, _ = tvis("vram", write("reads.py", reads + TRAIN), "--trace", "--format", "json")
    assert code == 0
    assert [a for a in json.loads(out)["assumptions"] if "taken as 1" in a] == \
        ["2 value(s) read out of tensors (.item(), int(), a tensor in an if) were taken as 1: "
         "fake tensors hold no data, so sizes computed from data may differ"]
