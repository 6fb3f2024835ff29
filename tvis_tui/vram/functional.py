"""torch.* and torch.nn.functional.* functions by shape: factories, activations, losses,
attention, and the rest a training script commonly calls."""

from __future__ import annotations

from typing import Any

from tvis_tui.vram import ops
from tvis_tui.vram.values import DType, Required, Tensor, Unknown


def _given_sizes(args: list, kwargs: dict) -> tuple:
    sizes = kwargs.get("size", args[0] if len(args) == 1 and isinstance(args[0], (list, tuple)) else args)
    return tuple(s for s in sizes if not isinstance(s, DType))


def _sizes(args: list, kwargs: dict) -> tuple | None:
    sizes = _given_sizes(args, kwargs)
    return sizes if all(isinstance(s, int) and not isinstance(s, bool) for s in sizes) else None


def _dtype(kwargs: dict, default: str = "float32") -> str:
    dtype = kwargs.get("dtype")
    return dtype.name if isinstance(dtype, DType) else default


def factory(api: Any, name: str, args: list, kwargs: dict, at: int) -> Any:
    if name == "randint":
        low_high = [a for a in args if isinstance(a, int)]
        size = next((a for a in args if isinstance(a, (list, tuple))), kwargs.get("size"))
        return _tensor(api, size, "int64", low_high or [0])
    if name in ("arange", "linspace"):
        ints = [a for a in args if isinstance(a, int)]
        n = ints[-1] - (ints[0] if len(ints) > 1 else 0) if ints and name == "arange" else (
            ints[-1] if ints else 1)
        return Tensor((max(1, n),), _dtype(kwargs, "int64" if name == "arange" else "float32"))
    if name in ("tensor", "as_tensor", "from_numpy"):
        return Tensor((), _dtype(kwargs)) if args and isinstance(args[0], (int, float)) else (
            Unknown("tensor data"))
    if name in ("zeros_like", "ones_like", "randn_like", "empty_like", "rand_like", "full_like"):
        return Tensor(args[0].shape, args[0].dtype) if args and isinstance(args[0], Tensor) else (
            Unknown(name))
    given = args[:1] if name == "full" else args
    sizes = _sizes(given, kwargs)
    if sizes is None:  # an argument the script requires says which flag would size it
        return next((s for s in _given_sizes(given, kwargs) if isinstance(s, Required)), Unknown(f"{name} size"))
    return Tensor(tuple(sizes), _dtype(kwargs))


def _tensor(api: Any, size: Any, dtype: str, low_high: list) -> Any:
    if isinstance(size, (list, tuple)) and all(isinstance(s, int) for s in size):
        t = Tensor(tuple(size), dtype)
        t.high = low_high[-1]
        return t
    return Unknown("randint size")


def cross_entropy(api: Any, args: list, kwargs: dict, at: int) -> Any:
    """log_softmax keeps its float32 output, logits-sized: the loss's own memory on LMs."""
    logits = args[0] if args else kwargs.get("input")
    if not isinstance(logits, Tensor):
        return Unknown("loss input")
    tape = api.tape
    dtype = tape.compute_dtype("cross_entropy", logits.dtype)
    cast = tape.cast(logits, dtype)
    if cast is not logits:
        tape.record("to", [logits], [cast], [], line=at)
    logp = Tensor(logits.shape, dtype)
    tape.record("log_softmax", [cast], [logp], [logp], line=at)
    loss = Tensor((), dtype)
    target = args[1] if len(args) > 1 else kwargs.get("target")
    tape.record("nll_loss", [logp], [loss], [t for t in [target] if isinstance(t, Tensor)], line=at)
    return loss


def simple_loss(api: Any, args: list, kwargs: dict, at: int) -> Any:
    tensors = [a for a in args[:2] if isinstance(a, Tensor)]
    if not tensors:
        return Unknown("loss input")
    loss = Tensor((), "float32")
    api.tape.record("mse_loss", tensors, [loss], tensors, line=at)
    return loss


