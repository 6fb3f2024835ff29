"""TV007: BCELoss applied to raw logits."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.activations import LOGITS, loss_inputs, output_kind
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

PROBABILITY_LOSSES = frozenset({"torch.nn.BCELoss", "torch.nn.functional.binary_cross_entropy"})


class BCEOnLogits(Rule):
    """BCELoss receives raw logits instead of probabilities.

    What it does:
        Finds `BCELoss` / `F.binary_cross_entropy` whose prediction argument provably comes
        straight out of a linear or convolution layer (directly, through `nn.Sequential`,
        or from a model whose `forward` returns such a layer's output) with no sigmoid.
    Why is this bad:
        BCELoss expects probabilities in [0, 1]. Logits outside that range make it fail
        with a device-side assert mid-run, or, when they happen to fall inside, train a
        model whose outputs mean nothing. `BCEWithLogitsLoss` is also numerically safer.
    Example:
        head = nn.Linear(128, 1)
        loss = nn.BCELoss()(head(features), y)
    Use instead:
        head = nn.Linear(128, 1)
        loss = nn.BCEWithLogitsLoss()(head(features), y)
    Known limits:
        Reports only when the linear output is proven; a model whose final activation is
        applied elsewhere (a helper, a custom module) is not reported.
    """

    id = "TV007"
    title = "BCELoss on raw logits"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "use BCEWithLogitsLoss on the logits (or apply torch.sigmoid first)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call, prediction in loss_inputs(ctx, PROBABILITY_LOSSES):
            if output_kind(ctx, prediction, call.node) == LOGITS:
                yield ctx.finding(prediction, "BCELoss expects probabilities but gets raw "
                                  "logits (no sigmoid after the last layer); use BCEWithLogitsLoss")
