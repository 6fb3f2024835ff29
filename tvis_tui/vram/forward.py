"""Forward of the built-in torch.nn layers by shape, recording what each saves."""

from __future__ import annotations

import math
from typing import Any

from tvis_tui.vram import ops
from tvis_tui.vram.layers import (ACTIVATIONS, RNN_CPU_BACKWARD_OUTPUTS, RNN_SAVED_PER_STEP, RNN_GATES,
                                  _pair, conv_out, layer_dtype, params_of, weight_of)
from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import Module, Tensor, Unknown


def forward(tape: Tape, m: Module, args: list, kwargs: dict, line: int) -> Any:
    """The output of calling built-in layer `m`, or Unknown when the reader cannot follow."""
    x = args[0] if args else next(iter(kwargs.values()), None)
    kind = m.kind
    if kind in ("Sequential", "ModuleDict"):
        return _sequential(tape, m, args, kwargs, line)
    if not isinstance(x, Tensor):
        return Unknown(f"{kind} input")
    tape.followed += 1
    if kind in ACTIVATIONS:
        if kind == "Identity":
            return x
        return ops.pointwise(tape, ACTIVATIONS[kind], x, bool(m.config.get("inplace")), line)
    handler = _FORWARD.get(kind) or _FORWARD.get(kind.rstrip("123d"))
    if handler is None:
        tape.followed -= 1
        tape.guessed += 1
        return _passthrough(tape, m, x, line)
    return handler(tape, m, x, args, kwargs, line)


def _passthrough(tape: Tape, m: Module, x: Tensor, line: int) -> Tensor:
    out = Tensor(x.shape, x.dtype)
    tape.record(m.kind, [x], [out], [x], params_of(m), line)
    return out


def _sequential(tape: Tape, m: Module, args: list, kwargs: dict, line: int) -> Any:
    from tvis_tui.vram.api import current_api

    value: Any = args[0] if args else None
    for child in m.children():
        value = current_api().call_module(child, [value], {}, line)
    return value