def sdpa(api: Any, args: list, kwargs: dict, at: int) -> Any:
    """Fused attention keeps q, k, v, its output and a float32 log-sum-exp per query, and
    the (T, S) matrices only where torch falls back to the math path."""
    q, k, v = (list(args) + [None] * 3)[:3]
    if not all(isinstance(t, Tensor) for t in (q, k, v)):
        return Unknown("attention inputs")
    tape = api.tape
    dtype = tape.compute_dtype("sdpa", q.dtype)
    qc, kc, vc = (tape.cast(t, dtype) for t in (q, k, v))
    out = Tensor(q.shape[:-1] + v.shape[-1:], dtype)
    # The fused kernels write (batch, T, heads, dim): out.transpose(1, 2) needs no copy.
    out.heads_last = True
    lse = Tensor(q.shape[:-1], "float32")
    dropout = kwargs.get("dropout_p", args[4] if len(args) > 4 else 0.0)
    matrices = ops.attention_kept(tape, q.shape[:-1] + k.shape[-2:-1], dtype, dropout, False)
    tape.record("sdpa", [q, k, v], [out], [qc, kc, vc, out, lse] + matrices, line=at)
    return out


def linear(api: Any, args: list, kwargs: dict, at: int) -> Any:
    x, w = (list(args) + [None, None])[:2]
    if not isinstance(x, Tensor) or not isinstance(w, Tensor):
        return Unknown("linear inputs")
    return ops.matmul(api.tape, x, ops.view(w, tuple(reversed(w.shape)), False), at)


def embedding(api: Any, args: list, kwargs: dict, at: int) -> Any:
    idx, w = (list(args) + [None, None])[:2]
    if not isinstance(idx, Tensor) or not isinstance(w, Tensor):
        return Unknown("embedding inputs")
    out = Tensor(idx.shape + w.shape[-1:], w.dtype)
    api.tape.record("embedding", [w], [out], [idx], line=at)
    return out


