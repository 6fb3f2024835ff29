"""The storages autograd saved for backward, read off the graph as backward() begins.

Module outputs are not all of what a step holds: the tensors an op saves inside a module
(a GRU's gates, an attention's softmax) are invisible to module hooks. When backward()
begins the whole graph is built and everything it saved is still held; each C++ node
exposes its saved tensors as `_saved_*` attributes, so walking the graph from the loss
gives their storages exactly, without a dispatch mode or saved-tensor hooks. A post-hook
on each node then follows backward itself (`BackwardMemory`).

Reading a `_saved_*` attribute unpacks it. With saved-tensor hooks in force (non-reentrant
checkpointing, offloading) unpacking would run the unpack hook (a recomputation), so the
recorder stops reading them for good once it has seen such hooks active (`hooks_active`);
it still hooks the nodes (backward times, gradients in flight): that unpacks nothing.
Python-defined Functions (their ctx) are not read.
"""

from __future__ import annotations

import functools
import time
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


def _storage(value: Any) -> tuple[int, int] | None:
    """(key, nbytes) of a dense CPU tensor's storage, else None."""
    if isinstance(value, torch.Tensor) and value.is_cpu and not value.is_sparse:
        storage = value.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    return None


def _add(value: Any, out: dict[int, int]) -> None:
    if isinstance(value, torch.Tensor):
        item = _storage(value)
        if item is not None:
            out[item[0]] = item[1]
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


def graph_nodes(roots: list[Any], limit: int = 100_000) -> list[Any]:
    """The nodes of the graph below the nodes `roots`, each once."""
    seen: dict[int, Any] = {}  # id -> node, held so ids stay unique during the walk
    todo = list(roots)
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


def _consumer(node: Any) -> int | None:
    """The node a gradient goes to; None for a leaf's AccumulateGrad (it stays as .grad)."""
    if node is None or type(node).__name__ == "AccumulateGrad":
        return None
    return id(node)


