"""What a step record says beyond its numbers, as the step view shows it:
each sample's loss, the batch the loss was computed on, the BatchNorm/Dropout layers
trained in eval mode, the calls that cut the graph, a loss that broadcast its input or
was fed probabilities, and each optimizer's loss where they applied losses apart.

Each reads the step record's `extra` as the recorder wrote it (docs/store-format.md) and
checks types: a damaged run leaves a finding out, it does not raise.
"""

from __future__ import annotations

import math
from typing import Any

from tvis_tui.store.model_parts import told_apart
from tvis_tui.store.reader import RunReader
from tvis_tui.store.records import StepRecord
from tvis_tui.store.samples import batches


def sample_losses(reader: RunReader, step: StepRecord, loss_seq: int | None = None
                  ) -> tuple[dict[int, float], set[int], int | None]:
    """Each sample's loss by its position in the batch (when the per-sample values were
    stored, else the highest few the step record keeps), the positions of those, and how
    many samples the loss had (None: not known). `loss_seq`: the loss call the predictions
    shown beside them came from (a step may hold a validation loss and the training loss,
    or a main and an auxiliary loss): the losses are that call's, or none."""
    summary = step.extra.get("per_sample_loss")
    summary = summary if isinstance(summary, dict) else {}
    seq = loss_seq if loss_seq is not None else summary.get("seq")
    if seq is None:
        return {}, set(), None
    same = summary.get("seq") == seq
    worst = {int(pos): float(value) for pos, value in summary.get("worst", [])} if same else {}
    slot = next((s for s in reader.slots(seq, "per_sample") if s.path == "per_sample"), None)
    values = reader.values(seq, slot) if slot is not None and slot.has_values else None
    losses = {i: float(v) for i, v in enumerate(values.reshape(-1))} if values is not None else dict(worst)
    count = values.size if values is not None else summary.get("count") if same else None
    return losses, set(worst), count


def step_batch(reader: RunReader, step: int, loss_seq: int | None) -> dict[str, Any] | None:
    """The DataLoader batch of `step` whose samples the loss call `loss_seq` (the one the
    predictions and per-sample losses come from) was computed on, when that is certain: the
    only batch drawn before it. A validation after the step's loss draws its batches after
    it (sweep N); one between the training batch and its loss would make any choice a guess,
    and samples beside another batch's losses would mislead (review)."""
    drawn = batches(reader, step)
    if loss_seq is not None:
        drawn = [b for b in drawn if isinstance(b.get("seq"), int) and b["seq"] <= loss_seq]
    return drawn[0] if len(drawn) == 1 else None


def eval_layers(reader: RunReader, step: int) -> list[str]:
    """The BatchNorm and Dropout layers that ran in eval mode in the step's training
    (record/mode_layers.py): `model.train()` forgotten after a validation, say."""
    record = reader.step(step)
    layers = record.extra.get("eval_while_training") if record is not None else None
    return [str(name) for name in layers] if isinstance(layers, list) else []


def broadcast_shapes(step: StepRecord | None) -> dict[str, Any] | None:
    """The shapes of a loss that broadcast its input against its target (per_sample_loss.py);
    None in a damaged run that lacks one of them (the reader checks the types of those present)."""
    summary = step.extra.get("per_sample_loss") if step is not None else None
    shapes = summary.get("broadcast") if isinstance(summary, dict) else None
    return shapes if isinstance(shapes, dict) and all(k in shapes for k in ("input", "target", "shape")) else None


def fed_probabilities(step: StepRecord | None) -> str | None:
    """What made the probabilities the step's loss was fed where it wants logits
    (per_sample_loss.py): "softmax" before CrossEntropyLoss or for NLLLoss's log_softmax,
    "sigmoid" before BCEWithLogitsLoss; None when it was fed logits."""
    summary = step.extra.get("per_sample_loss") if step is not None else None
    if not isinstance(summary, dict) or summary.get("probabilities") is not True:
        return None
    made_by = summary.get("probabilities_from")
    return made_by if made_by in ("softmax", "sigmoid") else "softmax"  # runs before "sigmoid" had none


def loss_seq_of(step: StepRecord | None) -> int | None:
    """The loss call whose per-sample losses the step record keeps."""
    summary = step.extra.get("per_sample_loss") if step is not None else None
    seq = summary.get("seq") if isinstance(summary, dict) else None
    return seq if isinstance(seq, int) else None


CLASS_LOSSES = frozenset({"CrossEntropyLoss", "F.cross_entropy", "NLLLoss", "F.nll_loss"})
BINARY_LOSSES = frozenset({"BCEWithLogitsLoss", "F.binary_cross_entropy_with_logits", "BCELoss",
                           "F.binary_cross_entropy"})


def chance_loss(prediction: dict[str, Any] | None, step: StepRecord | None) -> tuple[float, str] | None:
    """The loss of a model that learned nothing, giving every class the same probability:
    ln C for a cross-entropy over C classes (label smoothing and class weights leave it so),
    ln 2 for a binary cross-entropy. A loss that stays there says the model predicts the
    same for every sample (inputs and labels decoupled, units all alike; sweep O). As
    (value, how it is made); None where the predictions' loss is none of these, or was not
    a mean over the samples."""
    if prediction is None or step is None:
        return None
    summary = step.extra.get("per_sample_loss")
    if not isinstance(summary, dict) or summary.get("seq") != prediction.get("loss_seq") \
            or summary.get("reduction") != "mean":
        return None
    loss, kind, classes = prediction.get("loss"), prediction.get("kind"), prediction.get("classes")
    if loss in BINARY_LOSSES and (kind == "labels" or classes == 2):
        return math.log(2), "ln 2: every score 0.5"
    if loss in CLASS_LOSSES and kind in ("classes", "tokens") and type(classes) is int and classes >= 2:
        return math.log(classes), f"ln {classes}: every class alike"
    return None


def optimizer_losses(step: StepRecord | None) -> list[tuple[str, float]]:
    """Each optimizer's own loss where optimizers applied losses apart (a GAN's D and G),
    as (what it trained: a model, or a part of one; else the optimizer's class, loss) in
    the order they stepped; [] where the step's loss is one (record/steps.py)."""
    listed = step.extra.get("optimizer_losses") if step is not None else None
    if not isinstance(listed, list):
        return []
    return [(str(o.get("model") or o.get("optimizer") or "?"), o["loss"]) for o in listed
            if isinstance(o, dict) and isinstance(o.get("loss"), (int, float))]


def loss_label(step: StepRecord | None, named: bool = True) -> str | None:
    """The step's loss as the screens print it: `1.132`, or each optimizer's where
    several applied their own (`Discriminator 1.384, Generator 0.6931`; `1.384, 0.6931`
    unless `named`, where the room is short); None when it has none."""
    apart = optimizer_losses(step)
    if len(apart) > 1:
        short = told_apart([name for name, _ in apart])
        return ", ".join(f"{short[name]} {value:.4g}" if named else f"{value:.4g}" for name, value in apart)
    return None if step is None or step.loss is None else f"{step.loss:.4g}"


def graph_cuts(step: StepRecord | None) -> list[tuple[int, str]]:
    """The step's calls that cut the graph, as (seq, name), first first (record/calls.py)."""
    listed = step.extra.get("graph_cuts") if step is not None else None
    if not isinstance(listed, list):
        return []
    return [(seq, name) for seq, name in (c for c in listed if isinstance(c, list) and len(c) == 2)
            if type(seq) is int and isinstance(name, str)]
