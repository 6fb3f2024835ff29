"""Turning one sample value (a tensor, an array, a PIL image, text, a tuple of them...)
into a MessagePack-ready map, copied now so that later in-place work cannot change it.

Every value gets a "kind": "tensor" / "ndarray" (shape, dtype, statistics and, within the
byte budget, the exact values), "image" (a PIL image), "text", "bytes", "scalar",
"tuple" / "list" / "dict" (with "items"), or "repr". Image-like tensors and arrays also
carry an "image": a drawable uint8 H x W x C copy (see images.py). A shared `Budget`
bounds the bytes one batch may keep; past it values keep their statistics only.

Describing is most of the data capture's cost, so it does the least it can: sample
tensors get statistics but no histogram (nothing shows one), and a `Memo` hands back the
description already made for the same unchanged tensor (a transform that returns its input
unchanged, the pipeline's output that is also the item) instead of summarizing it again.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections import UserDict
from typing import Any

import numpy as np
import torch

from tvis_tui.record.images import image_view, is_pil
from tvis_tui.record.slots import short_repr
from tvis_tui.record.stats import summarize

MAX_DEPTH = 3
MAX_ITEMS = 16
"""Items of a tuple/list/dict described; a sample is rarely wider."""

TEXT_CHARS = 4096


@dataclasses.dataclass
class Budget:
    """Bytes of values and images one batch may still keep, and the cap per value."""

    left: int
    per_value: int

    def take(self, n: int) -> bool:
        if n > self.per_value or n > self.left:
            return False
        self.left -= n
        return True

    def cap(self) -> int:
        return max(min(self.per_value, self.left), 0)


Memo = dict
"""id(tensor) -> (weak reference, version counter, description): one batch's descriptions."""


def describe(value: Any, budget: Budget, depth: int = 0, memo: Memo | None = None) -> dict[str, Any]:
    if isinstance(value, torch.Tensor):
        return _remembered(value, budget, memo)
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "biufc":
            return {"kind": "repr", "repr": short_repr(value)}
        return _tensor(torch.from_numpy(np.array(value)), budget, "ndarray")
    if is_pil(value):
        return _pil(value, budget)
    if isinstance(value, str):
        return {"kind": "text", "text": value[:TEXT_CHARS], "length": len(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"kind": "bytes", "length": len(value)}
    if isinstance(value, (bool, int, float)) or value is None or isinstance(value, np.generic):
        return {"kind": "scalar", "value": value.item() if isinstance(value, np.generic) else value}
    if depth < MAX_DEPTH:
        items = _items(value)
        if items is not None:
            kind, pairs = items
            return {"kind": kind, "length": len(pairs),
                    "items": [[k, describe(v, budget, depth + 1, memo)] for k, v in pairs[:MAX_ITEMS]]}
    return {"kind": "repr", "repr": short_repr(value)}


def _items(value: Any) -> tuple[str, list[tuple[Any, Any]]] | None:
    if isinstance(value, tuple) and hasattr(type(value), "_fields"):
        return "tuple", [(f, getattr(value, f)) for f in type(value)._fields]
    if isinstance(value, (tuple, list)):
        return type(value).__name__ if type(value) in (tuple, list) else "list", list(enumerate(value))
    if isinstance(value, (dict, UserDict)):  # UserDict: HF's BatchEncoding, read as its own dict
        pairs = (value.data if isinstance(value, UserDict) else value).items()
        return "dict", [(k if isinstance(k, (str, int)) else repr(k), v) for k, v in pairs]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return "dict", [(f.name, value.__dict__.get(f.name)) for f in dataclasses.fields(value)]
    return None


def _remembered(t: torch.Tensor, budget: Budget, memo: Memo | None) -> dict[str, Any]:
    """The description of `t`, reused when this very tensor, unchanged since, was
    described before in the batch (the map is shared: its bytes are kept once per batch)."""
    if memo is None:
        return _tensor(t, budget, "tensor")
    hit = memo.get(id(t))
    if hit is not None and hit[0]() is t and hit[1] == t._version:
        return hit[2]
    out = _tensor(t, budget, "tensor")
    memo[id(t)] = (weakref.ref(t), t._version, out)
    return out


def _tensor(t: torch.Tensor, budget: Budget, kind: str) -> dict[str, Any]:
    summary = summarize(t, budget.cap(), histogram=False)
    out: dict[str, Any] = {"kind": kind, "shape": list(summary.shape), "dtype": summary.dtype,
                           "stats": summary.stats.to_wire() if summary.stats else None,
                           "values_dtype": None, "values": None}
    if summary.values is not None and budget.take(len(summary.values)):
        out["values_dtype"], out["values"] = summary.values_dtype, summary.values
    stats = summary.stats
    # The statistics' finite min and max are the image's own: no second pass for them.
    bounds = (stats.min, stats.max) if stats and stats.min is not None and stats.max is not None else None
    view = image_view(t, bounds)
    if view is not None and budget.take(view.pixels.nbytes):
        out["image"] = view.to_wire()
    return out


def _pil(img: Any, budget: Budget) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": "image", "mode": img.mode, "size": list(img.size)}
    view = image_view(img)
    if view is not None and budget.take(view.pixels.nbytes):
        out["image"] = view.to_wire()
    return out
