"""Qualified module names (`blocks.0.conv1`) inside the root model that was called."""

from __future__ import annotations

import inspect
import threading
import weakref
from types import FrameType
from typing import Any, Callable, Iterator, Sequence

import torch

from tvis_tui.record.frame_locals import frame_locals
from tvis_tui.record.loop_head import bound_in_loops, own_attributes


class ModuleNames:
    """Maps submodules of each root model to their `named_modules()` names.

    A root is a module called while no other module call is open on that thread: the
    model itself, or a loss module. Its names are computed once and recomputed only when
    a module turns up that the cached table does not know (a submodule added later).

    A root is named by its class. Where the script holds several models of that class
    (a GAN's `G` and `D`, a teacher and a student, a model and its EMA copy), one with
    parameters is named by the script's variable for it, as the code calling it sees it
    (a local, an attribute of `self`, a global; not a loop's variable, which names each
    member of an ensemble in turn); else, or where that name is taken, a
    second root of the same class that holds parameters is `Sequential#2`, so that their
    parameters read apart; a number is given again once its model is gone. Roots without
    parameters keep the class name: a loss module made anew each step is the same loss.
    """

    def __init__(self) -> None:
        self._tables: weakref.WeakKeyDictionary[torch.nn.Module, dict[int, str]] = \
            weakref.WeakKeyDictionary()
        self._roots: weakref.WeakValueDictionary[int, torch.nn.Module] = weakref.WeakValueDictionary()
        self._param_key: tuple[int, ...] = ()
        self._params: dict[int, str] = {}
        self._root_names: weakref.WeakKeyDictionary[torch.nn.Module, str] = weakref.WeakKeyDictionary()
        # Roots with parameters, by class, in the order of their numbers (#1 is unnumbered).
        self._numbered: dict[str, list[weakref.ref]] = {}
        # A model called from several threads at once must get one name, not one per thread.
        self._naming = threading.RLock()  # a finalizer run while it is held may call a model

    def root_name(self, root: torch.nn.Module,
                  caller: Callable[[], FrameType | None] = lambda: None) -> str:
        """`caller` finds the frame of user code calling the root, where the script's name
        for it is looked up (on its first call only). A torch.compile'd model is named as
        the model it wraps, and so are its parameters."""
        root = compiled_from(root)
        name = self._root_names.get(root)
        if name is None:
            with self._naming:
                name = self._root_names.get(root) or self._new_root_name(root, caller())
        return name

    def _new_root_name(self, root: torch.nn.Module, caller: FrameType | None) -> str:
        self._roots[id(root)] = root
        name = class_name(root)
        first = next(root.parameters(), None)
        made_from = self._made_from(root, name, first) if isinstance(root, torch.jit.ScriptModule) else None
        if made_from is not None:  # torch.jit.trace ran the model itself first
            name = made_from
        elif first is not None:
            variable = script_name(root, caller)
            if variable is not None and variable not in self._root_names.values():
                name = variable
            else:
                number = self._number(name, root)
                name = name if number == 1 else f"{name}#{number}"
        self._root_names[root] = name
        return name

    def _made_from(self, scripted: torch.nn.Module, cls: str, first: Any) -> str | None:
        """The name of the model a TorchScript module was made from, when that one was
        called too: the two share their parameters, and one name fits both."""
        if first is None:
            return None
        for root, name in list(self._root_names.items()):
            if root is not scripted and class_name(root) == cls and next(root.parameters(), None) is first:
                return name
        return None

    def _number(self, cls: str, root: torch.nn.Module) -> int:
        """The lowest number no live root of this class holds: a model made anew for each
        evaluation or trial, the old one gone, keeps its name."""
        refs = self._numbered.setdefault(cls, [])
        for i, ref in enumerate(refs):
            if ref() is None:
                refs[i] = weakref.ref(root)
                return i + 1
        refs.append(weakref.ref(root))
        return len(refs)

    def inside(self, module: torch.nn.Module, caller: Callable[[], FrameType | None] = lambda: None
               ) -> tuple[torch.nn.Module, str] | None:
        """(root, qualified name) when `module`, called with no call open, is part of a
        model: a block that checkpointing recomputes during backward, a ModuleDict head the
        loop calls itself, `D[0](x)` before `D(x)`. Its calls then read as inside that
        model, named as they are when the model calls them. A model not called yet is
        looked for (`_owner`) among the names the calling code (`caller`) sees, on the
        part's first call; only for a part that holds parameters (a loss made anew each
        step is searched for no owner each step)."""
        for root, table in list(self._tables.items()):
            name = table.get(id(module))
            if name is not None and root is not module and name not in _WRAPPED:
                return root, name
        if module in self._root_names or next(module.parameters(), None) is None:
            return None  # a model of its own, seen before; or one no model's name hangs on
        frame = caller()
        owner = _owner(module, frame) if frame is not None else None
        if owner is None:
            return None
        self.root_name(owner, lambda: frame)
        return owner, self.name(owner, module)

    def name(self, root: torch.nn.Module, module: torch.nn.Module) -> str:
        table = self._table(root)
        name = table.get(id(module))
        if name is None:
            table = self._table(root, refresh=True)
            name = table.get(id(module))
        # A module that is not inside the root (passed in as an argument, say).
        return name if name is not None else type(module).__name__

    def _table(self, root: torch.nn.Module, refresh: bool = False) -> dict[int, str]:
        table = None if refresh else self._tables.get(root)
        if table is None:
            table = {}
            for n, m in root.named_modules(remove_duplicate=False):
                if n:
                    table.setdefault(id(m), n)  # a shared module keeps its first name
            self._tables[root] = table
        return table

    def parameters_may_have_moved(self) -> None:
        """Name the parameters anew when next asked (called as each optimizer step opens):
        a script may register a parameter under another name mid-run (pruning moves
        `weight` to `weight_orig`); one walk of the models per step."""
        self._param_key = ()

    def parameter_names(self) -> dict[int, str]:
        """id(parameter) -> `Root.blocks.0.conv1.weight`, over all live roots."""
        key = tuple(sorted(self._roots.keys()))
        if key != self._param_key:
            params: dict[int, str] = {}  # filled before it is published: other threads read it
            # The model with the most parameters names them first: a part of it that ran
            # on its own before it (a parametrization at build time) must not.
            for root in sorted(self.roots(), key=lambda r: -sum(1 for _ in r.parameters())):
                for n, p in root.named_parameters():
                    params.setdefault(id(p), f"{self.root_name(root)}.{n}")
            self._params, self._param_key = params, key
        return self._params

    def names_of(self, params: Sequence[torch.Tensor], given: Sequence[str | None] = ()) -> list[str]:
        """Each parameter's name: its model's (`Root.layer.weight`), else `given` (by
        position: what the script called it for its optimizer, updates.given_names), else
        its place, `param[i]`."""
        names = self.parameter_names()
        return [names.get(id(p)) or (given[i] if i < len(given) else None) or f"param[{i}]"
                for i, p in enumerate(params)]

    def gradients(self, params: Sequence[torch.Tensor], given: Sequence[str | None] = ()
                  ) -> Iterator[tuple[str, torch.Tensor]]:
        """(parameter name, .grad) for the parameters that have a gradient."""
        for name, p in self.with_gradients(params, given):
            yield name, p.grad  # type: ignore[misc]

    def with_gradients(self, params: Sequence[torch.Tensor], given: Sequence[str | None] = ()
                       ) -> Iterator[tuple[str, torch.Tensor]]:
        """(parameter name, parameter) for those with a gradient: the ones a step updates."""
        for name, p in zip(self.names_of(params, given), params):
            if p.grad is not None:
                yield name, p

    def roots(self) -> list[torch.nn.Module]:
        """Root models seen so far and still alive (for naming their parameters)."""
        return list(self._roots.values())


