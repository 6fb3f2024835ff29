"""Summaries of one tensor: statistics, a histogram, and (under the cap) its values.

This is where recording spends most of its time, so it makes few passes: a min and a
max, one sum, one dot product (mean, std and L2 norm follow), one zero count and one
binning of at most HIST_SAMPLE values, all on a detached float view.
Non-finite values only cost extra passes when min or max says there are some. On CPU
numpy does the passes where its per-call cost is lower than torch's.

On CUDA every read of a figure waits for all queued work, so there the figures are
computed without branching on their values and read back together, once per tensor
(`_device_stats`); values under the cap are copied to pinned memory ahead of that read.
Tensors on other accelerators are copied to the host and summarized there.

Nothing here draws random numbers or writes into the tensor.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch

from tvis_tui.store.records import Slot, TensorStats

HIST_BINS = 32
"""Equal-width bins over the finite range; enough to see a shape, small on disk."""

HIST_SAMPLE = 4096
"""Values counted for a histogram at most; binning is the slowest pass over a tensor
(counting costs ~1.5 ns a value). 4096 values put ~128 in an average bin: the shape of
the distribution, which is what a 32-bin sparkline shows."""

_NUMPY_DTYPES = {
    torch.float32: "float32", torch.float64: "float64", torch.int64: "int64",
    torch.int32: "int32", torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8",
    torch.bool: "bool", torch.complex64: "complex64", torch.complex128: "complex128",
}
"""dtypes whose values numpy reads as they are; bf16/fp16 values are stored as float32."""

_WIDENED = {torch.bfloat16: torch.float32, torch.float16: torch.float32}


@dataclass(frozen=True, slots=True)
class Summary:
    """What a tensor slot carries besides its role, index and path."""

    shape: tuple[int, ...]
    dtype: str
    device: str
    requires_grad: bool
    stats: TensorStats | None
    hist: tuple[int, ...]
    hist_lo: float | None
    hist_hi: float | None
    values_dtype: str | None
    values: bytes | None

    def without_values(self) -> "Summary":
        """This summary less its values (what a cache may keep); faster than `replace`."""
        if self.values is None:
            return self
        return Summary(self.shape, self.dtype, self.device, self.requires_grad, self.stats,
                       self.hist, self.hist_lo, self.hist_hi, self.values_dtype, None)

    def slot(self, role: str, index: int, path: str,
             values_from: tuple[int, str, int] | None = None) -> Slot:
        return Slot(role=role, index=index, path=path, shape=self.shape, dtype=self.dtype,
                    device=self.device, requires_grad=self.requires_grad, stats=self.stats,
                    hist=self.hist, hist_lo=self.hist_lo, hist_hi=self.hist_hi,
                    values_dtype=self.values_dtype, values_from=values_from)


def summarize(t: torch.Tensor, max_bytes: int, histogram: bool = True) -> Summary:
    """Summarize `t` without touching its autograd graph, its values or any RNG.
    `histogram=False` skips the binning pass (sample values show no histogram).
    Every op runs on a detached tensor: none records a graph, so no `no_grad` is needed
    (entering it cost ~5 us a tensor, a fifth of a small tensor's summary)."""
    shape = shape_of(t)
    dtype = str(t.dtype).removeprefix("torch.")
    device, requires_grad = str(t.device), t.requires_grad
    if t.is_nested:  # no values kept: a grid of ragged rows has no cells to show them in
        x, host = _nested_values(t), None
    elif t.is_meta or t.is_quantized or (t.layout != torch.strided and not _densifiable(t)):
        return Summary(shape, dtype, device, requires_grad, None, (), None, None, None, None)
    else:
        # A sparse tensor goes dense on the host: on a GPU the copy would be the
        # training's memory (and its peak) for a moment.
        x = t.detach() if t.layout == torch.strided else t.detach().cpu().to_dense()
        host = _host_values(x, max_bytes)
    if x.is_complex():
        stats, hist, lo, hi = _complex_stats(x), (), None, None
    else:
        stats, hist, lo, hi = _real_stats(x, histogram)
    values_dtype, values = _values(host)
    return Summary(shape, dtype, device, requires_grad, stats, hist, lo, hi, values_dtype, values)


SPARSE_DENSE_BYTES = 64 << 20
"""A sparse tensor (an `nn.Embedding(sparse=True)` weight's gradient) is summarized in its
dense form, made in host memory, implicit zeros included, up to this size: its statistics
then read as a dense gradient's would. Past it, copying it dense costs more than a summary
should."""


def _densifiable(t: torch.Tensor) -> bool:
    return t.layout in _SPARSE_LAYOUTS and t.numel() * t.element_size() <= SPARSE_DENSE_BYTES


_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr, torch.sparse_csc, torch.sparse_bsr,
                   torch.sparse_bsc)


