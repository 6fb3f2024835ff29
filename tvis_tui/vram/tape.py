"""What autograd would keep: the operations of a forward pass in order, with the tensors
each one saves for backward. `memory.py` replays it backwards to find the peak."""

from __future__ import annotations

from dataclasses import dataclass, field

from tvis_tui.vram.values import Param, Tensor

LOW_PRECISION_OPS = frozenset({
    "linear", "conv", "matmul", "bmm", "baddbmm", "addmm", "sdpa", "lstm", "gru", "rnn",
    "conv_transpose",
})
"""Ops autocast runs in its low-precision dtype (torch's autocast "lower precision" list)."""

FP32_OPS = {
    "cuda": frozenset({"layer_norm", "group_norm", "softmax", "log_softmax", "cross_entropy",
                       "nll_loss", "mse_loss", "exp", "log", "sum", "norm"}),
    "cpu": frozenset({"cross_entropy", "nll_loss", "mse_loss", "group_norm", "norm"}),
}
"""Ops autocast runs in float32, casting low-precision inputs up first (torch's lists
differ by device: CPU autocast keeps layer_norm and softmax in bfloat16)."""


@dataclass(eq=False)
class Op:
    name: str
    saved: list[Tensor]
    inputs: list[Tensor]
    outputs: list[Tensor]
    params: list[Param]
    line: int = 0
    backward_extra: int = 0
    """Bytes its backward allocates beyond the gradients of its inputs and outputs: the
    recomputed forward of a checkpointed segment, an unrolled RNN's per-step gradients."""


@dataclass
class Tape:
    """The record of one forward pass, plus the modes that change what gets saved."""

    device: str = "cuda"
    fused_attention: bool = False
    grad_enabled: bool = True
    autocast: str | None = None
    ops: list[Op] = field(default_factory=list)
    cast_cache: dict[int, Tensor] = field(default_factory=dict)
    followed: int = 0
    guessed: int = 0

    def record(self, name: str, inputs: list[Tensor], outputs: list[Tensor],
               saved: list[Tensor], params: list[Param] = (), line: int = 0) -> None:
        """Note an op. Outputs need grad when any input or trainable parameter does."""
        trainable = [p for p in params if p.trainable and not p.buffer]
        for out in outputs:
            if any(getattr(t, "scores", False) and t.shape == out.shape for t in inputs):
                out.scores = True
        needs = any(t.requires_grad for t in inputs) or bool(trainable)
        for out in outputs:
            out.requires_grad = needs and self.grad_enabled
        if not (needs and self.grad_enabled):
            return
        saved = [t.root for t in saved if t is not None]
        if self.fused_attention:
            saved = [t for t in saved if not is_score_matrix(t)]
        self.ops.append(Op(name, saved, inputs, outputs, trainable, line))

    def compute_dtype(self, op: str, dtype: str) -> str:
        """The dtype autocast would compute `op` in, given an input of `dtype`."""
        if self.autocast is None or not dtype.startswith(("float", "bfloat")):
            return dtype
        if op in LOW_PRECISION_OPS:
            return self.autocast
        if op in FP32_OPS.get(self.device, FP32_OPS["cuda"]):
            return "float32"
        return dtype

    def cast(self, tensor: Tensor, dtype: str) -> Tensor:
        """`tensor` in `dtype`: itself when it already is, else a fresh copy."""
        if tensor.dtype == dtype:
            return tensor
        return Tensor(tensor.shape, dtype, tensor.requires_grad)

    def cast_param(self, param: Param, dtype: str) -> Tensor | None:
        """Autocast's copy of a weight, made once per autocast region and saved by its op;
        None when the weight is already in `dtype` (a parameter is not an activation)."""
        if param.dtype == dtype:
            return None
        key = id(param)
        if key not in self.cast_cache:
            self.cast_cache[key] = Tensor(param.shape, dtype, param.trainable)
        return self.cast_cache[key]


def is_score_matrix(t: Tensor) -> bool:
    """Attention scores or what is computed from them elementwise (scaled, masked,
    softmaxed, dropped out): a fused attention kernel never materialises them. Marked by
    `ops.matmul` on q @ k.transpose(...) and passed on to same-shaped results."""
    return bool(getattr(t, "scores", False))
