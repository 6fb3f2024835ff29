"""Suggestions: ordered, each measured on top of the ones before, enough to fit; mixed
precision in the dtype the GPU has."""

from __future__ import annotations

import json

import pytest

from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings
from tvis_tui.vram.gpus import GPUS, find_gpu
from tvis_tui.vram.suggest import BF16_CAVEAT, BF16_TEXT, FP16_TEXT, suggest
from tvis_tui.vram.verdict import FITS_FRACTION, Verdict


def test_greedy_suggestions_fit_a_script_that_does_not(script):
    gpu = find_gpu("rtx3060")
    base = estimate(script("lm_noflash"), Settings(batch_size=512))
    assert not Verdict(gpu, base.peak_bytes).fits
    fixes = suggest(base, gpu.usable_bytes)
    assert fixes, "a script this size can be made to fit"
    peaks = [base.peak_bytes] + [s.peak_after for s in fixes]
    assert all(a > b for a, b in zip(peaks, peaks[1:])), "each change lowers the peak"
    assert all(s.saves_bytes == a - b for s, a, b in zip(fixes, peaks, peaks[1:]))
    assert fixes[-1].peak_after <= gpu.usable_bytes * FITS_FRACTION
    assert all(s.line > 0 for s in fixes)


def test_manual_attention_gets_fused_attention_at_the_softmax_line(script):
    base = estimate(script("lm_noflash"))
    fixes = suggest(base, 10 ** 15)
    fused = [s for s in fixes if "scaled_dot_product_attention" in s.change]
    assert fused and fused[0].line == 28
    assert [s.saves_bytes for s in fixes] == sorted((s.saves_bytes for s in fixes), reverse=True)


def test_set_to_none_is_suggested_where_zero_grad_keeps_gradients(fixture):
    base = estimate(fixture("unknown_loader"), Settings(batch_size=4096))
    fixes = suggest(base, 10 ** 15)
    hint = [s for s in fixes if "set_to_none=True" in s.change]
    assert hint and hint[0].line == 9


def test_no_change_is_offered_for_what_the_script_already_does(script):
    fixes = suggest(estimate(script("gpt_sdpa")), 10 ** 15)
    text = " ".join(s.change for s in fixes)
    assert "autocast" not in text and "scaled_dot_product_attention" not in text


def test_freezing_large_embeddings_is_offered(script):
    fixes = suggest(estimate(script("gru")), 10 ** 15)
    freeze = [s for s in fixes if "requires_grad_(False)" in s.change]
    assert freeze and freeze[0].line == 13
    # The peak is in backward, before the embedding's gradient exists: what goes at that
    # moment is its RMSprop state, 20000x128 float32.
    assert freeze[0].saves_bytes >= 20000 * 128 * 4


def changes(tvis, *argv):
    code, out, _ = tvis("vram", *argv, "--format", "json")
    assert code == 0
    doc = json.loads(out)
    return {s["change"]: s["saves_bytes"] for s in doc["suggestions"]}


@pytest.mark.parametrize("gpu", ["t4", "v100-16gb", "v100-32gb", "p100", "rtx2080-ti"])
def test_gpus_without_bf16_are_offered_fp16_with_a_grad_scaler(script, tvis, gpu):
    found = changes(tvis, script("cnn"), "--gpu", gpu)
    assert FP16_TEXT in found and "GradScaler" in FP16_TEXT
    assert not any("bf16" in c.replace("has no bf16", "") or "bfloat16" in c for c in found)
    # Same activations halved either way: the saving is bf16's.
    assert found[FP16_TEXT] == changes(tvis, script("cnn"), "--gpu", "a100-40gb")[BF16_TEXT]


@pytest.mark.parametrize("argv", [["--gpu", "a100-40gb"], ["--gpu", "rtx3090"], ["--gpu", "h100"], []])
def test_ampere_and_newer_and_the_default_keep_bf16(script, tvis, argv):
    found = changes(tvis, script("cnn"), *argv)
    assert BF16_TEXT in found and FP16_TEXT not in found


def test_a_gpu_known_only_by_memory_gets_bf16_with_a_caveat(script, tvis):
    assert BF16_TEXT + BF16_CAVEAT in changes(tvis, script("cnn"), "--gpu-memory", "16GiB")


def test_the_gpu_table_knows_which_gpus_lack_bf16():
    without = {g.key for g in GPUS if g.bf16 is False}
    assert without == {"v100-16gb", "v100-32gb", "t4", "p100", "rtx2080-ti"}
    assert find_gpu("v100").bf16 is False and find_gpu("a10g").bf16 is True


@pytest.mark.parametrize("name, optimizer", [("lm_noflash", "Adam8bit"), ("gpt_sdpa", "AdamW8bit")])
def test_the_8bit_optimizer_offered_trains_as_the_scripts_does(script, name, optimizer):
    """Sweep S: AdamW8bit was offered for Adam, and its weight decay would change training."""
    fixes = suggest(estimate(script(name)), 10 ** 15)
    assert [s.change for s in fixes if "8-bit" in s.change] == [
        f"use an 8-bit optimizer: bitsandbytes.optim.{optimizer}(...)"]
