"""Tensor statistics are exact, whichever shortcut computes them."""

from __future__ import annotations

import math
import warnings

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


SMALL_CASES = {
    "normal": torch.randn(32, generator=torch.Generator().manual_seed(5)) * 2 - 1,
    "relu": torch.relu(torch.randn(20, generator=torch.Generator().manual_seed(6))),
    "signed zeros": torch.tensor([-0.0, 0.0, 1.0, -1.0]),
    "constant": torch.full((7,), 3.5),
    "one value": torch.tensor([-2.0]),
    "on bin edges": torch.arange(33, dtype=torch.float64) / 32,
    "non-finite": torch.tensor([1.0, math.nan, -math.inf, math.inf, 0.0]),
}


@pytest.mark.parametrize("name", SMALL_CASES)
def test_small_tensors_summarize_as_large_ones_do(name, monkeypatch):
    """Up to stats.SMALL values a list path replaces the numpy one: same figures."""
    from tvis_tui.record import stats as S

    t = SMALL_CASES[name]
    small = summarize(t, max_bytes=0)
    monkeypatch.setattr(S, "SMALL", 0)
    large = summarize(t, max_bytes=0)
    for field in ("numel", "nan", "posinf", "neginf", "zeros", "min", "max"):
        assert getattr(small.stats, field) == getattr(large.stats, field), field
    for field in ("mean", "std", "norm"):
        assert getattr(small.stats, field) == pytest.approx(getattr(large.stats, field), rel=1e-6), field
    assert small.hist == large.hist


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.int64])
def test_zero_count_of_a_relu_output(dtype):
    t = torch.relu(torch.randn(64, 33, generator=torch.Generator().manual_seed(1)) * 2).to(dtype)
    assert summarize(t, max_bytes=0).stats.zeros == int((t == 0).sum())


def test_a_range_past_the_dtype_maximum_still_bins(recwarn):
    t = torch.tensor([-2e38, 0.0, 2e38])
    summary = summarize(t, max_bytes=1 << 20)
    assert (summary.stats.min, summary.stats.max) == (t[0].item(), t[2].item())
    assert summary.hist[0] == 1 and summary.hist[-1] == 1 and sum(summary.hist) == 3
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]



OVERFLOWING = {  # more values than SMALL: numpy's passes
    "squares past float32": torch.full((100,), 1e20),
    "sum past float32": torch.full((100,), 3e38),
    "squares past float64": torch.full((100,), 1e300, dtype=torch.float64),
    "range past float64": torch.tensor([-1.5e308, 1.5e308] * 50, dtype=torch.float64),
}


