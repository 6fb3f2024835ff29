"""Python built-ins and methods of plain values, as the interpreter sees them."""

from __future__ import annotations

from typing import Any

from tvis_tui.vram.values import UNKNOWN, Instance, Loader, Module, Native, Tensor, Unknown

_PURE = {
    "int": int, "float": float, "str": str, "bool": bool, "abs": abs, "round": round,
    "min": min, "max": max, "sum": sum, "len": len, "list": list, "tuple": tuple,
    "dict": dict, "set": set, "sorted": sorted, "reversed": lambda x: list(reversed(x)),
    "enumerate": lambda x, start=0: list(enumerate(x, start)), "zip": lambda *a: list(zip(*a)),
    "range": range, "divmod": divmod, "pow": pow, "any": any, "all": all,
    "map": lambda f, *xs: UNKNOWN, "iter": lambda x: x,
    # `filter(lambda p: p.requires_grad, model.parameters())`: every item is kept, the
    # predicate not followed (frozen parameters get no gradient or state anyway).
    "filter": lambda f, xs: list(xs) if isinstance(xs, (list, tuple)) else UNKNOWN,
}


_ITERATING = frozenset({"enumerate", "zip", "iter", "list", "tuple"})
"""Built-ins that take what a `for` over their argument would give (a DataLoader's batch)."""


def _pure(name: str, fn: Any) -> Native:
    def call(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
        if name in _ITERATING and args and any(isinstance(a, Loader) for a in args):
            # `enumerate(train_loader)`: the batch as the loop over the loader would see it
            args = [api.iterate(a, node, False) if isinstance(a, Loader) else a for a in args]
        if name == "len" and args and isinstance(args[0], Tensor):
            return args[0].shape[0] if args[0].shape else Unknown("len")
        if name == "len" and args and isinstance(args[0], Module):
            return len(args[0].attrs.get("_list") or args[0].children())
        if name in ("list", "tuple") and args and isinstance(args[0], Module):
            return list(args[0].attrs.get("_list") or args[0].children())
        if any(isinstance(a, (Unknown, Tensor, Module)) for a in args):
            return args[0] if name in ("iter", "list", "tuple") else Unknown(name)
        return fn(*args, **kwargs)
    return Native(name, call)


def _print(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> None:
    return None


def _isinstance(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
    return Unknown("isinstance")


def _getattr(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
    if len(args) >= 2 and isinstance(args[1], str):
        value = api.getattr(args[0], args[1], node)
        if isinstance(value, Unknown) and len(args) > 2:
            return args[2]
        return value
    return UNKNOWN


def _hasattr(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
    if len(args) == 2 and isinstance(args[0], (Module, Instance)) and isinstance(args[1], str):
        return args[1] in args[0].attrs
    return Unknown("hasattr")


def _super(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
    # `super().__init__(...)` of nn.Module or a config base needs nothing from the reader.
    return Unknown("super()")


def scope() -> Any:
    from tvis_tui.vram.interp import Scope

    top = Scope()
    for name, fn in _PURE.items():
        top.set(name, _pure(name, fn))
    for name, fn in (("print", _print), ("isinstance", _isinstance), ("getattr", _getattr),
                     ("hasattr", _hasattr), ("super", _super), ("open", _print)):
        top.set(name, Native(name, fn))
    top.set("__name__", "__main__")
    top.set("__file__", "script.py")
    top.set("Ellipsis", Ellipsis)
    return top


_STR = {"lower", "upper", "strip", "split", "replace", "startswith", "endswith", "format",
        "join", "rstrip", "lstrip", "title"}
_DICT = {"get", "items", "keys", "values", "copy", "setdefault"}


def python_attr(obj: Any, name: str) -> Any:
    """A method of a str, dict or list; mutating list/dict methods apply to the value."""
    if isinstance(obj, str) and name in _STR:
        return _bound(getattr(obj, name))
    if isinstance(obj, dict) and (name in _DICT or name in ("update", "pop")):
        return _bound(getattr(obj, name))
    if isinstance(obj, list) and name in ("append", "extend", "insert", "pop", "index",
                                         "copy", "count"):
        return _bound(getattr(obj, name))
    if isinstance(obj, (int, float)) and name in ("is_integer", "real"):
        return _bound(getattr(obj, name))
    return Unknown(f".{name}")


def _bound(method: Any) -> Native:
    def call(api: Any, native: Native, args: list, kwargs: dict, node: Any) -> Any:
        return method(*args, **kwargs)
    return Native(getattr(method, "__name__", "method"), call)