def compiled_from(module: torch.nn.Module) -> torch.nn.Module:
    """The model a torch.compile'd module (an OptimizedModule) wraps, which names it and
    its parameters (`Net.fc.weight`, not `OptimizedModule._orig_mod.fc.weight`)."""
    if type(module).__name__ == "OptimizedModule":
        inner = module._modules.get("_orig_mod")
        if isinstance(inner, torch.nn.Module):
            return inner
    return module


def class_name(module: torch.nn.Module) -> str:
    """The class the script wrote: a TorchScript module's (`torch.jit.script` or `trace`)
    is the model it was made from (`Net`, not `RecursiveScriptModule`)."""
    if isinstance(module, torch.jit.ScriptModule):
        original = getattr(module, "original_name", None)
        if isinstance(original, str) and original:
            return original
    return type(module).__name__


def script_name(root: torch.nn.Module, caller: FrameType | None) -> str | None:
    """The name the code calling `root` (`caller`, a frame of user code) gives it: its
    variable, where it also sees another model of its class with parameters (a GAN's two
    `Sequential`s), else its place in a ModuleList or ModuleDict it sees (`blocks.0`);
    None where the class names it well."""
    if caller is None:
        return None
    # Not a loop's variable (`for member in models:`): it names each model in turn.
    passing = bound_in_loops(caller.f_code)
    visible = visible_names(caller)
    scope = {n: v for n, v in visible.items() if n not in passing and n != "self" and not n.startswith("_")}
    name = next((n for n, v in scope.items() if v is root), None)
    same_class = {id(v) for v in scope.values()
                  if type(v) is type(root) and next(v.parameters(), None) is not None}
    named = name if name is not None and len(same_class) > 1 else None
    # The script's own name for a model (a module-level `G`, `self.teacher`) tells models
    # of one class apart; a function's local (`run_block(block, x)`) does not, and a
    # container's member keeps its place in it (`first = blocks[0]` too).
    code = caller.f_code
    locals_ = code.co_varnames if code.co_flags & inspect.CO_OPTIMIZED else ()
    local = name in locals_
    if named is not None and not local:
        return named
    # A part's holder is the script's model, not a function's argument (`run_out(m, h)`
    # names each model's part `m.out` in turn); a method's `self` is one.
    arguments = locals_[:code.co_argcount + code.co_kwonlyargcount]
    holders = {n: v for n, v in scope.items() if n not in arguments}
    if visible.get("self") is not None:
        holders = {"self": visible["self"], **holders}
    return _member_name(root, scope) or named or _part_name(root, holders, None if local else name)


