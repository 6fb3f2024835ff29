"""torch.nn layers: their parameters from constructor arguments, and their forward by shape."""

from __future__ import annotations

import copy
from typing import Any, Callable

from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import Module, Param, Tensor

SIGNATURES: dict[str, tuple[str, ...]] = {
    "Linear": ("in_features", "out_features", "bias"),
    "LazyLinear": ("out_features", "bias"),
    "Conv1d": ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation",
               "groups", "bias"),
    "ConvTranspose1d": ("in_channels", "out_channels", "kernel_size", "stride", "padding",
                        "output_padding", "groups", "bias", "dilation"),
    "BatchNorm1d": ("num_features", "eps", "momentum", "affine", "track_running_stats"),
    "LayerNorm": ("normalized_shape", "eps", "elementwise_affine", "bias"),
    "RMSNorm": ("normalized_shape", "eps", "elementwise_affine"),
    "GroupNorm": ("num_groups", "num_channels", "eps", "affine"),
    "Embedding": ("num_embeddings", "embedding_dim", "padding_idx"),
    "LSTM": ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout",
             "bidirectional"),
    "MultiheadAttention": ("embed_dim", "num_heads", "dropout", "bias"),
    "TransformerEncoderLayer": ("d_model", "nhead", "dim_feedforward", "dropout"),
    "TransformerEncoder": ("encoder_layer", "num_layers"),
    "Dropout": ("p", "inplace"), "ReLU": ("inplace",), "LeakyReLU": ("negative_slope", "inplace"),
    "MaxPool2d": ("kernel_size", "stride", "padding"),
    "AdaptiveAvgPool2d": ("output_size",), "Flatten": ("start_dim", "end_dim"),
    "Upsample": ("size", "scale_factor", "mode"), "Softmax": ("dim",),
}
for _d in "123":
    SIGNATURES[f"Conv{_d}d"] = SIGNATURES["Conv1d"]
    SIGNATURES[f"ConvTranspose{_d}d"] = SIGNATURES["ConvTranspose1d"]
    SIGNATURES[f"BatchNorm{_d}d"] = SIGNATURES["BatchNorm1d"]
    SIGNATURES[f"MaxPool{_d}d"] = SIGNATURES[f"AvgPool{_d}d"] = SIGNATURES["MaxPool2d"]
for _n in ("GRU", "RNN"):
    SIGNATURES[_n] = SIGNATURES["LSTM"]
for _n in ("LSTMCell", "GRUCell", "RNNCell"):  # one time step, the loop the script's own
    SIGNATURES[_n] = ("input_size", "hidden_size", "bias")
for _n in ("AdaptiveAvgPool1d", "AdaptiveMaxPool2d"):
    SIGNATURES[_n] = SIGNATURES["AdaptiveAvgPool2d"]

ACTIVATIONS = {"ReLU": "relu", "GELU": "gelu", "SiLU": "silu", "Tanh": "tanh",
               "Sigmoid": "sigmoid", "LeakyReLU": "leaky_relu", "ELU": "elu", "Mish": "mish",
               "Softplus": "softplus", "Hardswish": "hardswish", "ReLU6": "relu6",
               "Identity": "identity", "PReLU": "prelu", "LogSigmoid": "logsigmoid"}

RNN_GATES = {"LSTM": 4, "GRU": 3, "RNN": 1, "LSTMCell": 4, "GRUCell": 3, "RNNCell": 1}

RNN_CPU_BACKWARD_OUTPUTS = 2.4
"""GRU and RNN backward on CPU (torch's unrolled kernel) holds per-step gradient buffers
of about this many times the output's size at once; measured with torch 2.13."""

RNN_SAVED_PER_STEP = {
    ("cpu", "LSTM"): 16.4, ("cpu", "GRU"): 7.0, ("cpu", "RNN"): 1.0,
    ("cuda", "LSTM"): 6.0, ("cuda", "GRU"): 5.0, ("cuda", "RNN"): 2.0,
}
"""Elements a recurrent layer keeps for backward per time step, batch row and hidden unit,
per layer and direction. CPU: measured with torch 2.13 (LSTM: oneDNN's workspace plus its
outputs; GRU and RNN: the unrolled kernel's gates and products). CUDA: cuDNN's reserve
space holds the gate activations and cell states; stated estimates, not measured here."""


def bind(kind: str, args: list, kwargs: dict) -> dict:
    names = SIGNATURES.get(kind, ())
    config = dict(zip(names, args))
    config.update(kwargs)
    return config


def _pair(value: Any, n: int) -> tuple:
    if isinstance(value, (list, tuple)):
        return tuple(value) + (value[-1],) * (n - len(value))
    return (value,) * n


def build(kind: str, args: list, kwargs: dict, line: int) -> Module:
    """A built-in layer with its parameters, or a parameterless one the reader passes through."""
    config = bind(kind, args, kwargs)
    module = Module(kind, config=config, line=line)
    maker = _MAKERS.get(kind)
    if kind.startswith("Conv"):
        maker = _conv
    elif kind.startswith("BatchNorm"):
        maker = _batchnorm
    if maker is not None:
        maker(module, config)
        module.config["unsized"] = not module.params()
    return module


def _ints(*values: Any) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in values)


def _linear(m: Module, c: dict) -> None:
    i, o = c.get("in_features"), c.get("out_features")
    if _ints(i, o):
        m.attrs["weight"] = Param((o, i))
        if c.get("bias", True) is not False:
            m.attrs["bias"] = Param((o,))


