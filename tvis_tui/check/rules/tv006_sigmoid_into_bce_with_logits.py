"""TV006: sigmoid output passed to BCEWithLogitsLoss."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.activations import SIGMOID, loss_inputs, output_kind
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

WITH_LOGITS = frozenset({"torch.nn.BCEWithLogitsLoss",
                         "torch.nn.functional.binary_cross_entropy_with_logits"})


class SigmoidIntoBCEWithLogits(Rule):
    """Probabilities from sigmoid are passed to a loss that applies sigmoid itself.

    What it does:
        Finds `BCEWithLogitsLoss` / `F.binary_cross_entropy_with_logits` whose prediction
        argument is provably a sigmoid output (`torch.sigmoid`, `.sigmoid()`,
        `nn.Sigmoid`, or a model whose `forward` returns one).
    Why is this bad:
        The loss applies sigmoid again: predictions are squeezed into [0.5, 0.73], the loss
        can never approach zero and gradients are tiny. The model trains badly and the
        loss curve looks merely "slow".
    Example:
        loss = F.binary_cross_entropy_with_logits(torch.sigmoid(model(x)), y)
    Use instead:
        loss = F.binary_cross_entropy_with_logits(model(x), y)
    Known limits:
        Follows names within a function, `nn.Sequential` layers and project models'
        `forward` return values, not helper functions.
    """

    id = "TV006"
    title = "sigmoid output passed to BCEWithLogitsLoss"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "pass the raw logits to BCEWithLogitsLoss (drop the sigmoid)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call, prediction in loss_inputs(ctx, WITH_LOGITS):
            if output_kind(ctx, prediction, call.node) == SIGMOID:
                yield ctx.finding(prediction, "BCEWithLogitsLoss applies sigmoid itself: "
                                  "this sigmoid output is squashed twice; pass the logits")
