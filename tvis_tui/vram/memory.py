"""From a recorded forward to the peak: replay backward in reverse, freeing what each op
saved once its last user has run while gradients appear, then add the optimizer step."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from tvis_tui.vram.tape import Op
from tvis_tui.vram.values import ITEMSIZE, Param, Tensor

# optimizer -> (state elements per parameter, whole-model temporaries of the foreach step)
OPTIMIZER_STATE: dict[str, tuple[float, float]] = {
    "sgd": (0, 0), "sgd-momentum": (1, 0), "adam": (2, 1), "adamw": (2, 1), "nadam": (2, 2),
    "radam": (2, 2), "adamax": (2, 1), "adagrad": (1, 1), "rmsprop": (1, 1), "adadelta": (2, 1),
    "lion": (1, 1), "adafactor": (0.02, 0.02), "adam8bit": (0.5, 0), "adamw8bit": (0.5, 0),
    "pagedadamw8bit": (0.5, 0), "lion8bit": (0.25, 0), "sgd8bit": (0.25, 0), "lamb": (2, 1),
    "pagedadamw": (2, 0), "sparseadam": (2, 0),
    "lbfgs": (202, 1),
}
"""State is in parameter-sized tensors (8-bit states count a quarter, Adafactor keeps row
and column statistics, about 2% of a parameter; LBFGS keeps `history_size`, 100 by default,
pairs of flat parameter-sized vectors once its history fills, and two more). Temporaries are what torch's foreach
implementations allocate for the whole model at once on CUDA (Adam's sqrt denominator)."""


@dataclass
class Peak:
    parameters: int = 0
    gradients: int = 0
    optimizer_state: int = 0
    activations: int = 0
    workspace: int = 0
    phase: str = ""

    @property
    def total(self) -> int:
        return (self.parameters + self.gradients + self.optimizer_state + self.activations
                + self.workspace)


def saved_bytes(ops: list[Op]) -> int:
    return sum(t.nbytes for t in {id(t): t for op in ops for t in op.saved}.values())


def grad_bytes(params: list[Param]) -> int:
    return sum(p.numel * ITEMSIZE.get(p.dtype, 4) for p in params if p.trainable and not p.buffer)


def backward_peak(ops: list[Op], held: list[Tensor], base: Peak, grads_total: int,
                  grads_present: bool, grads_at_forward: bool, share: float = 1.0) -> Peak:
    """The largest moment from the end of forward through backward. `base` carries the
    parameters and optimizer state that are resident throughout. `grads_present`: the
    gradients are never freed (accumulation, set_to_none=False); `grads_at_forward`: last
    step's gradients are still there when forward ends (zero_grad comes after forward).
    `share` is the fraction of each gradient a GPU keeps (1/N under FSDP over N GPUs)."""
    sizes: dict[int, int] = {}
    first: dict[int, int] = {}
    for i, op in enumerate(ops):
        for t in op.saved:
            sizes[id(t)] = t.nbytes
            first.setdefault(id(t), i)
    held_ids = {id(t) for t in held}
    held_bytes = sum(t.nbytes for t in held)
    free_at: dict[int, list[int]] = defaultdict(list)
    for key, index in first.items():
        if key not in held_ids:
            free_at[index].append(key)
    live = sum(size for key, size in sizes.items() if key not in held_ids)
    grads = grads_total if grads_present else 0
    seen: set[int] = set()
    best = _moment(base, grads_total if grads_at_forward else grads, live, held_bytes,
                   "end of forward")
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        transient = (sum(t.nbytes for t in op.outputs)
                     + sum(t.nbytes for t in op.inputs if t.requires_grad) + op.backward_extra)
        if not grads_present:
            fresh = [p for p in op.params if id(p) not in seen]
            seen.update(id(p) for p in fresh)
            grads += int(grad_bytes(fresh) * share)
        moment = _moment(base, grads, live, held_bytes + transient, "backward")
        if moment.total > best.total:
            best = moment
        live -= sum(sizes[k] for k in free_at.get(i, ()))
    return best


def _moment(base: Peak, grads: int, activations: int, workspace: int, phase: str) -> Peak:
    return Peak(base.parameters, grads, base.optimizer_state, activations,
                base.workspace + workspace, phase)


def optimizer_peak(base: Peak, grads_total: int, held: list[Tensor], temp: int) -> Peak:
    held_bytes = sum(t.nbytes for t in held)
    return Peak(base.parameters, grads_total, base.optimizer_state, 0,
                base.workspace + held_bytes + temp, "optimizer step")


def optimizer_key(kind: str, kwargs: dict) -> str:
    key = kind.lower()
    if key == "sgd":
        momentum = kwargs.get("momentum", 0)
        if not isinstance(momentum, (int, float)) or momentum:
            key = "sgd-momentum"
    return key


def optimizer_bytes(key: str, trainable: list[Param], device: str, kwargs: dict) -> tuple[int, int]:
    """(state bytes, step temporaries) for `trainable` under optimizer `key`. On CPU torch
    steps one tensor at a time, so temporaries are one parameter's worth, not the model's."""
    per, temp = OPTIMIZER_STATE.get(key, (2, 1))
    if kwargs.get("amsgrad") is True:
        per += 1
    history = kwargs.get("history_size")
    if key == "lbfgs" and isinstance(history, int) and not isinstance(history, bool) and history >= 0:
        per = 2 * history + 2
    sizes = [p.numel * ITEMSIZE.get(p.dtype, 4) for p in trainable]
    total = sum(sizes)
    if key.startswith("adam") and not key.startswith("adamw") and kwargs.get("weight_decay"):
        temp += 1
    if device == "cpu":
        # Adam's one-tensor step holds sqrt(v) and sqrt(v) / bias_correction at once.
        extra = 1 if key.startswith(("adam", "nadam", "radam")) and temp else 0
        return int(per * total), int((temp + extra) * max(sizes, default=0))
    return int(per * total), int(temp * total)


def scaled(ops: list[Op], held: list[Tensor], factor: float) -> tuple[list[Op], list[Tensor]]:
    """The same forward with every tensor's leading (batch) dimension multiplied by `factor`."""
    memo: dict[int, Tensor] = {}

    def one(t: Tensor) -> Tensor:
        if id(t) not in memo:
            shape = (max(1, round(t.shape[0] * factor)),) + t.shape[1:] if t.shape else t.shape
            memo[id(t)] = Tensor(shape, t.dtype, t.requires_grad)
        return memo[id(t)]

    out = [Op(op.name, [one(t) for t in op.saved], [one(t) for t in op.inputs],
              [one(t) for t in op.outputs], op.params, op.line,
              int(op.backward_extra * factor)) for op in ops]
    return out, [one(t) for t in held]
