"""Suggestions: ordered, each measured on top of the ones before, enough to fit."""

from __future__ import annotations

from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings
from tvis_tui.vram.gpus import find_gpu
from tvis_tui.vram.suggest import suggest
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
