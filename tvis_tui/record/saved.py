"""The storages autograd saved for backward, read off the graph as backward() begins.

Module outputs are not all of what a step holds: the tensors an op saves inside a module
(a GRU's gates, an attention's softmax) are invisible to module hooks. When backward()
begins the whole graph is built and everything it saved is still held; each C++ node
exposes its saved tensors as `_saved_*` attributes, so walking the graph from the loss
gives their storages exactly, without a dispatch mode or saved-tensor hooks. A post-hook
on each node then follows backward itself (`BackwardMemory`).

Reading a `_saved_*` attribute unpacks it. With saved-tensor hooks in force (non-reentrant
checkpointing, offloading) unpacking would run the unpack hook (a recomputation), so the
recorder stops walking for good once it has seen such hooks active (`hooks_active`).
Python-defined Functions (their ctx) are not read.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from tvis_tui.record.live_tensors import LiveTensors

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


def _storages(values: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    _add(values, out)
    return out


def _node_saved(node: Any) -> dict[int, int]:
    out: dict[int, int] = {}
    for attr in _saved_attrs(node):
        try:
            _add(getattr(node, attr), out)
        except Exception:  # freed by an earlier backward, or not a tensor
            continue
    return out


def graph_nodes(grad_fn: Any, limit: int = 100_000) -> list[Any]:
    """The nodes of the graph below `grad_fn`, each once."""
    seen: dict[int, Any] = {}  # id -> node, held so ids stay unique during the walk
    todo = [grad_fn]
    while todo and len(seen) < limit:
        node = todo.pop()
        if node is None or id(node) in seen:
            continue
        seen[id(node)] = node
        try:
            todo.extend(n for n, _ in node.next_functions)
        except Exception:
            continue
    return list(seen.values())


def saved_storages(grad_fn: Any) -> dict[int, int]:
    """{storage data_ptr: nbytes} of the CPU tensors saved in the graph below `grad_fn`."""
    out: dict[int, int] = {}
    for node in graph_nodes(grad_fn):
        out.update(_node_saved(node))
    return out


class BackwardMemory:
    """Follows storage through one backward(): what the graph saved, released node by node,
    and the gradients in flight between nodes (made by one node, freed once the node that
    takes them has run; those reaching a parameter stay as its .grad). A post-hook on each
    node samples, so the peak inside backward is seen. The hooks return None (they change
    nothing) and are removed when backward() returns."""

    def __init__(self, live: LiveTensors, clock: tuple[Callable[[], int], Callable[[int], None]]) -> None:
        self._live = live
        self._begin_hook, self._end_hook = clock
        self._handles: list[Any] = []
        self._node_keys: dict[int, list[int]] = {}
        self._users: dict[int, int] = {}  # saved storage -> nodes that saved it
        self._saved: dict[int, int] = {}  # saved storage -> nbytes, while some node holds it
        self._flight: dict[int, int] = {}

    def begin(self, grad_fn: Any) -> None:
        self.end()
        for node in graph_nodes(grad_fn):
            saved = _node_saved(node)
            self._node_keys[id(node)] = list(saved)
            for key, size in saved.items():
                self._users[key] = self._users.get(key, 0) + 1
                self._saved[key] = size
            if type(node).__name__ != "AccumulateGrad" and hasattr(node, "register_hook"):
                self._handles.append(node.register_hook(functools.partial(self._after_node, id(node))))
        self._sample({})

    def _extra(self, *parts: dict[int, int]) -> int:
        tracked = self._live.tracked
        merged: dict[int, int] = {}
        for part in parts:
            merged.update(part)
        return sum(n for key, n in merged.items() if not tracked(key))

    def _sample(self, made: dict[int, int]) -> None:
        self._live.sample("backward", self._live.live + self._extra(self._saved, self._flight, made))

    def _after_node(self, node_id: int, grad_inputs: Any, grad_outputs: Any) -> None:
        started = self._begin_hook()
        try:
            made = _storages(grad_inputs)
            self._sample(made)  # the node's inputs, outputs and saved tensors all alive
            for key in self._node_keys.pop(node_id, ()):
                users = self._users.get(key, 1) - 1
                self._users[key] = users
                if users <= 0:
                    self._saved.pop(key, None)
            for key in _storages(grad_outputs):
                if key not in made:
                    self._flight.pop(key, None)
            self._flight.update(made)
        except Exception:
            pass
        finally:
            self._end_hook(started)

    def end(self) -> None:
        """backward() returned: remove the hooks and forget the graph."""
        for handle in self._handles:
            try:
                handle.remove()
            except Exception:
                pass
        self._handles.clear()
        self._node_keys.clear()
        self._users.clear()
        self._saved.clear()
        self._flight.clear()
