"""TV010: `model.eval` or `optimizer.zero_grad` written without the call parentheses."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import text

METHODS = frozenset({"eval", "train", "zero_grad", "step", "backward", "cuda", "cpu",
                     "half", "float", "detach_", "requires_grad_", "update", "unscale_",
                     "set_epoch", "clip_grad_norm_", "synchronize", "empty_cache",
                     "manual_seed", "seed"})


class MethodNotCalled(Rule):
    """A training method is named but not called, so nothing happens.

    What it does:
        Finds a statement that only references a method such as `model.eval`,
        `optimizer.zero_grad`, `optimizer.step`, `scheduler.step` or `loss.backward`
        without the parentheses that call it.
    Why is this bad:
        The statement evaluates to a bound method and throws it away: the model stays in
        training mode (dropout on during evaluation), gradients are never reset, or the
        optimizer never steps. Python raises no error.
    Example:
        model.eval
        optimizer.zero_grad
    Use instead:
        model.eval()
        optimizer.zero_grad()
    Known limits:
        Only statements that are a bare attribute are reported; a reference stored or
        passed on (`hooks.append(model.eval)`) is legitimate and never reported.
    """

    id = "TV010"
    title = "method referenced without being called"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "add the parentheses: model.eval()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for statement in ctx.index.statements:
            expr = statement.child(0)
            if expr is None or expr.type != "attribute" or statement.child_count != 1:
                continue
            name = text(expr.child_by_field_name("attribute"))
            if name in METHODS:
                yield ctx.finding(expr, f"`{ctx.text(expr)}` is not called, so it does "
                                  f"nothing; write `{ctx.text(expr)}()`")