def shape_of(t: torch.Tensor) -> tuple[int, ...]:
    """`t`'s sizes; a nested tensor's ragged dimensions are -1 (torch.nested, and the
    fast path of nn.TransformerEncoder in eval mode, whose layers pass nested tensors)."""
    if not t.is_nested:
        return tuple(t.shape)
    if t.layout == torch.jagged:
        return tuple(d if isinstance(d, int) else -1 for d in t.shape)
    rows = t._nested_tensor_size().tolist() if t.size(0) else []  # a row of sizes per component
    if not rows or not isinstance(rows[0], list):
        return (t.size(0),)
    return (len(rows), *(col[0] if len(set(col)) == 1 else -1 for col in zip(*rows)))


def _nested_values(t: torch.Tensor) -> torch.Tensor:
    """All of a nested tensor's components' values, in one flat tensor."""
    parts = [c.detach().reshape(-1) for c in t.unbind()]
    return torch.cat(parts) if parts else torch.empty(0, dtype=t.dtype)


def as_float(x: torch.Tensor) -> torch.Tensor:
    """`x` as float32, or float64 for float64 and int32/int64 (int64 beyond 2**24 would
    round in float32; float64 keeps it exact to 2**53)."""
    if x.dtype in (torch.float32, torch.float64):
        return x
    return x.to(torch.float64 if x.dtype in (torch.int64, torch.int32) else torch.float32)


def _real_stats(x: torch.Tensor, histogram: bool = True
                ) -> tuple[TensorStats, tuple[int, ...], float | None, float | None]:
    n = x.numel()
    if n == 0:
        return TensorStats(numel=0), (), None, None
    if x.is_cuda:
        return _device_stats(as_float(x).reshape(-1), histogram)
    # Other accelerators (MPS has no float64 to pack figures in) are read on the host.
    f = as_float(x.cpu()).reshape(-1)
    if n <= SMALL:
        small = _small_stats(f.tolist(), histogram)
        if small is not None:
            return small
    return _host_stats(f.numpy(), histogram)


SMALL = 32
"""Up to this many values, Python's own float functions on a list beat a dozen numpy
calls of ~1.5 us each (biases and norm weights: a third of the tensors of a step)."""


def _small_stats(values: list[float], histogram: bool
                 ) -> tuple[TensorStats, tuple[int, ...], float, float] | None:
    """Statistics of a few finite values, exact to float64 (fsum, a two-pass variance);
    None when a value is NaN or infinite (fsum says so: they poison it)."""
    n = len(values)
    try:
        total = math.fsum(values)
        if not math.isfinite(total):
            return None
        mean = total / n
        spread = math.fsum([(v - mean) ** 2 for v in values]) if n > 1 else 0.0
    except (ValueError, OverflowError):  # inf + -inf; squares past float64's range
        return None
    lo, hi = min(values), max(values)
    std = math.sqrt(spread / (n - 1)) if n > 1 else 0.0
    stats = TensorStats(numel=n, min=lo, max=hi, mean=mean, std=std, norm=math.hypot(*values),
                        zeros=values.count(0.0))
    if not histogram:
        return stats, (), lo, hi
    if lo == hi:
        return stats, (n,), lo, hi
    counts = [0] * HIST_BINS
    scale = HIST_BINS / (hi - lo)
    last = HIST_BINS - 1
    for v in values:  # as `_histogram` bins: float64 positions, truncated
        position = (v - lo) * scale
        counts[int(position) if position < last else last] += 1
    return stats, tuple(counts), lo, hi


def _host_stats(a: np.ndarray, histogram: bool
                ) -> tuple[TensorStats, tuple[int, ...], float | None, float | None]:
    """The statistics of a 1-D float array in host memory. numpy does the passes: less
    per-call cost than torch's, and its SIMD min and max take half the time of aminmax."""
    n = a.size
    lo, hi = float(a.min()), float(a.max())  # NaN when the array holds one
    nan = posinf = neginf = 0
    if not (math.isfinite(lo) and math.isfinite(hi)):
        nan = int(np.count_nonzero(np.isnan(a)))
        posinf = int(np.count_nonzero(a == math.inf))
        neginf = int(np.count_nonzero(a == -math.inf))
        a = a[np.isfinite(a)]
        if a.size == 0:
            return TensorStats(numel=n, nan=nan, posinf=posinf, neginf=neginf), (), None, None
        lo, hi = float(a.min()), float(a.max())
    # A sum, a sum of squares or a range past the dtype's maximum is summarized as inf,
    # with no numpy warning in the user's output. errstate is entered only then: it costs
    # ~4 us, and only a diverging run needs it.
    with np.errstate(over="ignore", invalid="ignore") if _overflows(a, lo, hi) else contextlib.nullcontext():
        mean, std, norm = _moments(a)
        # A range that excludes 0 holds no zeros: spare the counting pass (a quarter of a summary).
        zeros = _zeros(a) if lo <= 0.0 <= hi else 0
        hist = _histogram(a, lo, hi) if histogram else ()
    stats = TensorStats(numel=n, min=lo, max=hi, mean=mean, std=std, norm=norm, nan=nan,
                        posinf=posinf, neginf=neginf, zeros=zeros)
    return stats, hist, lo, hi