@pytest.mark.parametrize("name", OVERFLOWING)
def test_sums_past_the_dtype_maximum_are_inf_without_a_warning(name):
    """A diverging run's huge values: the figures that overflow read inf, the others are
    exact, and numpy prints nothing into the user's output."""
    t = OVERFLOWING[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        summary = summarize(t, max_bytes=0)
    assert (summary.stats.min, summary.stats.max) == (t.min().item(), t.max().item())
    assert summary.stats.norm == math.inf
    assert sum(summary.hist) == t.numel()

DEVICE_CASES = {
    "normal": torch.randn(1000, generator=torch.Generator().manual_seed(2)) * 3 + 1,
    "relu": torch.relu(torch.randn(64, 33, generator=torch.Generator().manual_seed(3))),
    "non-finite": torch.tensor([math.nan, 0.0, math.inf, 1.0, -math.inf, -0.0]),
    "constant": torch.full((10,), 2.0),
    "large constant": torch.full((600, 600), 3.0),
    "one value": torch.tensor([5.0]),
    "all nan": torch.tensor([math.nan, math.nan]),
    "sampled": torch.randn(200_000, generator=torch.Generator().manual_seed(4)),
    "float64": torch.arange(100, dtype=torch.float64) - 50,
    "huge range": torch.tensor([-3e38, 0.5, 3e38]),
    "range past float64": torch.tensor([-1e308, 0.5, 1e308], dtype=torch.float64),
}
NON_FINITE = {"non-finite", "all nan"}


def test_a_constant_tensor_counts_the_sample_as_a_varied_one_does():
    """Sweep R: 600x600 of 3.0 counted all 360,000 values, where the doc (and a varied
    tensor) counts an evenly strided sample of about 4096."""
    from tvis_tui.record.stats import summarize

    constant = summarize(torch.full((600, 600), 3.0), 0)
    varied = summarize(torch.arange(360_000.0).reshape(600, 600), 0)
    assert constant.hist == (sum(varied.hist),) and sum(varied.hist) <= 4096


@pytest.mark.parametrize("name", DEVICE_CASES)
def test_the_accelerator_path_agrees_with_the_cpu_path(name, monkeypatch):
    """On CUDA the statistics are computed on the device and read back at once; run here
    on CPU tensors, that path must give what the CPU path gives. Only non-finite values
    (summarized on the host) may cost more reads."""
    from tvis_tui.record import stats as S
    from tvis_tui.record.stats import _device_stats, _real_stats

    monkeypatch.setattr(S, "SMALL", 0)  # the numpy path, whose float32 sums the device's match
    t = DEVICE_CASES[name]
    expected, expected_hist, *_ = _real_stats(t)
    reads = []
    tolist = torch.Tensor.tolist
    if name not in NON_FINITE:
        monkeypatch.setattr(torch.Tensor, "item", lambda self: pytest.fail("a read per figure"))
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: reads.append(1) or tolist(self))
    got, hist, *_ = _device_stats(t.reshape(-1), True)
    assert len(reads) == 1  # one wait for the device
    for field in ("numel", "nan", "posinf", "neginf", "zeros", "min", "max"):
        assert getattr(got, field) == getattr(expected, field), field
    for field in ("mean", "std", "norm"):
        assert getattr(got, field) == pytest.approx(getattr(expected, field), rel=1e-6, abs=1e-9), field
    assert hist == expected_hist


def test_small_float64_tensors_past_the_square_range_still_summarize():
    stats = summarize(torch.tensor([1e200, -1e200], dtype=torch.float64), max_bytes=0).stats
    assert (stats.min, stats.max, stats.mean) == (-1e200, 1e200, 0.0)
    assert stats.std == math.inf  # as the numpy path gives it: its squares overflow


@pytest.mark.filterwarnings("ignore:Sparse")
def test_a_sparse_tensor_summarizes_as_its_dense_form():
    # An nn.Embedding(sparse=True) gradient: hybrid COO, rows indexed, a duplicate index.
    grad = torch.sparse_coo_tensor(torch.tensor([[1, 4, 1]]), torch.tensor([[1.0, -2.0], [3.0, 0.5], [1.0, 0.0]]),
                                   size=(6, 2))
    sparse, dense = summarize(grad, max_bytes=1 << 20), summarize(grad.to_dense(), max_bytes=1 << 20)
    assert sparse.stats == dense.stats and sparse.stats.zeros == 8  # 4 implicit rows, one stored zero
    assert sparse.stats.min == -2.0 and sparse.stats.max == 3.0
    assert (sparse.shape, sparse.hist, sparse.values) == (dense.shape, dense.hist, dense.values)
    csr = torch.tensor([[0.0, 2.0], [0.0, 0.0]]).to_sparse_csr()
    assert summarize(csr, max_bytes=0).stats.zeros == 3


def test_a_sparse_tensor_too_large_to_copy_dense_has_no_statistics(monkeypatch):
    from tvis_tui.record import stats
    monkeypatch.setattr(stats, "SPARSE_DENSE_BYTES", 16)
    grad = torch.sparse_coo_tensor(torch.tensor([[1]]), torch.tensor([2.0]), size=(8,))
    summary = summarize(grad, max_bytes=1 << 20)
    assert summary.shape == (8,) and summary.stats is None and summary.values is None