def layer_norm(api: Any, args: list, kwargs: dict, at: int) -> Any:
    x = args[0] if args else None
    if not isinstance(x, Tensor):
        return Unknown("norm input")
    dtype = api.tape.compute_dtype("layer_norm", x.dtype)  # noqa: the same rule as nn.LayerNorm
    out = Tensor(x.shape, dtype)
    stats = Tensor((2 * x.numel // max(1, x.shape[-1] if x.shape else 1),), "float32")
    params = [a for a in args[2:] + list(kwargs.values()) if isinstance(a, Tensor)]
    api.tape.record("norm", [x] + params, [out], [api.tape.cast(x, dtype), stats], line=at)
    return out


def join(api: Any, name: str, args: list, kwargs: dict, at: int) -> Any:
    tensors = args[0] if args and isinstance(args[0], (list, tuple)) else []
    tensors = [t for t in tensors if isinstance(t, Tensor)]
    if not tensors:
        return Unknown(name)
    dim = args[1] if len(args) > 1 else kwargs.get("dim", 0)
    first = tensors[0]
    if name == "stack":
        shape = list(first.shape)
        shape.insert(dim % (len(shape) + 1) if isinstance(dim, int) else 0, len(tensors))
    else:
        shape = list(first.shape)
        d = dim % len(shape) if isinstance(dim, int) and shape else 0
        if shape:
            shape[d] = sum(t.shape[d] for t in tensors if len(t.shape) > d)
    return ops.new(api.tape, name, tensors, tuple(shape), first.dtype, [], at)


def pad(api: Any, args: list, kwargs: dict, at: int) -> Any:
    x = args[0] if args else None
    pads = args[1] if len(args) > 1 else kwargs.get("pad", ())
    if not isinstance(x, Tensor) or not isinstance(pads, (list, tuple)):
        return Unknown("pad")
    shape = list(x.shape)
    for i in range(0, len(pads) - 1, 2):
        if isinstance(pads[i], int) and isinstance(pads[i + 1], int) and i // 2 < len(shape):
            shape[-1 - i // 2] += pads[i] + pads[i + 1]
    return ops.new(api.tape, "pad", [x], tuple(shape), x.dtype, [], at)


def interpolate(api: Any, args: list, kwargs: dict, at: int) -> Any:
    x = args[0] if args else None
    if not isinstance(x, Tensor):
        return Unknown("interpolate")
    size = kwargs.get("size", args[1] if len(args) > 1 else None)
    factor = kwargs.get("scale_factor", 2)
    if isinstance(size, int):
        size = (size,) * (len(x.shape) - 2)
    if isinstance(size, (list, tuple)):
        spatial = tuple(size)
    else:
        f = factor if isinstance(factor, (int, float)) else 2
        spatial = tuple(int(n * f) for n in x.shape[2:])
    return ops.new(api.tape, "upsample", [x], x.shape[:2] + spatial, x.dtype, [], at)


def one_hot(api: Any, args: list, kwargs: dict, at: int) -> Any:
    x = args[0] if args else None
    n = args[1] if len(args) > 1 else kwargs.get("num_classes")
    if not isinstance(x, Tensor) or not isinstance(n, int):
        return Unknown("one_hot")
    return Tensor(x.shape + (n,), "int64")


def functional_call(api: Any, name: str, args: list, kwargs: dict, at: int) -> Any:
    """A torch.* or F.* function by name, or Unknown."""
    special = _SPECIAL.get(name)
    if special is not None:
        return special(api, args, kwargs, at)
    if name in ("randn", "rand", "zeros", "ones", "empty", "full", "randint", "arange",
                "linspace", "tensor", "as_tensor", "from_numpy", "zeros_like", "ones_like",
                "randn_like", "empty_like", "rand_like", "full_like"):
        return factory(api, name, args, kwargs, at)
    if name in ("cat", "stack", "concat", "concatenate"):
        return join(api, "stack" if name == "stack" else "cat", args, kwargs, at)
    x = args[0] if args else None
    if not isinstance(x, Tensor):
        return Unknown(name)
    if name in ("matmul", "bmm", "mm"):
        return ops.matmul(api.tape, x, args[1], at) if len(args) > 1 else Unknown(name)
    if name in ("add", "sub", "mul", "div"):
        op = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[name]
        return ops.binary(api.tape, op, x, args[1] if len(args) > 1 else 1, at)
    if name == "dropout":
        p = args[1] if len(args) > 1 else kwargs.get("p", 0.5)
        return ops.dropout(api.tape, x, p, at) if kwargs.get("training", True) else x
    if name in ("flatten", "transpose", "permute", "reshape", "unsqueeze", "squeeze"):
        from tvis_tui.vram.methods import _view

        return _view(api, x, name, args[1:], kwargs)
    if name in ("max_pool2d", "avg_pool2d", "adaptive_avg_pool2d"):
        from tvis_tui.vram.layers import build
        from tvis_tui.vram.forward import forward

        kind = {"max_pool2d": "MaxPool2d", "avg_pool2d": "AvgPool2d",
                "adaptive_avg_pool2d": "AdaptiveAvgPool2d"}[name]
        return forward(api.tape, build(kind, args[1:], kwargs, at), [x], {}, at)
    if name in ("sum", "mean"):
        from tvis_tui.vram.methods import _reduce

        return _reduce(api, x, args[1:], kwargs, at)
    return ops.pointwise(api.tape, name.rstrip("_"), x, name.endswith("_") or bool(
        kwargs.get("inplace")), at)


_SPECIAL = {
    "cross_entropy": cross_entropy, "nll_loss": simple_loss, "mse_loss": simple_loss,
    "l1_loss": simple_loss, "smooth_l1_loss": simple_loss, "binary_cross_entropy": simple_loss,
    "binary_cross_entropy_with_logits": simple_loss, "huber_loss": simple_loss,
    "scaled_dot_product_attention": sdpa, "linear": linear, "embedding": embedding,
    "layer_norm": layer_norm, "rms_norm": layer_norm, "pad": pad, "interpolate": interpolate,
    "one_hot": one_hot,
}
