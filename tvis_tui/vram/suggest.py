"""Changes that lower the peak, each measured by re-estimating the script with it applied.

When the script does not fit, changes are chosen greedily (the biggest saving first, each
measured on top of the ones before) until it fits; when it fits, every applicable change is
listed with its saving on the script as it is.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

from tvis_tui.vram.estimate import Estimate, estimate
from tvis_tui.vram.facts import Settings
from tvis_tui.vram.verdict import FITS_FRACTION

MIN_SAVING = 1 << 20
"""Changes saving less than 1 MiB, or less than MIN_SHARE of the tensor peak, are not
worth a line."""
MIN_SHARE = 0.02
MAX_SECONDS = 2.0
"""Time for trying changes; on scripts too long to re-read quickly fewer are tried."""
FSDP_GPUS = 8
FREEZE_SHARE = 0.1
"""Embedding tables are worth freezing when they hold at least this share of parameters."""


@dataclass
class Suggestion:
    change: str
    saves_bytes: int
    line: int
    peak_after: int


@dataclass
class _Candidate:
    key: str
    describe: Callable[[Estimate], str]
    settings: Callable[[Settings, Estimate], Settings | None]
    line: Callable[[Estimate], int]


def _replace(s: Settings, **changes: object) -> Settings:
    return dataclasses.replace(s, **changes)


def _mixed(dtype: str) -> Callable[[Settings, Estimate], Settings | None]:
    def mixed(s: Settings, e: Estimate) -> Settings | None:
        f = e.facts
        if f.autocast or f.param_dtype in ("float16", "bfloat16") or (s.dtype and s.dtype != "float32"):
            return None
        return _replace(s, dtype=dtype)
    return mixed


def _micro_batch(s: Settings, e: Estimate) -> Settings | None:
    batch = e.facts.inputs[0].shape[0] if e.facts.inputs and e.facts.inputs[0].shape else 0
    if batch < 2:
        return None
    accumulation = max(e.facts.accumulation, s.accumulation or 1) * 2
    return _replace(s, batch_size=batch // 2, accumulation=accumulation)


def _micro_text(e: Estimate) -> str:
    batch = e.facts.inputs[0].shape[0]
    accumulation = max(e.facts.accumulation, e.settings.accumulation or 1)
    return (f"use micro-batches of {batch // 2} and accumulate gradients over "
            f"{accumulation * 2} steps (same effective batch of {batch * accumulation})")


def _checkpoint(s: Settings, e: Estimate) -> Settings | None:
    if s.checkpoint or e.facts.checkpoint_line or not e.facts.repeated:
        return None
    return _replace(s, checkpoint=True)


def _set_to_none(s: Settings, e: Estimate) -> Settings | None:
    if e.facts.set_to_none or s.set_to_none:
        return None
    return _replace(s, set_to_none=True)


EIGHT_BIT = {"adam": "Adam8bit", "adamw": "AdamW8bit", "pagedadamw": "PagedAdamW8bit"}
"""bitsandbytes' 8-bit form of each Adam-family optimizer, one that trains as it does
(AdamW8bit for Adam would add weight decay). Adam's state is the largest: two values a
parameter where the others keep one or none."""


def _optimizer_key(s: Settings, e: Estimate) -> str:
    return (s.optimizer or (e.facts.optimizers[0].kind if e.facts.optimizers else "adamw")).lower()


def _eight_bit(s: Settings, e: Estimate) -> Settings | None:
    name = EIGHT_BIT.get(_optimizer_key(s, e))
    return None if name is None else _replace(s, optimizer=name.lower())


def _eight_bit_text(e: Estimate) -> str:
    name = EIGHT_BIT.get(_optimizer_key(e.settings, e), "AdamW8bit")
    return f"use an 8-bit optimizer: bitsandbytes.optim.{name}(...)"


def _fused(s: Settings, e: Estimate) -> Settings | None:
    from tvis_tui.vram.tape import is_score_matrix

    if s.fused_attention or not any(is_score_matrix(t) for op in e.facts.snapshot or [] for t in op.saved):
        return None
    return _replace(s, fused_attention=True)


def _fsdp(s: Settings, e: Estimate) -> Settings | None:
    if s.shards > 1 or e.facts.sharding == "fsdp":
        return None
    return _replace(s, shards=FSDP_GPUS)


def _freeze(s: Settings, e: Estimate) -> Settings | None:
    model = e.facts.model
    if s.freeze_embeddings or model is None:
        return None
    params = model.params()
    frozen = sum(p.numel for p in params if getattr(p, "embedding", False) and p.trainable)
    if frozen < FREEZE_SHARE * sum(p.numel for p in params):
        return None
    return _replace(s, freeze_embeddings=True)


def _score_line(e: Estimate) -> int:
    from tvis_tui.vram.tape import is_score_matrix

    return next((op.line for op in e.facts.snapshot or [] if op.name == "softmax" and any(
        is_score_matrix(t) for t in op.saved)), e.facts.forward_line)


BF16_TEXT = ("train in bf16 mixed precision: wrap forward and loss in "
             "`with torch.autocast('cuda', dtype=torch.bfloat16):`")
FP16_TEXT = ("train in fp16 mixed precision (this GPU has no bf16): wrap forward and loss in "
             "`with torch.autocast('cuda', dtype=torch.float16):` and scale the loss with "
             "torch.amp.GradScaler('cuda')")
BF16_CAVEAT = " (bf16 needs an Ampere or newer GPU; on older ones use float16 with a GradScaler)"

CANDIDATES = (
    _Candidate("bf16", lambda e: BF16_TEXT, _mixed("amp-bf16"), lambda e: e.facts.forward_line),
    _Candidate("fp16", lambda e: FP16_TEXT, _mixed("amp-fp16"), lambda e: e.facts.forward_line),
    _Candidate("bf16?", lambda e: BF16_TEXT + BF16_CAVEAT, _mixed("amp-bf16"),
               lambda e: e.facts.forward_line),
    _Candidate("fused", lambda e: "use fused attention: F.scaled_dot_product_attention(q, k, v, "
               "is_causal=True) instead of softmax(q @ k.T)", _fused, _score_line),
    _Candidate("checkpoint", lambda e: "checkpoint each repeated block: "
               "x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False) "
               "(adds one recomputed forward)", _checkpoint,
               lambda e: e.facts.model_line),
    _Candidate("set_to_none", lambda e: "call zero_grad(set_to_none=True) so gradients are freed "
               "between steps", _set_to_none, lambda e: e.facts.zero_grad_line),
    _Candidate("8bit", _eight_bit_text, _eight_bit, lambda e: e.facts.optimizers[0].line if e.facts.optimizers else 0),
    _Candidate("micro", _micro_text, _micro_batch, lambda e: e.facts.forward_line),
    _Candidate("freeze", lambda e: "freeze the embedding tables when they come pretrained: "
               "emb.weight.requires_grad_(False) (no gradients or optimizer state for them)",
               _freeze, lambda e: e.facts.model_line),
    _Candidate("fsdp", lambda e: f"shard parameters, gradients and optimizer state with FSDP "
               f"over {FSDP_GPUS} GPUs (figure per GPU)", _fsdp, lambda e: e.facts.model_line),
)


MIXED_KEYS = {True: "bf16", False: "fp16", None: "bf16?"}
"""The mixed-precision candidate for a GPU with bf16, without it, and not known."""


def candidates(bf16: bool | None) -> tuple[_Candidate, ...]:
    """The changes worth trying on a GPU: one mixed-precision change, in bf16 where the GPU
    computes in it, in fp16 with loss scaling where it does not (Volta, Turing), and in bf16
    with a caveat where the GPU is not known."""
    mixed = MIXED_KEYS[bf16]
    return tuple(c for c in CANDIDATES if c.key == mixed or c.key not in MIXED_KEYS.values())


def suggest(base: Estimate, usable: int, bf16: bool | None = True,
            shown: Estimate | None = None) -> list[Suggestion]:
    """Ordered changes with their savings; enough to fit `usable` bytes when any set can.
    Savings are measured on `base`, the static estimate. With `shown` (the traced figure for
    the same script) they are taken off its peak, so no "peak after" exceeds the peak shown."""
    shown = shown or base
    offset = shown.peak_bytes - base.peak_bytes
    tried = candidates(bf16)
    if shown.peak_bytes <= usable * FITS_FRACTION:
        return _anchored(_all_single(base, tried), shown, offset, cumulative=False)
    return _anchored(_greedy(base, tried, usable * FITS_FRACTION - offset), shown, offset,
                     cumulative=True)


def _greedy(base: Estimate, tried: tuple[_Candidate, ...], target: float,
            max_rounds: int = 6) -> list[Suggestion]:
    """The biggest saving first, each measured on top of the ones before, until the static
    peak is at most `target`."""
    out: list[Suggestion] = []
    current = base
    used: set[str] = set()
    deadline = time.monotonic() + MAX_SECONDS
    for _ in range(max_rounds):
        best = None
        for cand in tried:
            if cand.key in used and cand.key != "micro" or time.monotonic() > deadline:
                continue
            attempt = _try(cand, current)
            if attempt and (best is None or attempt[1].peak_bytes < best[1].peak_bytes):
                best = (cand, attempt[1])
        if best is None or current.peak_bytes - best[1].peak_bytes < _threshold(base):
            break
        cand, after = best
        out.append(Suggestion(cand.describe(current), current.peak_bytes - after.peak_bytes,
                              cand.line(current), after.peak_bytes))
        used.add(cand.key)
        current = after
        if current.peak_bytes <= target:
            break
    return out


def _all_single(base: Estimate, tried: tuple[_Candidate, ...]) -> list[Suggestion]:
    found = []
    deadline = time.monotonic() + MAX_SECONDS
    for cand in tried:
        if time.monotonic() > deadline:
            break
        attempt = _try(cand, base)
        if attempt and base.peak_bytes - attempt[1].peak_bytes >= _threshold(base):
            after = attempt[1]
            found.append(Suggestion(cand.describe(base), base.peak_bytes - after.peak_bytes,
                                    cand.line(base), after.peak_bytes))
    return sorted(found, key=lambda s: -s.saves_bytes)


def _anchored(found: list[Suggestion], shown: Estimate, offset: int,
              cumulative: bool) -> list[Suggestion]:
    """Move each "peak after" by the traced-minus-static difference, never below the CUDA
    context (no change frees it), and recompute the savings from the moved figures: from the
    shown peak for single changes, from the previous change's figure for cumulative ones."""
    floor = shown.breakdown.get("cuda_context", 0)
    before = shown.peak_bytes
    out = []
    for s in found:
        after = min(before, max(floor, s.peak_after + offset))
        out.append(Suggestion(s.change, before - after, s.line, after))
        before = after if cumulative else before
    return [s for s in out if s.saves_bytes > 0]


def _threshold(base: Estimate) -> int:
    return max(MIN_SAVING, int(base.tensor_bytes * MIN_SHARE))


def _try(cand: _Candidate, current: Estimate) -> tuple[Settings, Estimate] | None:
    settings = cand.settings(current.settings, current)
    if settings is None:
        return None
    return settings, estimate(current.script, settings)
