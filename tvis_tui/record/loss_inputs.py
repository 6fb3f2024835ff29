"""A loss fed probabilities where it wants logits: softmax applied before
CrossEntropyLoss (which applies its own: the loss then barely moves), softmax where NLLLoss
expects log_softmax, or a model ending in a sigmoid before BCEWithLogitsLoss.

Cross-entropy and NLL take scores per class along dim 1 with class-index targets.
Probabilities there are non-negative and sum to 1 over the classes, which logits and
log-probabilities are not (log-probabilities are <= 0; logits that happen to sum to 1 on
every row do not occur in training). Only the first SAMPLED_ROWS rows are read: an LM's
logits are the size of the vocabulary times the tokens. A binary cross-entropy's logits
spread on both sides of 0; sigmoid outputs lie strictly between 0 and 1: at least
MIN_SCORES of them all there say so (fewer could be logits by chance).
"""

from __future__ import annotations

import torch

SAMPLED_ROWS = 64
TOLERANCE = 1e-3
"""Rows summing to 1 within this: float32 softmax rows are off by ~1e-7."""


MIN_SCORES = 32


def fed_probabilities(name: str, input: torch.Tensor, target: torch.Tensor) -> str | None:
    """What made the probabilities loss `name` got where it wants logits: "softmax" for
    cross_entropy and nll_loss, "sigmoid" for binary_cross_entropy_with_logits; None when
    its input does not look like probabilities."""
    if name == "binary_cross_entropy_with_logits":
        return "sigmoid" if _sigmoid_outputs(input) else None
    return "softmax" if _softmax_rows(name, input, target) else None


def _sigmoid_outputs(input: torch.Tensor) -> bool:
    scores = input.detach().reshape(-1)[:SAMPLED_ROWS * MIN_SCORES]
    if scores.numel() < MIN_SCORES or not scores.is_floating_point():
        return False
    return bool(((scores > 0) & (scores < 1)).all())


def _softmax_rows(name: str, input: torch.Tensor, target: torch.Tensor) -> bool:
    if name not in ("cross_entropy", "nll_loss") or input.dim() < 2 or input.shape[1] < 2:
        return False
    if target.is_floating_point() or not input.is_floating_point():  # probability targets: another use
        return False
    # The first samples before the reshape: on (N, C, T) scores, moving the classes last and
    # flattening copies, and it must copy no more than the rows read.
    rows = input.detach()[:SAMPLED_ROWS].movedim(1, -1).reshape(-1, input.shape[1])[:SAMPLED_ROWS].float()
    if rows.numel() == 0:
        return False
    in_range = bool(((rows >= 0) & (rows <= 1)).all())
    return in_range and bool(((rows.sum(1) - 1).abs() <= TOLERANCE).all())
