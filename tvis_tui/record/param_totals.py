"""The parameters of an optimizer step past those listed one by one, taken together.

A step lists its first MAX_SLOTS parameters with a gradient (slots.py); a transformer has
hundreds. The "all parameters" figures (the gradient norm `clip_grad_norm_` clips, the
norm of all weights) must count the rest too: their gradients' and weights' L2 norms
together, and their NaN/Inf count, are taken here, a norm per tensor and no copy.
Norms are over finite values, as each listed parameter's are (stats.py): a tensor holding
NaN/Inf is counted, and its finite values make its norm.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from tvis_tui.store.parameters import root_sum


def norm_together(tensors: Sequence[torch.Tensor]) -> tuple[float | None, int]:
    """(the L2 norm of all finite values of `tensors` together, their NaN/Inf count);
    None where they hold no finite value."""
    if not tensors:
        return None, 0
    with torch.no_grad():
        norms: list[float | None] = [None] * len(tensors)
        by_device: dict[torch.device, list[int]] = {}
        for i, t in enumerate(tensors):  # a model split over devices: one read per device
            by_device.setdefault(t.device, []).append(i)
        for at in by_device.values():
            for i, norm in zip(at, torch.stack([_norm(tensors[i]) for i in at]).tolist()):
                norms[i] = norm
        nonfinite = 0
        for i, norm in enumerate(norms):
            if norm is not None and not math.isfinite(norm):
                t = tensors[i].detach()
                t = t.coalesce().values() if t.is_sparse else t
                finite = torch.isfinite(t)
                bad = int(finite.numel() - finite.sum())
                if bad:  # else the sum of squares passed the dtype's range: inf it stays
                    nonfinite += bad
                    kept = t[finite]
                    norms[i] = float(_norm(kept)) if kept.numel() else None
    return root_sum(norms), nonfinite


def _norm(t: torch.Tensor) -> torch.Tensor:
    """The L2 norm of `t` as a float64 0-d tensor (computed in float32 at least)."""
    t = t.detach()
    if t.is_sparse:  # an Embedding's sparse gradient: its stored values
        t = t.coalesce().values()
    if t.is_complex():
        return torch.linalg.vector_norm(t.to(torch.complex128)).double()
    wide = torch.float64 if t.dtype == torch.float64 else torch.float32
    return torch.linalg.vector_norm(t.to(wide) if not t.is_floating_point() else t, dtype=wide).double()
