"""The storages autograd saved for backward, read off the graph as backward() begins.

Module outputs are not all of what a step holds: the tensors an op saves inside a module
(a GRU's gates, an attention's softmax) are invisible to module hooks. When backward()
begins the whole graph is built and everything it saved is still held; each C++ node
exposes its saved tensors as `_saved_*` attributes, so walking the graph from the loss
gives their storages exactly, without a dispatch mode or saved-tensor hooks.

Reading a `_saved_*` attribute unpacks it. With saved-tensor hooks in force (non-reentrant
checkpointing, offloading) unpacking would run the unpack hook (a recomputation), so the
recorder stops walking for good once it has seen such hooks active (`hooks_active`).
Python-defined Functions (their ctx) are not read.
"""

from __future__ import annotations

from typing import Any

import torch

_SKIP_SUFFIXES = ("_sym_sizes", "_sym_strides", "_sizes", "_strides", "_sym_argsize")

_attrs_of: dict[type, tuple[str, ...]] = {}


def hooks_active() -> bool:
    """True while saved-tensor default hooks are pushed (torch.autograd.graph)."""
    try:
        return torch._C._autograd._top_saved_tensors_default_hooks(False) is not None
    except Exception:
        return False


def _saved_attrs(node: Any) -> tuple[str, ...]:
    cls = type(node)
    attrs = _attrs_of.get(cls)
    if attrs is None:
        attrs = tuple(a for a in dir(cls) if a.startswith("_saved_") and not a.endswith(_SKIP_SUFFIXES))
        _attrs_of[cls] = attrs
    return attrs


def _add(value: Any, out: dict[int, int]) -> None:
    if isinstance(value, torch.Tensor):
        if value.device.type == "cpu" and not value.is_sparse:
            storage = value.untyped_storage()
            out[storage.data_ptr()] = storage.nbytes()
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                _add(item, out)


def saved_storages(grad_fn: Any, limit: int = 100_000) -> dict[int, int]:
    """{storage data_ptr: nbytes} of the CPU tensors saved in the graph below `grad_fn`."""
    out: dict[int, int] = {}
    seen: dict[int, Any] = {}  # id -> node, held so ids stay unique during the walk
    todo = [grad_fn]
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        for attr in _saved_attrs(node):
            try:
                _add(getattr(node, attr), out)
            except Exception:  # freed by an earlier backward, or not a tensor
                continue
        try:
            todo.extend(n for n, _ in node.next_functions)
        except Exception:
            continue
    return out
