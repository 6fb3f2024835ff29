"""Flattening a call's inputs and outputs, however nested, into slots with readable paths.

`out[1]['h']`, `out.logits`, `args[0]`: tuples and lists by index, dicts by key, named
tuples, dataclasses and objects holding tensors (model-output classes) by attribute.
Anything else becomes a short repr. Reading attributes never calls user properties.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterator

import torch

from tvis_tui.record.stats import summarize
from tvis_tui.store.records import Slot

MAX_DEPTH = 4
"""Nesting deeper than this is shown as a repr; real model outputs are shallower."""

MAX_SLOTS = 64
"""Per role and call: a module returning a list of 10,000 tensors is summarized, not stored."""

REPR_CHARS = 80


def leaves(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any]]:
    """(path, leaf) pairs in a stable order; leaves are tensors or plain values."""
    if isinstance(value, torch.Tensor) or depth >= MAX_DEPTH:
        yield path, value
    elif isinstance(value, tuple) and hasattr(type(value), "_fields"):
        for name in type(value)._fields:
            yield from leaves(getattr(value, name), f"{path}.{name}", depth + 1)
    elif isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            yield from leaves(item, f"{path}[{i}]", depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            # Model-output dicts (HF ModelOutput) read best as attributes.
            label = f".{key}" if isinstance(key, str) and key.isidentifier() and depth == 0 \
                and not type(value) is dict else f"[{key!r}]"
            yield from leaves(item, path + label, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            yield from leaves(value.__dict__.get(f.name), f"{path}.{f.name}", depth + 1)
    else:
        attrs = _tensor_attrs(value)
        if attrs:
            for name, item in attrs:
                yield path + f".{name}", item
        else:
            yield path, value


def _tensor_attrs(value: Any) -> list[tuple[str, torch.Tensor]]:
    state = getattr(value, "__dict__", None)
    if not isinstance(state, dict) or isinstance(value, torch.nn.Module):
        return []
    return [(k, v) for k, v in state.items() if isinstance(v, torch.Tensor)]


def short_repr(value: Any) -> str:
    if isinstance(value, (int, float, bool, str, type(None))):
        text = repr(value)
    else:
        # A user __repr__ may be slow or raise; the type name is always safe.
        text = f"<{type(value).__module__}.{type(value).__qualname__}>"
    return text if len(text) <= REPR_CHARS else text[: REPR_CHARS - 1] + "…"


def make_slots(role: str, pairs: Iterator[tuple[str, Any]], max_bytes: int, start: int = 0
               ) -> tuple[list[tuple[Slot, bytes | None]], bool]:
    """Slots for `pairs` numbered from `start`, and whether any tensor holds NaN or Inf."""
    out: list[tuple[Slot, bytes | None]] = []
    nonfinite = False
    for index, (path, value) in enumerate(pairs, start):
        if index >= start + MAX_SLOTS:
            out.append((Slot(role, index, path, repr=f"… more not recorded (cap {MAX_SLOTS})"), None))
            break
        if isinstance(value, torch.Tensor):
            summary = summarize(value, max_bytes)
            out.append((summary.slot(role, index, path), summary.values))
            nonfinite = nonfinite or bool(summary.stats and summary.stats.nonfinite)
        else:
            out.append((Slot(role, index, path, repr=short_repr(value)), None))
    return out, nonfinite
