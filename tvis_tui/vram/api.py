"""How the interpreter's values behave: attribute access, calls, indexing, iteration and
context managers, for Python values, script classes, modules and tensors."""

from __future__ import annotations

import itertools
from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

from tree_sitter import Node

from tvis_tui.vram import builtins, forward, lightning, methods, ops, torchlib
from tvis_tui.vram.functional import functional_call
from tvis_tui.vram.losses import LOSSES
from tvis_tui.vram.interp import Interp, Scope
from tvis_tui.vram.source import named, text
from tvis_tui.vram.values import (UNKNOWN, Context, Function, Instance, Loader, Module,
                                  Native, Optimizer, Param, Ref, Tensor, Unknown, UserClass)

_CURRENT: list["Api"] = []


def current_api() -> "Api":
    return _CURRENT[-1]


class Api:
    def __init__(self, facts: Any, tape: Any) -> None:
        self.facts, self.tape = facts, tape
        self.globals = Scope(builtins.scope())
        self.interp = Interp(self, facts, tape)
        self.module_depth = 0

    def at(self, node: Node | None) -> int:
        return self.interp.at(node)

    def __enter__(self) -> "Api":
        _CURRENT.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _CURRENT.pop()

    # names ----------------------------------------------------------------------------
    def do_import(self, node: Node, scope: Scope) -> None:
        if node.type == "import_statement":
            for item in named(node):
                if item.type == "aliased_import":
                    path = text(item.child_by_field_name("name"))
                    scope.set(text(item.child_by_field_name("alias")), torchlib.ref(path))
                else:
                    path = text(item)
                    scope.set(path.split(".")[0], torchlib.ref(path.split(".")[0]))
            return
        module = text(node.child_by_field_name("module_name"))
        for item in node.children_by_field_name("name"):
            if item.type == "aliased_import":
                name = text(item.child_by_field_name("name"))
                alias = text(item.child_by_field_name("alias"))
            else:
                name = alias = text(item)
            if module.startswith(".") or self.facts.has_sibling(module):
                scope.set(alias, self.facts.sibling(module, name, self))
            else:
                scope.set(alias, torchlib.ref(f"{module}.{name}"))

    def is_module_base(self, value: Any) -> bool:
        if isinstance(value, UserClass):
            return value.is_module
        return isinstance(value, Ref) and value.path.split(".")[-1] in {"Module", *lightning.MODULE_BASES}

    # attributes -----------------------------------------------------------------------
    def getattr(self, obj: Any, name: str, node: Node) -> Any:
        if isinstance(obj, Ref):
            return torchlib.attribute(obj, name)
        if isinstance(obj, Tensor):
            return methods.tensor_attr(self, obj, name, node)
        if isinstance(obj, Module):
            if name == "training" and name not in obj.attrs:
                return True  # the reader follows training, not evaluation
            if name in obj.attrs:
                return obj.attrs[name]
            if name == "module" and id(obj) in self.facts.wrapped:
                return obj  # `model.module` of a wrapped model: the model stands for its wrapper
            if obj.cls is not None and name in obj.cls.methods:
                return self.method(obj, name)
            if obj.cls is not None and name in obj.cls.fields:
                return obj.cls.fields[name]
            return Native(name, torchlib.module_method, obj)
        if isinstance(obj, Instance):
            if name in obj.attrs:
                return obj.attrs[name]
            if obj.cls is not None and name in obj.cls.methods:
                return self.method(obj, name)
            if obj.cls is not None and name in obj.cls.fields:
                return obj.cls.fields[name]
            return Native(name, torchlib.object_method, obj)
        if isinstance(obj, UserClass):
            if name in obj.fields:
                return obj.fields[name]
            if name in obj.methods:
                return Function(obj.methods[name], obj.scope)
            return Unknown(f"{obj.name}.{name}")
        if isinstance(obj, Param) and name in ("shape", "requires_grad", "dtype"):
            return {"shape": obj.shape, "requires_grad": obj.trainable, "dtype": obj.dtype}[name]
        if isinstance(obj, (Optimizer, Loader, Param, Context)):
            return Native(name, torchlib.object_method, obj)
        if isinstance(obj, Unknown):
            return obj
        return builtins.python_attr(obj, name)

    def method(self, obj: Module | Instance, name: str) -> Any:
        """A script class's method bound to `obj`; a property's value (its getter called)."""
        bound = Function(obj.cls.methods[name], obj.cls.scope, obj)
        return self.interp.call_function(bound, [], {}) if name in obj.cls.properties else bound

    def setattr(self, obj: Any, name: str, value: Any, node: Node) -> None:
        value = self.facts.override(name, value)
        if isinstance(obj, (Module, Instance)):
            if isinstance(obj, Module) and name == "weight" and isinstance(value, Param):
                self.facts.tied = True
            obj.attrs[name] = value
        elif isinstance(obj, Param) and name == "requires_grad" and value is False:
            obj.trainable = False
        elif isinstance(obj, Tensor) and name == "requires_grad":
            obj.requires_grad = bool(value)

    # calls ------------------------------------------------------------------------------
    def call(self, fn: Any, args: list, kwargs: dict, node: Node, scope: Scope | None = None) -> Any:
        if isinstance(fn, Function):
            return self.interp.call_function(fn, args, kwargs)
        if isinstance(fn, UserClass):
            obj = self.interp.instantiate(fn, args, kwargs, self.interp.at(node))
            if isinstance(obj, Module):
                self.facts.on_model(obj, node)
            return obj
        if isinstance(fn, Module):
            return self.call_module(fn, args, kwargs, self.interp.at(node))
        if isinstance(fn, Native):
            return fn.fn(self, fn, args, kwargs, node)
        if isinstance(fn, Ref):
            return _wrapped(torchlib.call(self, fn.path, args, kwargs, node), args)
        if isinstance(fn, Instance) and fn.cls is not None and "__call__" in fn.cls.methods:
            return self.interp.call_function(Function(fn.cls.methods["__call__"], fn.cls.scope, fn),
                                             args, kwargs)
        return _wrapped(Unknown("call"), args)

    def call_module(self, module: Any, args: list, kwargs: dict, line_no: int) -> Any:
        if not isinstance(module, Module):
            return self.call(module, args, kwargs, None) if module is not None else UNKNOWN
        top = self.module_depth == 0
        if top:
            args = self.facts.on_forward(module, args, line_no, self.interp.loop_stack)
        self.module_depth += 1
        try:
            if self.facts.should_checkpoint(module):
                return torchlib.checkpoint(self, module, args, kwargs, line_no)
            if module.cls is not None and "forward" in module.cls.methods:
                fn = Function(module.cls.methods["forward"], module.cls.scope, module)
                return self.interp.call_function(fn, args, kwargs)
            if module.kind in LOSSES:
                return functional_call(self, LOSSES[module.kind], args, kwargs, line_no)
            if module.known_params:
                return torchlib.known_forward(self, module, args, line_no)
            return forward.forward(self.tape, module, args, kwargs, line_no)
        finally:
            self.module_depth -= 1

    # containers --------------------------------------------------------------------------
    def subscript(self, value: Any, keys: list, node: Node) -> Any:
        if isinstance(value, Tensor):
            return ops.index(value, keys)
        if any(isinstance(k, Unknown) for k in keys):
            return Unknown("index")
        key = keys[0] if len(keys) == 1 else tuple(keys)
        if isinstance(value, Module):
            children = value.attrs.get("_list") or value.children()
            if isinstance(key, str):
                return value.attrs.get(key, UNKNOWN)
            picked = children[key]
            return Module("Sequential", {"_list": picked}) if isinstance(key, slice) else picked
        if isinstance(value, Instance):
            return value.attrs.get(key, Unknown(f"[{key}]"))
        if isinstance(value, (list, tuple, dict, str)):
            return value[key]
        return Unknown("subscript")

    def unpack(self, value: Any, n: int) -> list:
        if isinstance(value, (list, tuple)) and len(value) == n:
            return list(value)
        if isinstance(value, Tensor) and value.shape and value.shape[0] == n:
            return [Tensor(value.shape[1:], value.dtype, value.requires_grad, value)] * n
        return [Unknown("unpacked")] * n

    def iterate(self, value: Any, node: Node, trains: bool) -> list:
        if isinstance(value, (list, tuple, str)):
            return list(value)
        if isinstance(value, range):
            return list(value[:1 if trains else 4096])
        if isinstance(value, dict):
            return list(value)
        if isinstance(value, (KeysView, ValuesView, ItemsView)):
            # `TASKS.items()`: a dict of heads built from it was left out of the model (sweep P)
            return list(itertools.islice(value, 1 if trains else 4096))
        if isinstance(value, Module):
            return value.attrs.get("_list") or value.children()
        if isinstance(value, Loader):
            return [torchlib.batch_of(self, value)]
        if isinstance(value, Tensor) and value.shape:
            return [Tensor(value.shape[1:], value.dtype, value.requires_grad, value)] * min(
                value.shape[0], 1 if trains else 256)
        return [Unknown("loop item")] if trains else []

    def enter(self, manager: Any, node: Node) -> Any:
        if isinstance(manager, Context):
            manager.saved = (self.tape.grad_enabled, self.tape.autocast)
            if manager.kind == "autocast" and manager.enabled:
                self.tape.autocast = self.facts.autocast_dtype(manager.dtype, self.at(node))
                self.tape.cast_cache = {}
            elif manager.kind == "no_grad":
                self.tape.grad_enabled = False
            elif manager.kind == "enable_grad":
                self.tape.grad_enabled = True
        return manager

    def exit(self, manager: Any) -> None:
        if isinstance(manager, Context) and manager.saved is not None:
            self.tape.grad_enabled, self.tape.autocast = manager.saved

    def tensor_binary(self, op: str, left: Any, right: Any, node: Node) -> Any:
        return ops.binary(self.tape, op, left, right, self.interp.at(node))


def _wrapped(result: Any, args: list) -> Any:
    """What a call the reader does not know returned; the DataLoader where it was given
    only that one (`tqdm(train_loader)`, a prefetcher): iterating it gives its batches."""
    if isinstance(result, Unknown) and len(args) == 1 and isinstance(args[0], Loader):
        return args[0]
    return result
