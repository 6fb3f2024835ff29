"""TV005: softmax or log_softmax output passed to CrossEntropyLoss."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.activations import LOG_SOFTMAX, SOFTMAX, loss_inputs, output_kind
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

CROSS_ENTROPY = frozenset({"torch.nn.CrossEntropyLoss", "torch.nn.functional.cross_entropy"})


class SoftmaxIntoCrossEntropy(Rule):
    """Probabilities from softmax are passed to a loss that applies log_softmax itself.

    What it does:
        Finds `CrossEntropyLoss` / `F.cross_entropy` whose prediction argument is provably
        the output of `softmax` (a function, a method, an `nn.Softmax` layer, or a model
        whose `forward` returns one) or of `log_softmax`.
    Why is this bad:
        Cross-entropy in PyTorch expects logits and applies log_softmax internally.
        Softmax first squashes the inputs into [0, 1], so the loss saturates and gradients
        shrink: training is slow or stalls at a poor accuracy without any error.
        A log_softmax first is mathematically harmless but computes it twice.
    Example:
        probs = F.softmax(model(x), dim=1)
        loss = F.cross_entropy(probs, y)
    Use instead:
        logits = model(x)
        loss = F.cross_entropy(logits, y)
    Known limits:
        Follows names within a function, `nn.Sequential` layers and project models'
        `forward` return values. A softmax applied in a helper function whose result is
        returned is not followed. log_softmax is reported as info (wasted compute only).
    """

    id = "TV005"
    title = "softmax output passed to CrossEntropyLoss"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "pass the raw logits to CrossEntropyLoss (or use NLLLoss after log_softmax)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call, prediction in loss_inputs(ctx, CROSS_ENTROPY):
            kind = output_kind(ctx, prediction, call.node)
            if kind == SOFTMAX:
                yield ctx.finding(prediction, "cross-entropy applies log_softmax itself: "
                                  "this softmax output squashes the logits and stalls "
                                  "training; pass the logits")
            elif kind == LOG_SOFTMAX:
                yield ctx.finding(prediction, "cross-entropy applies log_softmax itself: "
                                  "this log_softmax is computed twice (use NLLLoss, or pass "
                                  "the logits)", severity=Severity.INFO)
