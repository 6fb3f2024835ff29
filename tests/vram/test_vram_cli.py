"""`tvis vram` and `tvis gpus` as a user runs them: output, JSON shape, flags, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tvis_tui.cli import main
from tvis_tui.vram.estimate import OVERHEAD_NOTE
from tvis_tui.vram.gpus import GIB

PARTS = {"parameters", "gradients", "optimizer_state", "activations", "workspace",
         "cuda_context", "allocator_overhead"}


def run_json(capsys, *argv):
    assert main(["vram", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_text_report_has_breakdown_bar_verdict_and_suggestions(script, capsys):
    assert main(["vram", script("lm_noflash"), "--gpu", "rtx3060", "--batch-size", "512"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA GeForce RTX 3060 12GB" in out
    for part in ("parameters", "gradients", "optimizer state", "activations", "workspace",
                 "cuda context", "allocator overhead", "peak"):
        assert part in out
    assert "does not fit" in out and "short by" in out
    assert "suggestions:" in out and "micro-batches" in out
    assert "model Sequential: 2,911,936 parameters (line 50)" in out
    assert "peak reached at: backward" in out


def test_json_has_exactly_the_documented_keys(script, capsys):
    doc = run_json(capsys, script("gpt_sdpa"), "--gpu", "a100-40gb")
    assert set(doc) == {"peak_bytes", "breakdown", "fits", "gpu", "read", "assumptions",
                        "confidence", "notes", "suggestions"}
    assert doc["read"][0].startswith("model GPT: ") and " parameters (line " in doc["read"][0]
    assert doc["notes"] == []  # only a traced figure has notes
    assert set(doc["breakdown"]) == PARTS
    assert doc["peak_bytes"] == sum(doc["breakdown"].values())
    assert doc["fits"] is True and doc["gpu"]["key"] == "a100-40gb"
    assert doc["gpu"]["verdict"] == "fits" and doc["gpu"]["headroom_bytes"] > 0
    assert doc["confidence"] == "high"
    assert doc["assumptions"] == [OVERHEAD_NOTE]  # nothing about the script was assumed
    for s in doc["suggestions"]:
        assert set(s) == {"change", "saves_bytes", "line", "peak_after_bytes"}
        assert s["saves_bytes"] > 0 and isinstance(s["line"], int)


def test_batch_size_flag_scales_activations(script, capsys):
    small = run_json(capsys, script("cnn"), "--batch-size", "64")["breakdown"]
    big = run_json(capsys, script("cnn"), "--batch-size", "256")["breakdown"]
    assert big["activations"] == pytest.approx(4 * small["activations"], rel=0.02)
    assert big["parameters"] == small["parameters"]


def test_batch_size_flag_on_a_literal_batch_dimension(fixture, capsys):
    base = run_json(capsys, fixture("unknown_loader"))["breakdown"]
    doubled = run_json(capsys, fixture("unknown_loader"), "--batch-size", "64")["breakdown"]
    assert doubled["activations"] == pytest.approx(2 * base["activations"], rel=0.02)


def test_seq_len_flag_reaches_the_argparse_default(script, capsys):
    short = run_json(capsys, script("gpt_manual"), "--seq-len", "128")["breakdown"]
    long = run_json(capsys, script("gpt_manual"), "--seq-len", "512")["breakdown"]
    assert long["activations"] > 3 * short["activations"]


def test_dtype_flag_halves_parameters_and_amp_shrinks_activations(script, capsys):
    fp32 = run_json(capsys, script("mlp"))["breakdown"]
    bf16 = run_json(capsys, script("mlp"), "--dtype", "bfloat16")["breakdown"]
    assert bf16["parameters"] == fp32["parameters"] // 2
    lm32 = run_json(capsys, script("lm_noflash"))["breakdown"]
    amp = run_json(capsys, script("lm_noflash"), "--dtype", "amp-bf16")["breakdown"]
    assert amp["activations"] < 0.8 * lm32["activations"]


def test_optimizer_flag_sets_state_size(script, capsys):
    sgd = run_json(capsys, script("mlp"), "--optimizer", "sgd")["breakdown"]
    adam = run_json(capsys, script("mlp"), "--optimizer", "adamw")["breakdown"]
    assert sgd["optimizer_state"] == 0
    assert adam["optimizer_state"] == 2 * adam["parameters"]


def test_params_flag_replaces_the_model_size(script, capsys):
    doc = run_json(capsys, script("mlp"), "--params", "7B", "--optimizer", "sgd",
                   "--gpu", "a100-40gb")
    assert doc["breakdown"]["parameters"] == 7 * 10 ** 9 * 4
    assert doc["fits"] is False


def test_gpu_memory_flag_sets_usable_memory(script, capsys):
    doc = run_json(capsys, script("mlp"), "--gpu-memory", "48GiB")
    assert doc["gpu"]["usable_bytes"] == 48 * GIB and doc["gpu"]["key"] == "custom"


@pytest.mark.parametrize("argv, needle", [
    (["--gpu", "voodoo5"], "unknown GPU 'voodoo5'"),
    (["--gpu", ""], "unknown GPU ''"),  # not the default GPU, silently
    (["--gpu-memory", "lots"], "cannot read memory size 'lots'"),
    (["--params", "many"], "--params 'many'"),
    (["--optimizer", "adamx"], "--optimizer 'adamx': unknown; one of sgd, sgd-momentum"),
    (["--batch-size", "0"], "--batch-size 0"),
    # past int32 the arithmetic left float range (robustness sweep: a traceback)
    (["--batch-size", "2147483648"], "--batch-size 2,147,483,648: must be from 1 to 2,147,483,647"),
    (["--seq-len", "1" + "0" * 400], "--seq-len a 401-digit number: must be from 1 to"),
])
def test_bad_options_are_one_line_errors(script, capsys, argv, needle):
    assert main(["vram", script("mlp"), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tvis: error:") and needle in err and err.count("\n") == 1


def test_missing_script_is_an_error(tmp_path, capsys):
    assert main(["vram", str(tmp_path / "nope.py")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_unreadable_script_is_an_error_not_an_estimate(fixture, capsys):
    # More unreadable and model-less inputs: test_bad_input.py.
    assert main(["vram", fixture("unreadable"), "--format", "json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert "unreadable.py: not a Python script (it contains NUL bytes)" in err


def test_batch_size_never_silently_one(fixture, capsys):
    doc = run_json(capsys, fixture("unknown_loader"))
    assert "batch size 32 (no batch size found in the script)" in doc["assumptions"]
    assert doc["confidence"] == "medium"


def test_gpus_lists_at_least_25_with_usable_memory(capsys):
    assert main(["gpus"]) == 0
    out = capsys.readouterr().out
    assert "a100-40gb" in out and "rtx4090" in out and "GiB" in out
    assert main(["gpus", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) >= 25
    assert all(0 < r["usable_bytes"] <= r["memory_gib"] * 1.1 * GIB for r in rows)


@pytest.mark.parametrize("example", ["image_classifier", "char_lm"])
def test_the_bundled_examples_are_estimated(example, capsys):
    root = Path(__file__).resolve().parents[2]
    assert main(["vram", str(root / "examples" / example / "train.py"), "--gpu", "a100-40gb"]) == 0
    out = capsys.readouterr().out
    assert "fits" in out and "suggestions:" in out
    if example == "char_lm":  # its windows are `--context` (32) long, not a 512 guess
        assert "model input 32x32 int64" in out and "sequence length 512" not in out
