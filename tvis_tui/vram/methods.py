"""Tensor attributes and methods (`x.view(...)`, `x.shape`, `loss.backward()`) by shape."""

from __future__ import annotations

import math
from typing import Any

from tree_sitter import Node

from tvis_tui.vram import ops
from tvis_tui.vram.values import ITEMSIZE, DType, Native, Tensor, Unknown


def tensor_attr(api: Any, t: Tensor, name: str, node: Node) -> Any:
    if name == "shape":
        return tuple(t.shape)
    if name == "dtype":
        return DType(t.dtype)
    if name in ("T", "mT"):
        return ops.view(t, tuple(reversed(t.shape)) if name == "T" else ops.transpose(t.shape, -1, -2), False)
    if name == "ndim":
        return len(t.shape)
    if name in ("device", "grad", "data", "is_cuda", "requires_grad"):
        return t if name == "data" else Unknown(name)
    return Native(name, _method, t)


def _method(api: Any, native: Native, args: list, kwargs: dict, node: Node) -> Any:
    t: Tensor = native.self_value
    name = native.name
    tape = api.tape
    at = api.at(node)
    handler = _METHODS.get(name)
    if handler is not None:
        return handler(api, t, args, kwargs, at)
    if name in ops.VIEWS:
        return _view(api, t, name, args, kwargs)
    if name.rstrip("_") in ops.SAVES_OUTPUT | ops.SAVES_INPUT | ops.SAVES_NOTHING:
        return ops.pointwise(tape, name.rstrip("_"), t, name.endswith("_"), at)
    tape.guessed += 1
    return ops.new(tape, name, [t], t.shape, t.dtype, [t], at)


def _view(api: Any, t: Tensor, name: str, args: list, kwargs: dict) -> Any:
    if name in ("view", "reshape"):
        return ops.view(t, ops.reshape(t, tuple(args)), name == "view" or t.contiguous)
    if name in ("transpose", "movedim"):
        dims = (args + [0, 1])[:2]
        flat = getattr(t, "heads_last", False) and {d % 4 for d in dims if isinstance(d, int)} == {1, 2}
        return ops.view(t, ops.transpose(t.shape, *dims), flat)
    if name == "permute":
        dims = args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args
        if all(isinstance(d, int) for d in dims) and len(dims) == len(t.shape):
            return ops.view(t, tuple(t.shape[d] for d in dims), False)
        return ops.view(t, t.shape, False)
    if name == "flatten":
        start = args[0] if args and isinstance(args[0], int) else kwargs.get("start_dim", 0)
        end = args[1] if len(args) > 1 and isinstance(args[1], int) else kwargs.get("end_dim", -1)
        n = len(t.shape)
        if not n:
            return t
        start, end = start % n, end % n
        return ops.view(t, t.shape[:start] + (math.prod(t.shape[start:end + 1]),) + t.shape[end + 1:])
    if name == "unsqueeze" and args and isinstance(args[0], int):
        dims = list(t.shape)
        dims.insert(args[0] % (len(dims) + 1), 1)
        return ops.view(t, tuple(dims))
    if name == "squeeze":
        return ops.view(t, tuple(s for s in t.shape if s != 1))
    if name in ("expand", "view_as", "reshape_as", "expand_as"):
        shape = args[0].shape if args and isinstance(args[0], Tensor) else ops.reshape(t, tuple(args))
        return ops.view(t, shape, False)
    return ops.view(t, t.shape)


def _size(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    if args and isinstance(args[0], int):
        return t.shape[args[0]] if -len(t.shape) <= args[0] < len(t.shape) else Unknown("size")
    return tuple(t.shape)


def _to(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    dtype = kwargs.get("dtype")
    for arg in args:
        if isinstance(arg, DType):
            dtype = arg
    if isinstance(dtype, DType) and dtype.name != t.dtype:
        return ops.new(api.tape, "to", [t], t.shape, dtype.name, [], at)
    return t


def _cast(dtype: str):
    def cast(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
        if t.dtype == dtype:
            return t
        return ops.new(api.tape, "to", [t], t.shape, dtype, [], at)
    return cast


def _contiguous(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    if t.contiguous:
        return t
    return ops.new(api.tape, "contiguous", [t], t.shape, t.dtype, [], at)


def _reduce(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    dim = args[0] if args else kwargs.get("dim")
    out = Tensor(ops.reduce(t, dim, bool(kwargs.get("keepdim"))), t.dtype)
    api.tape.record("mean", [t], [out], [], line=at)
    return out


def _max(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    dim = args[0] if args else kwargs.get("dim")
    out = Tensor(ops.reduce(t, dim, bool(kwargs.get("keepdim"))), t.dtype)
    api.tape.record("max", [t], [out], [Tensor(out.shape, "int64")], line=at)
    return out if dim is None else (out, Tensor(out.shape, "int64"))


def _split(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    size = args[0] if args else kwargs.get("split_size")
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not isinstance(size, int) or not isinstance(dim, int) or not t.shape:
        return Unknown("split")
    dim %= len(t.shape)
    parts = max(1, t.shape[dim] // max(1, size))
    shape = t.shape[:dim] + (size,) + t.shape[dim + 1:]
    return tuple(ops.view(t, shape, False) for _ in range(parts))


def _chunk(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    n = args[0] if args else kwargs.get("chunks", 1)
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    if not isinstance(n, int) or not isinstance(dim, int) or not t.shape:
        return Unknown("chunk")
    return _split(api, t, [max(1, t.shape[dim % len(t.shape)] // n), dim], {}, at)


def _backward(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> None:
    api.facts.on_backward(api, at)


def _softmax(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return ops.pointwise(api.tape, "softmax", t, False, at)


def _masked_fill(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return ops.new(api.tape, "masked_fill", [t], t.shape, t.dtype, [], at)


def _scalar(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return Unknown("item")


def _numel(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return t.numel


def _element_size(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return ITEMSIZE.get(t.dtype, 4)


def _dim(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return len(t.shape)


def _matmul(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return ops.matmul(api.tape, t, args[0], at) if args else Unknown("matmul")


def _same(api: Any, t: Tensor, args: list, kwargs: dict, at: int) -> Any:
    return t


_METHODS = {
    "size": _size, "to": _to, "float": _cast("float32"), "half": _cast("float16"),
    "bfloat16": _cast("bfloat16"), "long": _cast("int64"), "int": _cast("int32"),
    "bool": _cast("bool"), "double": _cast("float64"), "contiguous": _contiguous,
    "mean": _reduce, "sum": _reduce, "max": _max, "min": _max, "argmax": _max,
    "split": _split, "chunk": _chunk, "backward": _backward, "softmax": _softmax,
    "log_softmax": _softmax, "masked_fill": _masked_fill, "item": _scalar,
    "tolist": _scalar, "numel": _numel, "dim": _dim, "element_size": _element_size,
    "matmul": _matmul, "cuda": _same, "cpu": _same, "detach": _same,
    "pin_memory": _same, "requires_grad_": _same, "clone": _same,
}
