"""A class loss fed probabilities: softmax applied before CrossEntropyLoss (which applies
its own: the loss then barely moves), or softmax where NLLLoss expects log_softmax.

Both losses take scores per class along dim 1 with class-index targets. Probabilities there
are non-negative and sum to 1 over the classes, which logits and log-probabilities are not
(log-probabilities are <= 0; logits that happen to sum to 1 on every row do not occur in
training). Only the first SAMPLED_ROWS rows are read: an LM's logits are the size of the
vocabulary times the tokens.
"""

from __future__ import annotations

import torch

SAMPLED_ROWS = 64
TOLERANCE = 1e-3
"""Rows summing to 1 within this: float32 softmax rows are off by ~1e-7."""


def fed_probabilities(name: str, input: torch.Tensor, target: torch.Tensor) -> bool:
    """Whether class loss `name` (cross_entropy, nll_loss) got probabilities as its input."""
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
