"""TV037: functional dropout in a module that never tells it the module is in eval mode."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule

DROPOUTS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
            "feature_alpha_dropout")
TRAINING_ONLY_HOOKS = frozenset({"training_step"})
"""Lightning hooks that only ever run in training mode: dropout always on is right there."""


class FunctionalDropoutAlwaysOn(Rule):
    """`F.dropout(x, p)` inside an nn.Module without `training=self.training`.

    What it does:
        Finds `torch.nn.functional.dropout` (and `dropout1d/2d/3d`, `alpha_dropout`,
        `feature_alpha_dropout`) called in a method of a class that subclasses
        `nn.Module`, when the `training` argument is not passed at all.
    Why is this bad:
        Functional dropout's `training` defaults to True and knows nothing about
        `model.eval()`. Dropout stays on during validation and inference: evaluation
        metrics are noisy and too low, predictions change between runs, and the
        checkpoint chosen by validation score is essentially random.
    Example:
        class Head(nn.Module):
            def forward(self, x):
                return self.fc(F.dropout(x, p=0.5))
    Use instead:
        class Head(nn.Module):
            def forward(self, x):
                return self.fc(F.dropout(x, p=0.5, training=self.training))
    Known limits:
        Only methods of classes proven to be modules are checked; a helper function
        outside the class is not. An explicit `training=True` (Monte Carlo dropout) is
        taken as deliberate, as is a call with `**kwargs` or one under a condition that
        names `training` (`if self.training:`).
    """

    id = "TV037"
    title = "functional dropout without training=self.training"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "pass training=self.training (or use an nn.Dropout module)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named(*DROPOUTS):
            if call.has_splat or call.arg(2, "training") is not None:
                continue
            qual = ctx.qualname(call.func) or ""
            if not qual.startswith("torch.nn.functional.") or _guarded(call.node) or \
                    not _in_module_method(ctx, call):
                continue
            yield ctx.finding(call.node, f"`{ctx.text(call.func)}` without "
                              "`training=self.training` keeps dropping activations after "
                              "model.eval()")


def _guarded(node: Node) -> bool:
    """Under `if self.training:` (or any condition naming `training`)."""
    current = node.parent
    while current is not None and current.type not in ("function_definition", "module"):
        if current.type in ("if_statement", "conditional_expression", "elif_clause"):
            condition = current.child_by_field_name("condition")
            if condition is None and current.type == "conditional_expression":
                condition = current.named_children[1] if len(current.named_children) > 1 \
                    else None
            if condition is not None and b"training" in condition.text:
                return True
        current = current.parent
    return False


def _in_module_method(ctx: Context, call: Call) -> bool:
    """Whether `call` is in a method (or a function nested in one), other than a
    training-only hook, of an nn.Module class."""
    method = ctx.function_of(call.node)
    while method.kind == "function" and method.parent.kind != "class":
        method = ctx.function_of(method.node)  # the function around a nested one
    if method.kind != "function" or method.name in TRAINING_ONLY_HOOKS:
        return False
    return ctx.project.class_inherits(ctx.file, method.parent, kinds.MODULE_BASES)