def _linear(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    dtype = layer_dtype(tape, "linear", x, m)
    weight = m.attrs.get("weight")
    out_features = weight.shape[0] if weight is not None else m.config.get("out_features", 1)
    xc = tape.cast(x, dtype)
    wc = weight_of(m, tape, dtype)
    out = Tensor(x.shape[:-1] + (out_features,), dtype)
    saved = [xc] if weight is not None and weight.trainable else []
    if x.requires_grad and wc is not None:
        saved.append(wc)
    tape.record("linear", [x], [out], saved, params_of(m), line)
    return out


def _conv(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    c = m.config
    dims = int(m.kind[-2]) if m.kind[-2].isdigit() else 2
    k = _pair(c.get("kernel_size", 3), dims)
    s = _pair(c.get("stride", 1), dims)
    p = c.get("padding", 0)
    p = _pair(p, dims) if not isinstance(p, str) else (p,) * dims
    d = _pair(c.get("dilation", 1), dims)
    spatial = x.shape[-dims:]
    if m.kind.startswith("ConvTranspose"):
        op = _pair(c.get("output_padding", 0), dims)
        out_sp = tuple((n - 1) * ss - 2 * (pp if isinstance(pp, int) else 0) + dd * (kk - 1) + o + 1
                       for n, ss, pp, dd, kk, o in zip(spatial, s, p, d, k, op))
    else:
        out_sp = tuple(conv_out(n, kk, ss, pp, dd) for n, kk, ss, pp, dd in zip(spatial, k, s, p, d))
    dtype = layer_dtype(tape, "conv", x, m)
    xc, wc = tape.cast(x, dtype), weight_of(m, tape, dtype)
    out = Tensor(x.shape[:-dims - 1] + (c.get("out_channels", x.shape[-dims - 1]),) + out_sp, dtype)
    saved = [xc] + ([wc] if wc is not None else [])
    tape.record("conv", [x], [out], saved, params_of(m), line)
    return out


def _norm(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    """LayerNorm/GroupNorm/RMSNorm keep their (float32 under autocast) input and per-row
    statistics; BatchNorm keeps its input and per-channel statistics."""
    batch = m.kind.startswith("BatchNorm")
    dtype = x.dtype if batch else tape.compute_dtype("layer_norm", x.dtype)
    xc = tape.cast(x, dtype)
    out = Tensor(x.shape, dtype)
    rows = x.shape[1] if batch and len(x.shape) > 1 else x.numel // max(1, x.shape[-1])
    stats = Tensor((2 * rows,), "float32")
    tape.record("norm", [x], [out], [xc, stats], params_of(m), line)
    return out


def _embedding(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    weight = m.attrs.get("weight")
    dim = weight.shape[1] if weight is not None else m.config.get("embedding_dim", 1)
    out = Tensor(x.shape + (dim,), weight.dtype if weight is not None else "float32")
    tape.record("embedding", [x], [out], [x], params_of(m), line)
    return out


def _dropout(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    return ops.dropout(tape, x, m.config.get("p", 0.5), line)


def _pool(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    c = m.config
    dims = 1 if "1d" in m.kind else 3 if "3d" in m.kind else 2
    if m.kind.startswith("Adaptive"):
        out_sp = tuple(o if isinstance(o, int) else n
                       for o, n in zip(_pair(c.get("output_size", 1), dims), x.shape[-dims:]))
    else:
        k = _pair(c.get("kernel_size", 2), dims)
        s = _pair(c.get("stride") or c.get("kernel_size", 2), dims)
        p = _pair(c.get("padding", 0), dims)
        out_sp = tuple(conv_out(n, kk, ss, pp) for n, kk, ss, pp in zip(x.shape[-dims:], k, s, p))
    out = Tensor(x.shape[:-dims] + out_sp, x.dtype)
    saved = [x]
    if m.kind.startswith("MaxPool"):
        saved.append(Tensor(out.shape, "int64"))
    tape.record("pool", [x], [out], saved, [], line)
    return out


def _flatten(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    start = m.config.get("start_dim", 1)
    start = start % len(x.shape) if x.shape and isinstance(start, int) else 1
    return ops.view(x, x.shape[:start] + (math.prod(x.shape[start:]),))


def _upsample(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    factor = m.config.get("scale_factor", 2)
    factor = factor if isinstance(factor, (int, float)) else 2
    out = Tensor(x.shape[:2] + tuple(int(n * factor) for n in x.shape[2:]), x.dtype)
    tape.record("upsample", [x], [out], [], [], line)
    return out


def _softmax(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Tensor:
    return ops.pointwise(tape, "softmax", x, False, line)


def _rnn(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Any:
    c = m.config
    h = c.get("hidden_size", 1)
    layers, dirs = c.get("num_layers", 1), 2 if c.get("bidirectional") else 1
    first = bool(c.get("batch_first"))
    batch, steps = (x.shape[0], x.shape[1]) if first else (x.shape[1], x.shape[0])
    dtype = tape.compute_dtype("lstm", x.dtype)
    out = Tensor(x.shape[:2] + (h * dirs,), dtype)
    state = Tensor((layers * dirs, batch, h), dtype)
    device = tape.device if tape.device in ("cpu", "cuda") else "cuda"
    per = RNN_SAVED_PER_STEP[(device, m.kind if m.kind in RNN_GATES else "LSTM")]
    kept = [Tensor((int(layers * dirs * steps * batch * h * per),), dtype)]
    between = (layers - 1) * dirs * steps * batch * h  # each upper layer keeps its input
    if between:
        kept.append(Tensor((between,), dtype))
        if tape.device == "cpu" and isinstance(c.get("dropout"), (int, float)) and c["dropout"] > 0:
            kept.append(Tensor((between,), dtype))  # dropout noise between layers
    tape.record("lstm", [x], [out, state], [tape.cast(x, dtype)] + kept, params_of_tree(m), line)
    if tape.device == "cpu" and m.kind != "LSTM" and tape.ops and tape.ops[-1].outputs[0] is out:
        tape.ops[-1].backward_extra = RNN_CPU_BACKWARD_OUTPUTS * out.nbytes
    if m.kind == "LSTM":
        return (out, (state, Tensor(state.shape, dtype)))
    return (out, state)


def _rnn_cell(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Any:
    """One time step: its input, its state and its gates are kept for backward; an
    LSTMCell returns (h, c), the others h."""
    h, gates = m.config.get("hidden_size", 1), RNN_GATES[m.kind]
    batch = x.shape[:-1]
    dtype = layer_dtype(tape, "linear", x, m)
    out = Tensor(batch + (h,), dtype)
    state = Tensor(batch + (h,), dtype)
    saved = [tape.cast(x, dtype), Tensor(batch + (h,), dtype), Tensor(batch + (gates * h,), dtype)]
    tape.record(m.kind, [x], [out, state] if m.kind == "LSTMCell" else [out], saved, params_of(m), line)
    return (out, state) if m.kind == "LSTMCell" else out


def params_of_tree(m: Module) -> list:
    return [p for p in m.params() if not p.buffer]


def _mha(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Any:
    """nn.MultiheadAttention: projections, then fused attention when no weights are asked
    for, else the math path keeping the (batch, heads, T, S) probabilities."""
    e = m.config.get("embed_dim", x.shape[-1])
    heads = m.config.get("num_heads", 1) or 1
    key = args[1] if len(args) > 1 and isinstance(args[1], Tensor) else x
    first = bool(m.config.get("batch_first"))
    b, t = (x.shape[0], x.shape[1]) if first else (x.shape[1], x.shape[0])
    s = key.shape[1] if first else key.shape[0]
    dtype = tape.compute_dtype("linear", x.dtype)
    qkv = Tensor(x.shape[:-1] + (3 * e,), dtype)
    # batch_first inputs are transposed to (T, B, E) before the projection, whose reshape
    # of the non-contiguous view copies it: that copy is what the projection keeps.
    projected = Tensor(x.shape, dtype) if first else tape.cast(x, dtype)
    tape.record("linear", [x], [qkv], [projected], params_of(m), line)
    attn = Tensor(x.shape, dtype)
    need_weights = kwargs.get("need_weights", True) is not False
    kept = ops.attention_kept(tape, (b, heads, t, s), dtype, m.config.get("dropout", 0.0),
                              need_weights)
    weights = Tensor((b, t, s), dtype) if need_weights else None
    # The fused kernel keeps a log-sum-exp per query; the math path a scaled copy of q.
    extra = Tensor(x.shape, dtype) if need_weights else Tensor((b, heads, t), "float32")
    saved = [qkv, attn, extra] + kept
    tape.record("sdpa", [qkv], [attn], saved, [], line)
    out = _linear(tape, m.attrs["out_proj"], attn, [], {}, line) if "out_proj" in m.attrs else attn
    return (out, weights)


def _encoder_layer(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Any:
    from tvis_tui.vram.api import current_api

    call = current_api().call_module
    a = m.attrs
    p = m.config.get("dropout", 0.1)
    sa, _ = _mha(tape, a["self_attn"], x, [x, x, x], {"need_weights": False}, line)
    x = ops.binary(tape, "+", x, ops.dropout(tape, sa, p, line), line)
    x = call(a["norm1"], [x], {}, line)
    hidden = ops.pointwise(tape, "relu", call(a["linear1"], [x], {}, line), False, line)
    ff = call(a["linear2"], [ops.dropout(tape, hidden, p, line)], {}, line)
    x = ops.binary(tape, "+", x, ops.dropout(tape, ff, p, line), line)
    return call(a["norm2"], [x], {}, line)


def _encoder(tape: Tape, m: Module, x: Tensor, args: list, kwargs: dict, line: int) -> Any:
    from tvis_tui.vram.api import current_api

    for layer in m.attrs.get("layers", []):
        x = current_api().call_module(layer, [x], {}, line)
    return x


_FORWARD = {
    "Linear": _linear, "Conv": _conv, "ConvTranspose": _conv, "BatchNorm": _norm,
    "LayerNorm": _norm, "GroupNorm": _norm, "RMSNorm": _norm, "Embedding": _embedding,
    "Dropout": _dropout, "MaxPool": _pool, "AvgPool": _pool, "AdaptiveAvgPool": _pool,
    "AdaptiveMaxPool": _pool, "Flatten": _flatten, "Upsample": _upsample,
    "Softmax": _softmax, "LSTM": _rnn, "GRU": _rnn, "RNN": _rnn,
    "LSTMCell": _rnn_cell, "GRUCell": _rnn_cell, "RNNCell": _rnn_cell,
    "MultiheadAttention": _mha, "TransformerEncoderLayer": _encoder_layer,
    "TransformerEncoder": _encoder,
}