def _overflows(a: np.ndarray, lo: float, hi: float) -> bool:
    """Whether a sum or a sum of squares of `a` (finite values in [lo, hi]) may pass
    its dtype's maximum: any partial sum is at most n * m (or n * m**2), m = max |v|.
    A range hi - lo past float64's maximum then passes it too."""
    m = max(abs(lo), abs(hi))
    return not a.size * m * max(m, 1.0) < _FLOAT_MAX[a.dtype.itemsize]


_FLOAT_MAX = {4: float(np.finfo(np.float32).max), 8: float(np.finfo(np.float64).max)}


def _device_stats(f: torch.Tensor, histogram: bool
                  ) -> tuple[TensorStats, tuple[int, ...], float | None, float | None]:
    """The statistics of a 1-D float CUDA tensor, read back in one transfer.

    Every `.item()` waits for the device to finish all queued work: reading each figure
    on its own would stall a step once per figure and tensor. Here all of them come from
    reductions, which allocate little besides the zero count's one byte per value (device
    memory is what the training needs), are stacked and read with one `.tolist()`. When that read shows
    non-finite values (a diverged run), the tensor is copied to the host and summarized
    there like a CPU tensor. Runs on a CPU tensor too: tests compare it with the CPU path."""
    n = f.numel()
    lo, hi = torch.aminmax(f)
    std, mean = torch.std_mean(f, correction=1 if n > 1 else 0)  # one pass, Welford
    figures = [lo, hi, mean, std, torch.dot(f, f), n - torch.count_nonzero(f)]
    packed = torch.stack([v.to(torch.float64) for v in figures])
    if histogram:
        packed = torch.cat([packed, _device_histogram(f, lo, hi).to(torch.float64)])
    read = packed.tolist()  # the one wait for the device
    lo_, hi_, mean_, std_, squares, zeros = read[:6]
    if not (math.isfinite(lo_) and math.isfinite(hi_)):
        return _real_stats(f.cpu(), histogram)
    stats = TensorStats(numel=n, min=lo_, max=hi_, mean=mean_, std=std_, norm=math.sqrt(squares),
                        zeros=int(zeros))
    hist = () if not histogram else (_hist_count(n),) if lo_ == hi_ else tuple(int(c) for c in read[6:])
    return stats, hist, lo_, hi_


