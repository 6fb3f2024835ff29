"""What an estimate says about its sources: the values read (with their lines) and how
much to trust the figure."""

from __future__ import annotations

from tvis_tui.vram.facts import Facts
from tvis_tui.vram.tape import Tape
from tvis_tui.vram.values import Param


def _at(line: int) -> str:
    return f" (line {line})" if line else ""


def read_list(facts: Facts, params: list[Param], tape: Tape) -> list[str]:
    out = []
    if facts.settings.params is not None:
        count = sum(p.numel for p in params if not p.buffer)
        out.append(f"parameters {count:,} (--params)")
    else:
        out += _trained(facts)
    if facts.inputs and not facts.input_assumed:  # a made-up input is listed under assumed
        shapes = ", ".join("x".join(map(str, t.shape)) + f" {t.dtype}" for t in facts.inputs)
        out.append(f"batch {shapes}{_at(facts.forward_line)}")
    trained = facts.trained_optimizers()
    if trained:
        named = ", ".join(f"{opt.kind}{_at(opt.line)}" for opt in trained)
        out.append(f"optimizer{'s' * (len(trained) > 1)} {named}")
    for label, value, line in (
        ("autocast", facts.autocast, facts.autocast_line),
        ("parameters in", facts.param_dtype, facts.param_dtype_line),
        ("GradScaler", facts.scaler_line and "yes", facts.scaler_line),
        ("gradient accumulation over", facts.accumulation > 1 and f"{facts.accumulation} steps",
         facts.accumulation_line),
        ("activation checkpointing", facts.checkpoint_line and "yes", facts.checkpoint_line),
        ("zero_grad(set_to_none=False)", facts.zero_grad_line and not facts.set_to_none and "yes",
         facts.zero_grad_line),
        ("torch.compile", facts.compile_line and "yes", facts.compile_line),
        ("data parallel", facts.sharding, facts.sharding_line),
    ):
        if value:
            out.append(f"{label} {value}{_at(line)}".replace(" yes", ""))
    if tape.followed or tape.guessed:
        out.append(f"layers followed by shape: {tape.followed}, by heuristic: {tape.guessed}")
    return out


def _trained(facts: Facts) -> list[str]:
    """The model, and the parameters optimizers step outside it (a GAN's second model)."""
    out, seen = [], set()
    model = facts.model
    if model is not None:
        own = [p for p in model.params() if not p.buffer]
        seen = {id(p) for p in own}
        out.append(f"model {model.kind}: {_count(own)} parameters{_at(model.line)}")
    for opt in facts.trained_optimizers():
        more = [p for p in opt.params if id(p) not in seen and not p.buffer]
        seen.update(id(p) for p in more)
        if more:
            where = "outside the model " if model is not None else ""
            out.append(f"parameters {where}stepped by {opt.kind}{_at(opt.line)}: {_count(more)}")
    for module in facts.called_models():  # estimate._untrained: resident all the same
        rest = [p for p in module.params() if id(p) not in seen and not p.buffer]
        seen.update(id(p) for p in rest)
        if rest:
            out.append(f"parameters not trained, of {module.kind}{_at(module.line)}: {_count(rest)}")
    return out


def _count(params: list[Param]) -> str:
    return f"{sum(p.numel for p in params):,}"


LOW_CONFIDENCE = ("one training step of", "no model found", "the model could not be followed",
                  "the model's forward is too long")
"""Assumptions that replace the model or its training step, not just a size."""


def confidence(facts: Facts, tape: Tape) -> str:
    """high: the script's own training step was followed through known layers with nothing
    assumed; low: the step or the model had to be assumed; medium otherwise."""
    step_assumed = any(a.startswith(LOW_CONFIDENCE) for a in facts.assumed)
    if step_assumed or facts.model is None and not facts.settings.params:
        return "low"
    total = tape.followed + tape.guessed
    if facts.assumed or (total and tape.guessed / total > 0.2):
        return "medium"
    return "high"
