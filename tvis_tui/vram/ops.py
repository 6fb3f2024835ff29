"""Tensor operations by shape: what each returns and what autograd saves for backward.

What a backward needs is PyTorch's own (derivatives.yaml): relu/sigmoid/tanh/softmax keep
their output, gelu/silu/linear/conv/norms keep their input, mul/matmul keep the other
operand, add keeps nothing. Ops the reader does not know keep their input (the stated
heuristic) and count as guessed.
"""

from __future__ import annotations

import math
from typing import Any

from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import Tensor, Unknown

SAVES_OUTPUT = {"relu", "relu_", "sigmoid", "tanh", "exp", "softmax", "log_softmax", "elu",
                "hardtanh", "relu6", "sqrt", "rsqrt"}
SAVES_INPUT = {"gelu", "silu", "leaky_relu", "mish", "softplus", "log", "sin", "cos", "pow",
               "square", "abs", "hardswish", "erf", "norm", "logsigmoid", "clamp", "float",
               "prelu"}
SAVES_NOTHING = {"neg", "sum", "mean", "clone", "cumsum", "detach", "zero_", "fill_",
                 "requires_grad_", "contiguous", "half", "bfloat16", "to", "type_as",
                 "flip", "roll", "repeat", "expand_as", "triu", "tril", "masked_fill",
                 "round", "sign", "argmax", "long", "int", "bool", "cuda", "cpu"}
VIEWS = {"view", "reshape", "transpose", "permute", "flatten", "unsqueeze", "squeeze",
         "expand", "t", "narrow", "view_as", "reshape_as", "unflatten", "movedim", "select"}


def broadcast(a: tuple, b: tuple) -> tuple:
    out = []
    for i in range(max(len(a), len(b))):
        x = a[-1 - i] if i < len(a) else 1
        y = b[-1 - i] if i < len(b) else 1
        out.append(max(x, y))
    return tuple(reversed(out))


def shape_of(value: Any) -> tuple:
    return value.shape if isinstance(value, Tensor) else ()


def new(tape: Tape, name: str, inputs: list[Tensor], shape: tuple, dtype: str,
        saved: list[Tensor], line: int = 0) -> Tensor:
    out = Tensor(tuple(int(s) for s in shape), dtype)
    tape.record(name, inputs, [out], saved, line=line)
    return out


def view(x: Tensor, shape: tuple, contiguous: bool = True) -> Tensor:
    return Tensor(tuple(int(s) for s in shape), x.dtype, x.requires_grad, x,
                  contiguous and x.contiguous)


def pointwise(tape: Tape, name: str, x: Tensor, inplace: bool = False, line: int = 0) -> Tensor:
    """A one-input elementwise op, saving what its backward needs."""
    dtype = tape.compute_dtype(name, x.dtype)
    if name in ("dropout", "dropout_"):
        return dropout(tape, x, 0.1, line)
    if inplace and dtype == x.dtype:
        out = view(x, x.shape)
    else:
        out = Tensor(x.shape, dtype)
    if name in SAVES_OUTPUT:
        saved = [out]
    elif name in SAVES_NOTHING:
        saved = []
    else:
        saved = [x]
        if name not in SAVES_INPUT:
            tape.guessed += 1
    tape.record(name, [x], [out], saved, line=line)
    if inplace:
        out.requires_grad = out.requires_grad or x.requires_grad
    return out


def dropout(tape: Tape, x: Tensor, p: Any, line: int = 0) -> Tensor:
    """CUDA's fused dropout keeps a bool mask; the CPU path multiplies by a saved noise
    tensor of the input's dtype."""
    if not tape.grad_enabled or isinstance(p, (int, float)) and p <= 0:
        return x
    out = Tensor(x.shape, x.dtype)
    mask = Tensor(x.shape, "bool" if tape.device == "cuda" else x.dtype)
    mask.scores = getattr(x, "scores", False)
    tape.record("dropout", [x], [out], [mask], line=line)
    return out


def binary(tape: Tape, op: str, a: Any, b: Any, line: int = 0) -> Any:
    ta, tb = isinstance(a, Tensor), isinstance(b, Tensor)
    if not ta and not tb:
        return Unknown("binary")
    if isinstance(a, Unknown) or isinstance(b, Unknown):
        x = a if ta else b
        return new(tape, op, [x], x.shape, x.dtype, [], line)
    if op == "@":
        return matmul(tape, a, b, line)
    shape = broadcast(shape_of(a), shape_of(b))
    dtype = (a if ta else b).dtype
    if ta and tb and a.dtype != b.dtype:
        dtype = "float32" if "float32" in (a.dtype, b.dtype) else a.dtype
    inputs = [t for t in (a, b) if isinstance(t, Tensor)]
    saved: list[Tensor] = []
    if op in ("*", "/") and ta and tb:
        saved = [t for t, other in ((a, b), (b, a)) if other.requires_grad]
        if op == "/" and b.requires_grad:
            saved = [a, b]
    elif op == "**":
        saved = inputs
    return new(tape, op, inputs, shape, dtype, saved, line)


