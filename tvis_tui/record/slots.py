"""Flattening a call's inputs and outputs, however nested, into slots with readable paths.

`out[1]['h']`, `out.logits`, `args[0]`: tuples and lists by index, dicts by key, named
tuples, dataclasses and objects holding tensors (model-output classes) by attribute.
Anything else becomes a short repr. Reading attributes never calls user properties.
"""

from __future__ import annotations

import dataclasses
import itertools
import weakref
from collections import OrderedDict, UserDict
from typing import Any, Callable, Iterator

import torch

from tvis_tui.record.stats import Summary, summarize
from tvis_tui.store.records import Slot
from tvis_tui.text import cut

MAX_DEPTH = 4
"""Nesting deeper than this is shown as a repr; real model outputs are shallower."""

MAX_SLOTS = 64
"""Per role and call: a module returning a list of 10,000 tensors is summarized, not stored."""

SEEN_PAST_CAP = 4096
"""Values past MAX_SLOTS still drawn from the stream (and so counted as live memory)."""

REPR_CHARS = 80

SEEN_TENSORS = 1024
"""Recent tensors remembered for reuse; a step of a big model sees more, which only costs
recomputing a summary."""


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
    elif isinstance(value, (dict, UserDict)):  # UserDict: HF's BatchEncoding
        # A UserDict's own dict is read: no __getitem__ of the script's runs.
        for key, item in (value.data if isinstance(value, UserDict) else value).items():
            # Model-output dicts (HF ModelOutput) read best as attributes.
            as_attribute = (isinstance(key, str) and key.isidentifier() and depth == 0
                            and type(value) is not dict)
            label = f".{key}" if as_attribute else f"[{key!r}]"
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
    elif isinstance(value, type):  # a class passed along (an exception's type to __exit__)
        # type's own descriptors: a metaclass cannot run code for them
        module, name = (type.__dict__[a].__get__(value) for a in ("__module__", "__qualname__"))
        text = f"<class {module}.{name}>"
    else:
        # A user __repr__ may be slow or raise; the type name is always safe.
        text = f"<{type(value).__module__}.{type(value).__qualname__}>"
    return cut(text, REPR_CHARS)


class SlotMaker:
    """Turns values into slots, summarizing each unchanged tensor only once.

    The same tensor usually appears several times in a row (a block's input is its first
    layer's input; its last layer's output is its own). A tensor seen before, still alive
    and not written to since (same version counter), reuses the summary, and its values
    are stored once and referenced by `Slot.values_from`.
    """

    def __init__(self, max_bytes: int, warn: Callable[[str], None]) -> None:
        self.max_bytes = max_bytes
        self._warn = warn
        self._seen: OrderedDict[tuple, tuple[weakref.ref, Summary, tuple[int, str, int]]] = OrderedDict()

    def make(self, seq: int, role: str, pairs: Iterator[tuple[str, Any]], start: int = 0
             ) -> tuple[list[tuple[Slot, bytes | None]], bool]:
        """Slots of call `seq` numbered from `start`, and whether any tensor holds NaN/Inf."""
        out: list[tuple[Slot, bytes | None]] = []
        nonfinite = False
        for index, (path, value) in enumerate(pairs, start):
            if index >= start + MAX_SLOTS:
                out.append((Slot(role, index, path, repr=f"… more not recorded (cap {MAX_SLOTS})"), None))
                # The rest still passes through: the live-memory count watches this stream.
                for _ in itertools.islice(pairs, SEEN_PAST_CAP):
                    pass
                break
            if isinstance(value, torch.Tensor):
                try:
                    slot, values = self._tensor_slot(value, seq, role, index, path)
                except Exception as exc:  # one odd tensor must not cost the whole call
                    self._warn(f"a tensor was not summarized: {type(exc).__name__}: {exc}")
                    slot, values = Slot(role, index, path, repr="<tensor not summarized>"), None
                out.append((slot, values))
                nonfinite = nonfinite or bool(slot.stats and slot.stats.nonfinite)
            else:
                out.append((Slot(role, index, path, repr=short_repr(value)), None))
        return out, nonfinite

    def _tensor_slot(self, t: torch.Tensor, seq: int, role: str, index: int, path: str
                     ) -> tuple[Slot, bytes | None]:
        key = _identity(t)
        hit = self._seen.get(key) if key is not None else None
        if hit is not None and hit[0]() is t:
            _, summary, origin = hit
            return summary.slot(role, index, path, origin if summary.values_dtype else None), None
        summary = summarize(t, self.max_bytes)
        if key is not None:
            # The cache keeps no values: those are on their way to the store already.
            self._seen[key] = (weakref.ref(t), summary.without_values(), (seq, role, index))
            if len(self._seen) > SEEN_TENSORS:
                self._seen.popitem(last=False)
        return summary.slot(role, index, path), summary.values


def _identity(t: torch.Tensor) -> tuple | None:
    """What makes two sightings of a tensor the same values; None when it cannot be told."""
    try:
        if t.is_meta or t.layout != torch.strided:
            return None
        return (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype, t.device, t._version,
                t.requires_grad)
    except (RuntimeError, NotImplementedError):  # inference or functional tensors
        return None