def _conv(m: Module, c: dict) -> None:
    dims = int(m.kind[-2]) if m.kind[-2].isdigit() else 2
    i, o, g = c.get("in_channels"), c.get("out_channels"), c.get("groups", 1)
    k = _pair(c.get("kernel_size", 3), dims)
    if _ints(i, o, g, *k):
        shape = (i, o // g) if m.kind.startswith("ConvTranspose") else (o, i // g)
        m.attrs["weight"] = Param(shape + k)
        if c.get("bias", True) is not False:
            m.attrs["bias"] = Param((o,))


def _batchnorm(m: Module, c: dict) -> None:
    n = c.get("num_features")
    if _ints(n):
        if c.get("affine", True):
            m.attrs["weight"], m.attrs["bias"] = Param((n,)), Param((n,))
        if c.get("track_running_stats", True):
            m.attrs["running_mean"] = Param((n,), buffer=True)
            m.attrs["running_var"] = Param((n,), buffer=True)
            m.attrs["num_batches_tracked"] = Param((), "int64", buffer=True)


def _norm(m: Module, c: dict) -> None:
    shape = c.get("normalized_shape", c.get("num_channels"))
    shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
    if _ints(*shape) and c.get("elementwise_affine", c.get("affine", True)) is not False:
        m.attrs["weight"] = Param(shape)
        if m.kind != "RMSNorm" and c.get("bias", True) is not False:
            m.attrs["bias"] = Param(shape)


def _embedding(m: Module, c: dict) -> None:
    n, d = c.get("num_embeddings"), c.get("embedding_dim")
    if _ints(n, d):
        m.attrs["weight"] = Param((n, d))
        m.attrs["weight"].embedding = True


def _rnn(m: Module, c: dict) -> None:
    i, h = c.get("input_size"), c.get("hidden_size")
    layers, gates = c.get("num_layers", 1), RNN_GATES[m.kind]
    dirs = 2 if c.get("bidirectional") else 1
    if not _ints(i, h, layers):
        return
    for layer in range(layers):
        width = i if layer == 0 else h * dirs
        for d in range(dirs):
            sfx = f"_l{layer}" + ("_reverse" if d else "")
            m.attrs["weight_ih" + sfx] = Param((gates * h, width))
            m.attrs["weight_hh" + sfx] = Param((gates * h, h))
            if c.get("bias", True) is not False:
                m.attrs["bias_ih" + sfx] = Param((gates * h,))
                m.attrs["bias_hh" + sfx] = Param((gates * h,))


def _cell(m: Module, c: dict) -> None:
    i, h, gates = c.get("input_size"), c.get("hidden_size"), RNN_GATES[m.kind]
    if _ints(i, h):
        m.attrs["weight_ih"], m.attrs["weight_hh"] = Param((gates * h, i)), Param((gates * h, h))
        if c.get("bias", True) is not False:
            m.attrs["bias_ih"], m.attrs["bias_hh"] = Param((gates * h,)), Param((gates * h,))


def _mha(m: Module, c: dict) -> None:
    e = c.get("embed_dim")
    if _ints(e):
        m.attrs["in_proj_weight"] = Param((3 * e, e))
        m.attrs["in_proj_bias"] = Param((3 * e,))
        m.attrs["out_proj"] = build("Linear", [e, e], {}, m.line)


def _encoder_layer(m: Module, c: dict) -> None:
    d, ff = c.get("d_model"), c.get("dim_feedforward", 2048)
    m.attrs["self_attn"] = build("MultiheadAttention", [d, c.get("nhead"), c.get("dropout", 0.1)],
                                 {"batch_first": c.get("batch_first", False)}, m.line)
    m.attrs["linear1"] = build("Linear", [d, ff], {}, m.line)
    m.attrs["linear2"] = build("Linear", [ff, d], {}, m.line)
    m.attrs["norm1"] = build("LayerNorm", [d], {}, m.line)
    m.attrs["norm2"] = build("LayerNorm", [d], {}, m.line)


def _encoder(m: Module, c: dict) -> None:
    layer, n = c.get("encoder_layer"), c.get("num_layers")
    if isinstance(layer, Module) and _ints(n):
        m.attrs["layers"] = [copy.deepcopy(layer) for _ in range(n)]


_MAKERS: dict[str, Callable[[Module, dict], None]] = {
    "Linear": _linear, "LayerNorm": _norm, "RMSNorm": _norm, "GroupNorm": _norm,
    "Embedding": _embedding, "LSTM": _rnn, "GRU": _rnn, "RNN": _rnn,
    "LSTMCell": _cell, "GRUCell": _cell, "RNNCell": _cell,
    "MultiheadAttention": _mha, "TransformerEncoderLayer": _encoder_layer,
    "TransformerEncoder": _encoder,
}


FLOATS = ("float", "bfloat")


def layer_dtype(tape: Tape, op: str, x: Tensor, m: Module) -> str:
    """The dtype a layer with a weight computes in: autocast's under autocast; otherwise its
    weight's, since torch refuses an input of another float dtype, so a script that runs
    (say) a `.half()` model feeds it half inputs even where the reader lost that cast."""
    weight = m.attrs.get("weight")
    if (tape.autocast is None and isinstance(weight, Param) and weight.dtype.startswith(FLOATS)
            and x.dtype.startswith(FLOATS)):
        return weight.dtype
    return tape.compute_dtype(op, x.dtype)


def weight_of(m: Module, tape: Tape, dtype: str) -> Tensor | None:
    weight = m.attrs.get("weight")
    return tape.cast_param(weight, dtype) if isinstance(weight, Param) else None


def params_of(m: Module) -> list[Param]:
    return [v for v in m.attrs.values() if isinstance(v, Param)]


def conv_out(size: int, k: int, s: int, p: Any, d: int = 1) -> int:
    if p == "same":
        return size
    p = 0 if p == "valid" or not isinstance(p, int) else p
    return max(1, (size + 2 * p - d * (k - 1) - 1) // s + 1)