def matmul(tape: Tape, a: Tensor, b: Tensor, line: int = 0) -> Tensor:
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        return Unknown("matmul")
    dtype = tape.compute_dtype("matmul", a.dtype)
    ca, cb = tape.cast(a, dtype), tape.cast(b, dtype)
    sa, sb = a.shape, b.shape
    if len(sb) == 1:
        shape = sa[:-1]
    elif len(sa) == 1:
        shape = sb[:-2] + sb[-1:]
    else:
        shape = broadcast(sa[:-2], sb[:-2]) + (sa[-2], sb[-1])
    saved = [t for t, other in ((cb, a), (ca, b)) if other.requires_grad]
    out = Tensor(tuple(int(s) for s in shape), dtype)
    # q @ k.transpose(-2, -1): a square (T, T) result from a transposed right operand.
    out.scores = len(shape) >= 3 and shape[-1] == shape[-2] and not b.contiguous
    tape.record("matmul", [a, b], [out], saved, line=line)
    return out


def reduce(x: Tensor, dim: Any, keepdim: bool) -> tuple:
    if dim is None or isinstance(dim, Unknown):
        return ()
    dims = dim if isinstance(dim, (list, tuple)) else (dim,)
    dims = {d % len(x.shape) for d in dims if isinstance(d, int)} if x.shape else set()
    return tuple(1 if i in dims else s for i, s in enumerate(x.shape)
                 if keepdim or i not in dims)


def reshape(x: Tensor, args: tuple) -> tuple:
    """The shape `x.view(*args)` gives, resolving one -1 and Unknown sizes."""
    sizes = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    known = math.prod(s for s in sizes if isinstance(s, int) and s > 0)
    free = [i for i, s in enumerate(sizes) if not isinstance(s, int) or s < 0]
    if len(free) == 1:
        sizes[free[0]] = max(1, x.numel // max(1, known))
    return tuple(s if isinstance(s, int) and s > 0 else 1 for s in sizes)


def transpose(shape: tuple, d0: Any, d1: Any) -> tuple:
    dims = list(shape)
    if isinstance(d0, int) and isinstance(d1, int) and dims:
        d0, d1 = d0 % len(dims), d1 % len(dims)
        dims[d0], dims[d1] = dims[d1], dims[d0]
    return tuple(dims)


def index(x: Tensor, keys: list) -> Tensor:
    """`x[keys]` for ints, slices, None and Ellipsis (a view); tensor indices gather."""
    if len(keys) == 1 and isinstance(keys[0], tuple):
        keys = list(keys[0])
    shape, out, dim = list(x.shape), [], 0
    for key in keys:
        if key is None:
            out.append(1)
        elif key is Ellipsis:
            rest = len(shape) - dim - (len([k for k in keys if k not in (None, Ellipsis)]) - 1)
            out.extend(shape[dim:dim + max(0, rest)])
            dim += max(0, rest)
        elif isinstance(key, slice) and dim < len(shape):
            start, stop, step = key.indices(shape[dim]) if all(
                isinstance(v, (int, type(None))) for v in (key.start, key.stop, key.step)
            ) else (0, shape[dim], 1)
            out.append(max(0, (stop - start + step - 1) // step))
            dim += 1
        elif isinstance(key, Tensor):
            out.extend(key.shape)
            dim += 1
        else:
            dim += 1
    out.extend(shape[dim:])
    gathered = any(isinstance(k, Tensor) for k in keys)
    if gathered:
        return Tensor(tuple(out), x.dtype, x.requires_grad)
    return view(x, tuple(out), contiguous=False)


def attention_kept(tape: Tape, shape: tuple, dtype: str, dropout: Any, math_path: bool) -> list[Tensor]:
    """The (batch, heads, T, S) tensors an attention keeps for backward. Fused kernels keep
    none, except that the CPU one has no dropout: with dropout > 0 on CPU, and whenever the
    weights are asked for, the math path keeps the probabilities, the dropout noise (a bool
    mask on CUDA) and the dropped probabilities."""
    training = tape.grad_enabled and isinstance(dropout, (int, float)) and dropout > 0
    if not math_path and not (training and tape.device == "cpu"):
        return []
    kept = [Tensor(shape, dtype)]
    if training:
        kept += [Tensor(shape, "bool" if tape.device == "cuda" else dtype), Tensor(shape, dtype)]
    return kept
