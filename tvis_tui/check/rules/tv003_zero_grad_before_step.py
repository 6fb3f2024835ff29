"""TV003: gradients reset between backward() and the optimizer step that should use them."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import mentions


class ZeroGradBeforeStep(Rule):
    """zero_grad() runs after backward() and before the step that needed those gradients.

    What it does:
        In one function, finds `optimizer.step()` whose nearest preceding `backward()` is
        separated from it by a reset of the same optimizer's gradients
        (`optimizer.zero_grad()`, or `model.zero_grad()` on the model it optimizes).
    Why is this bad:
        The step then sees zero (or None) gradients: the weights never change, or only
        weight decay and momentum move them. The loss stays flat and nothing errors.
    Example:
        loss.backward()
        optimizer.zero_grad()
        optimizer.step()
    Use instead:
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    Known limits:
        Looks within one function, in source order. A reset of another optimizer (a GAN's
        generator between the critic's backward and step) is fine and not reported; a
        `model.zero_grad()` counts only when the optimizer is built over that model.
    """

    id = "TV003"
    title = "zero_grad() between backward() and step()"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "move zero_grad() before backward() (or after step())"

    def check(self, ctx: Context) -> Iterator[Finding]:
        backwards = [c for c in ctx.calls_named("backward", "manual_backward")
                     if ctx.is_backward(c)]
        resets = [c for c in ctx.calls_named("zero_grad")]
        for step in ctx.calls_named("step"):
            if not ctx.is_optimizer_step(step):
                continue
            function = ctx.function_of(step.node)
            before = [b for b in backwards if b.node.end_byte <= step.node.start_byte
                      and ctx.function_of(b.node) is function]
            if not before:
                continue
            last = before[-1].node.end_byte
            for reset in resets:
                if last <= reset.node.start_byte < step.node.start_byte and \
                        ctx.function_of(reset.node) is function and _same_grads(ctx, reset, step):
                    yield ctx.finding(reset.node, f"`{ctx.text(reset.node)}` wipes the "
                                      "gradients of the backward() above before "
                                      f"`{ctx.text(step.func)}()` uses them")
                    break


def _same_grads(ctx: Context, reset: Call, step: Call) -> bool:
    """Whether the reset clears the gradients this step would apply."""
    optimizer = _optimizer_of(ctx, step)
    reset_target = ctx.text(reset.receiver)
    if reset_target == ctx.text(optimizer):
        return True
    if not ctx.is_model(reset.receiver):
        return False
    built = ctx.value_of(optimizer) if optimizer is not None else None
    return built is not None and built.type == "call" and mentions(built, reset_target)


def _optimizer_of(ctx: Context, step: Call) -> Node | None:
    """`opt` for `opt.step()`, and for `scaler.step(opt)`."""
    if step.args:
        return step.args[0]
    return step.receiver
