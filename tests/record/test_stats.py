"""Tensor statistics are exact, whichever shortcut computes them."""

from __future__ import annotations

import math

import pytest
import torch

from tvis_tui.record.stats import summarize


@pytest.mark.parametrize("values, zeros", [
    ([1.0, 2.0, 3.0], 0),              # range excludes 0: no counting pass, still exact
    ([-3.0, -1.0], 0),
    ([0.0, 0.0, 5.0], 2),              # post-ReLU: zeros at the minimum
    ([-2.0, 0.0, 2.0, -0.0], 2),       # -0.0 is an exact zero too
    ([math.nan, 0.0, math.inf, 1.0], 1),
])
def test_zero_count_is_exact(values, zeros):
    stats = summarize(torch.tensor(values), max_bytes=0).stats
    assert stats.zeros == zeros


def test_moments_and_range_match_torch():
    t = torch.randn(1000, generator=torch.Generator().manual_seed(0)) * 3 + 1
    stats = summarize(t, max_bytes=0).stats
    assert stats.min == t.min().item() and stats.max == t.max().item()
    assert stats.mean == pytest.approx(t.mean().item(), rel=1e-5)
    assert stats.std == pytest.approx(t.std().item(), rel=1e-5)
    assert stats.norm == pytest.approx(t.norm().item(), rel=1e-5)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_zero_count_of_a_relu_output(dtype):
    t = torch.relu(torch.randn(64, 33, generator=torch.Generator().manual_seed(1)) * 2).to(dtype)
    assert summarize(t, max_bytes=0).stats.zeros == int((t == 0).sum())