class BackwardMemory:
    """Follows storage through one backward(): what the graph saved, released node by node,
    and the gradients in flight between nodes (made by one node, freed once the node that
    takes them has run; those reaching a parameter stay as its .grad). A post-hook on each
    node samples, so the peak inside backward is seen. The hooks return None (they change
    nothing) and are removed when backward() returns."""

    def __init__(self, live: LiveTensors, guard: Callable[..., Any]) -> None:
        self._live = live
        self._guard = guard
        self._handles: list[Any] = []
        self._nodes: dict[int, Any] = {}  # id -> node, of the graph followed now
        self._node_keys: dict[int, list[int]] = {}
        self._users: dict[int, int] = {}  # saved storage -> nodes that saved it
        self._saved: dict[int, int] = {}  # saved storage -> nbytes, while some node holds it
        self._flight: dict[int, int] = {}
        # Storages in _saved or _flight that no live seen tensor holds (LiveTensors counts
        # those), and their bytes: kept up to date (LiveTensors tells this object when a
        # storage starts or stops being held by a seen tensor), not summed per node.
        self._counted: dict[int, int] = {}
        self._bytes = 0
        # Gradients wait in the engine's buffers for the node they go to (summed there when
        # several arrive): they are freed once that node has run.
        self._edges: dict[int, list[int | None]] = {}  # node -> the node each output goes to
        self._waiting: dict[int, list[int]] = {}  # node -> storages of gradients sent to it
        self._senders: dict[int, int] = {}  # storage in flight -> nodes still to take it
        # Told (node number, when it ended) as each node runs (module_backward.py).
        self.node_listener: Callable[[int | None, int], None] | None = None
        self._numbers: dict[int, int] = {}  # node -> its sequence number

    def _count(self, key: int, size: int) -> None:
        if key not in self._counted and not self._live.tracked(key):
            self._counted[key] = size
            self._bytes += size

    def _uncount(self, key: int) -> None:
        if key not in self._saved and key not in self._flight:
            self._bytes -= self._counted.pop(key, 0)

    def tracked_now(self, key: int) -> None:
        """A seen tensor holds this storage from now on (LiveTensors counts it)."""
        self._bytes -= self._counted.pop(key, 0)

    def untracked_now(self, key: int, size: int) -> None:
        """The last seen tensor of this storage died; autograd may still hold it."""
        if (key in self._saved or key in self._flight) and key not in self._counted:
            self._counted[key] = size
            self._bytes += size

    def begin(self, roots: list[Any], nested: bool = False, read_saved: bool = True) -> None:
        """backward() starts from the nodes `roots`; `nested`: inside another one (a
        reentrant checkpoint's, in a node of the outer one), whose graph stays followed;
        `read_saved` False: what the nodes saved is not read (saved-tensor hooks)."""
        if not nested:
            self.end()
        # Held until backward() returns: ids identify nodes only while their Python
        # objects live (torch makes a new one for a node whose old one died).
        nodes = [n for n in graph_nodes(roots) if id(n) not in self._nodes]
        self._nodes.update((id(n), n) for n in nodes)
        self._live.listener = self
        for node in nodes:
            if type(node).__name__ == "AccumulateGrad":
                if self.node_listener is not None and hasattr(node, "register_hook"):
                    # Timed only, so that a parameter's .grad being written (and the
                    # script's post-accumulate hooks) is no module's backward time.
                    self._handles.append(node.register_hook(self._after_accumulate))
                continue
            saved = _node_saved(node) if read_saved else {}
            self._node_keys[id(node)] = list(saved)
            for key, size in saved.items():
                self._users[key] = self._users.get(key, 0) + 1
                self._saved[key] = size
                self._count(key, size)
            if hasattr(node, "register_hook"):
                self._edges[id(node)] = [_consumer(n) for n, _ in node.next_functions]
                self._numbers[id(node)] = node._sequence_nr()
                self._handles.append(node.register_hook(functools.partial(self._after_node, id(node))))
        self._sample({})

    def _sample(self, made: dict[int, int]) -> None:
        tracked, counted = self._live.tracked, self._counted
        new = sum(n for key, n in made.items() if key not in counted and not tracked(key))
        self._live.sample("backward", self._live.live + self._bytes + new)

    def _after_accumulate(self, *_: Any) -> None:
        ended = time.perf_counter_ns()
        self._guard(self.node_listener, None, ended)

    def _after_node(self, node_id: int, grad_inputs: Any, grad_outputs: Any) -> None:
        ended = time.perf_counter_ns()  # the node's own work ended here
        self._guard(self._follow, node_id, grad_inputs, grad_outputs, ended)

    def _follow(self, node_id: int, grad_inputs: Any, grad_outputs: Any, ended: int) -> None:
        if self.node_listener is not None:
            self.node_listener(self._numbers.get(node_id), ended)
        # A node hook gets flat tuples of tensors (or None): one storage each at most.
        made = [_storage(g) for g in grad_inputs]
        incoming = _storages(grad_outputs)
        # Where several gradients arrived, the engine summed them into a new buffer
        # (or into one of them) while they were all alive; then freed them.
        self._sample(incoming)
        for key in self._waiting.pop(node_id, ()):
            senders = self._senders.get(key, 1) - 1
            self._senders[key] = senders
            if senders <= 0 and self._flight.pop(key, None) is not None:
                self._uncount(key)
        # The node ran with its incoming gradient, its results and its saved tensors.
        running = dict(incoming)
        running.update(item for item in made if item is not None)
        self._sample(running)
        for key in self._node_keys.pop(node_id, ()):
            users = self._users.get(key, 1) - 1
            self._users[key] = users
            if users <= 0:
                self._saved.pop(key, None)
                self._uncount(key)
        edges = self._edges.get(node_id, ())
        for i, item in enumerate(made):
            if item is None:
                continue
            key, size = item
            self._flight[key] = size
            self._count(key, size)
            consumer = edges[i] if i < len(edges) else None
            if consumer is not None:  # else it becomes a parameter's .grad
                self._waiting.setdefault(consumer, []).append(key)
                self._senders[key] = self._senders.get(key, 0) + 1

    def end(self) -> None:
        """The outermost backward() returned: remove the hooks and forget the graph."""
        for handle in self._handles:
            try:
                handle.remove()
            except Exception:
                pass
        self._handles.clear()
        self._nodes.clear()
        if self._live.listener is self:
            self._live.listener = None
        self._node_keys.clear()
        self._numbers.clear()
        self._users.clear()
        self._saved.clear()
        self._flight.clear()
        self._counted.clear()
        self._bytes = 0
        self._edges.clear()
        self._waiting.clear()
        self._senders.clear()