def _device_histogram(f: torch.Tensor, lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
    """HIST_BINS counts of an evenly strided sample of `f` over [lo, hi] (device tensors;
    meaningless, and discarded, when those are not finite). Binned in float64 so that a
    range past float32's maximum still bins. Counted by comparing with each bin number:
    `bincount` would read its input's maximum back (a wait) and has no deterministic CUDA
    kernel for `use_deterministic_algorithms`."""
    # Halves: a float64 range past float64's maximum stays finite (no branching on the
    # values here: that would be a read).
    sample = _hist_sample(f).double() * 0.5
    lo, hi = lo.double() * 0.5, hi.double() * 0.5
    # A true division, as the host's: `HIST_BINS / tensor` multiplies by a reciprocal,
    # which may put a value on a bin edge into the bin below.
    scale = torch.full_like(hi, HIST_BINS) / torch.where(hi > lo, hi - lo, 1.0)
    index = ((sample - lo) * scale).clamp(0, HIST_BINS - 1).to(torch.int64)
    bins = torch.arange(HIST_BINS, device=f.device)
    return (index.unsqueeze(1) == bins).sum(0)


def _zeros(a: np.ndarray) -> int:
    """Exact zeros (-0.0 included), counted by numpy: torch's count_nonzero is ~7x slower
    on data whose zeros fall at random (a ReLU output: 480 us vs 40 us for 131k values
    here), and ReLU outputs and their gradients are what it meets most."""
    return int(np.count_nonzero(a == 0))


NUMPY_SUM_BELOW = 8192
"""numpy sums fewer values faster than torch (less per-call cost), more slower."""


def _moments(a: np.ndarray) -> tuple[float, float, float]:
    """mean, unbiased std and L2 norm of finite values, from one sum and one dot product
    (Welford's `std_mean` is ~25x slower on CPU). When the spread is tiny next to the mean
    the shortcut loses digits, and `std_mean` is used after all."""
    m = a.size
    total = float(a.sum()) if m < NUMPY_SUM_BELOW else torch.from_numpy(a).sum().item()
    squares = float(np.dot(a, a))  # BLAS: as fast as torch.dot, less per-call cost
    mean = total / m
    if m == 1:
        return mean, 0.0, math.sqrt(squares)
    var = max(squares - m * mean * mean, 0.0) / (m - 1)
    if var < 1e-4 * mean * mean or not math.isfinite(var):
        std_t, mean_t = torch.std_mean(torch.from_numpy(a))
        return mean_t.item(), std_t.item(), math.sqrt(squares)
    return mean, math.sqrt(var), math.sqrt(squares)


def _histogram(a: np.ndarray, lo: float, hi: float) -> tuple[int, ...]:
    """Counts in HIST_BINS equal bins over [lo, hi] of finite values. Over HIST_SAMPLE
    values, an evenly strided sample is counted (no RNG): the counts then add up to the
    sample size."""
    if lo == hi:  # one value: one bin, counting the sample as every other histogram does
        return (_hist_count(a.size),)
    sample = _hist_sample(a)
    # float64, so that a float32 range past float32's maximum (hi - lo overflowing) still
    # bins; positions are >= 0 as every value is >= lo, and hi lands in the last bin.
    if math.isfinite(hi - lo):
        position = np.subtract(sample, lo, dtype=np.float64)
        position *= HIST_BINS / (hi - lo)
    else:  # a float64 range past float64's maximum: halves of it (exact) are finite
        position = np.multiply(sample, 0.5, dtype=np.float64)
        position -= lo * 0.5
        position *= HIST_BINS / (hi * 0.5 - lo * 0.5)
    np.minimum(position, HIST_BINS - 1, out=position)
    return tuple(np.bincount(position.astype(np.intp), minlength=HIST_BINS).tolist())


def _hist_stride(n: int) -> int:
    """The smallest stride that leaves at most HIST_SAMPLE of `n` values."""
    return -(-n // HIST_SAMPLE)


def _hist_count(n: int) -> int:
    """How many of `n` values `_hist_sample` keeps."""
    stride = _hist_stride(n)
    return -(-n // stride) if stride > 1 else n


def _hist_sample(values: np.ndarray | torch.Tensor) -> np.ndarray | torch.Tensor:
    """Every stride-th value of a 1-D array or tensor (no RNG)."""
    stride = _hist_stride(len(values))
    return values[::stride] if stride > 1 else values


def _complex_stats(x: torch.Tensor) -> TensorStats:
    """Complex values have no order: counts and the norm only."""
    f = x.reshape(-1)
    nan = int(torch.isnan(f).sum())
    inf = int(torch.isinf(f).sum())
    zeros = f.numel() - int(torch.count_nonzero(f))
    finite = f[torch.isfinite(f)] if nan or inf else f
    norm = float(torch.linalg.vector_norm(finite)) if finite.numel() else None
    return TensorStats(numel=f.numel(), norm=norm, nan=nan, posinf=inf, zeros=zeros)


def _host_values(x: torch.Tensor, max_bytes: int) -> tuple[str, torch.Tensor] | None:
    """The values to keep, as a CPU tensor of a numpy dtype, when under the cap. From an
    accelerator they are copied into pinned memory without waiting: `summarize` starts
    the copy before the statistics, whose one read then waits for both."""
    target = _WIDENED.get(x.dtype, x.dtype)
    name = _NUMPY_DTYPES.get(target)
    itemsize = x.element_size() if target == x.dtype else 4  # widened to float32
    if name is None or x.numel() * itemsize > max_bytes:
        return None
    if x.is_cuda:
        host = torch.empty(x.shape, dtype=target, pin_memory=True)
        return name, host.copy_(x, non_blocking=True)
    return name, x.to(device="cpu", dtype=target)


def _values(host: tuple[str, torch.Tensor] | None) -> tuple[str | None, bytes | None]:
    """A copy of the values (bytes), so later in-place ops cannot change the record."""
    if host is None:
        return None, None
    name, values = host
    arr = values.contiguous().numpy()
    return name, arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
