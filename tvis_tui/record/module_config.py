"""What a module call records of the module's settings: its `extra_repr()` (a Conv2d's
stride and padding, a Dropout's p, an LSTM's batch_first), and a recurrent layer fed its
batch on the dimension it reads as time (sweep O: `nn.LSTM(F, H)` fed (B, T, F) from a
DataLoader trains on T sequences of B steps, and `out[:, -1]` still has the right shape).
"""

from __future__ import annotations

from typing import Any

import torch

CONFIG_CHARS = 160
"""Longer settings are cut: a custom module's extra_repr may print a table."""


def config_extra(module: torch.nn.Module, args: tuple, batch_size: int | None) -> dict[str, Any] | None:
    """The call record's `config` and `batch_dim_mismatch`, where there is something to say."""
    extra: dict[str, Any] = {}
    text = _config(module)
    if text:
        extra["config"] = text
    if isinstance(module, torch.nn.RNNBase) and batch_size:
        mismatch = _batch_dim_mismatch(module, args, batch_size)
        if mismatch is not None:
            extra["batch_dim_mismatch"] = mismatch
    return extra or None


def _config(module: torch.nn.Module) -> str | None:
    if type(module).extra_repr is torch.nn.Module.extra_repr:
        return None  # the default says nothing: no call needed
    try:
        text = module.extra_repr()
    except Exception:  # the script's own extra_repr: its failure is not a recording's
        return None
    if not isinstance(text, str) or not text:
        return None
    text = " ".join(text.split())
    return text if len(text) <= CONFIG_CHARS else text[:CONFIG_CHARS - 1] + "…"


def _batch_dim_mismatch(module: torch.nn.RNNBase, args: tuple, batch_size: int) -> dict[str, Any] | None:
    """The input's shape where the DataLoader's batch size sits on the dimension the layer
    reads as time and not on the one it reads as the batch; None when that is not certain
    (the two are the same size, or neither is the batch's)."""
    x = args[0] if args else None
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        return None
    batch_dim = 0 if module.batch_first else 1
    if x.shape[batch_dim] == batch_size or x.shape[1 - batch_dim] != batch_size:
        return None
    return {"batch_first": bool(module.batch_first), "shape": list(x.shape), "batch": batch_size}