def _member_name(root: torch.nn.Module, scope: dict[str, Any]) -> str | None:
    """`blocks.0` for a member of a ModuleList or ModuleDict the script holds: such a
    container is never called itself, so its members are roots, and their names and
    their parameters' follow the container's state_dict (`blocks.0.lin.weight`)."""
    for name, value in scope.items():
        if type(value) in (torch.nn.ModuleList, torch.nn.ModuleDict):
            members = own_attributes(value).get("_modules") or {}
            key = next((k for k, member in members.items() if member is root), None)
            if key is not None:
                return f"{name}.{key}"
    return None


def _part_name(root: torch.nn.Module, scope: dict[str, Any], variable: str | None) -> str | None:
    """`b.out` for a part of a model the script holds, called by itself (`b.out(h)`, or a
    LightningModule's `self.model(x)`: `model`), where its class is one of torch.nn's own
    (`Linear#2` says nothing of which part it is); a class of the script's names it
    well. The script's own `variable` for the part, where it has one (`head = nn.Linear(..)`
    put in `model` too), names it better. Not through the attribute a wrapper holds the
    whole model in."""
    if not type(root).__module__.startswith("torch.nn."):
        return None
    for name, value in scope.items():
        if value is root or not issubclass(type(value), torch.nn.Module):
            continue
        path = next((n for n, m in value.named_modules(remove_duplicate=False) if m is root), None)
        if path and not _WRAPPED.intersection(path.split(".")):
            return variable or (path if name == "self" else f"{name}.{path}")
    return None


_WRAPPED = {"module", "_orig_mod"}
"""The attribute a wrapper (DDP, DataParallel, torch.compile) holds the whole model in:
calling that model itself does not make it a part of the wrapper."""


def _owner(module: torch.nn.Module, frame: FrameType) -> torch.nn.Module | None:
    """The outermost model that code in `frame` sees, that will call `module` when called
    itself, and that `module` is a part of: the model `__init__` builds (`self`, probing
    a part for a size), or a Sequential (`D[0](x)` before `D(x)`). Not any module that
    holds it: a LightningModule, or a holder of a model and its loss, may never be called."""
    best, size = None, 0
    for name, value in visible_names(frame).items():
        kind = type(value)  # not isinstance: a dead weakref.proxy raises on __class__
        if value is module or not (
                name == "self" and frame.f_code.co_name == "__init__" and issubclass(kind, torch.nn.Module)
                or issubclass(kind, torch.nn.Sequential) and kind.forward is torch.nn.Sequential.forward):
            continue
        parts = dict(value.named_modules(remove_duplicate=False))
        path = next((n for n, m in parts.items() if m is module), None)
        if path and path not in _WRAPPED and len(parts) > size:
            best, size = value, len(parts)
    return best


def visible_names(frame: FrameType) -> dict[str, Any]:
    """The names code in `frame` sees: its locals, `self`'s attributes, its globals (nearest
    first), read without running the script's code (no properties, no __getattr__)."""
    scope = dict(frame_locals(frame))
    for names in (own_attributes(scope.get("self")), frame.f_globals):
        for name, value in names.items():
            scope.setdefault(name, value)
    return scope
