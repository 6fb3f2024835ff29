"""TV003: gradients reset between backward() and the optimizer step that should use them."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import mentions


class ZeroGradBeforeStep(Rule):
    """zero_grad() runs after backward() and before the step that needed those gradients.

    What it does:
        In one function, finds a reset of an optimizer's gradients (`optimizer.zero_grad()`,
        or `model.zero_grad()` on the model it optimizes) after a `backward()` and before the
        `optimizer.step()` (or the helper that steps) of the same iteration.
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
        if not backwards:
            return
        steps = ctx.step_events()
        resets = ctx.calls_named("zero_grad")
        for step, optimizer in steps:
            function = ctx.function_of(step.node)
            start = _window_start(ctx, step, function, steps)
            first = next((b for b in backwards if start <= b.node.start_byte
                          and b.node.end_byte <= step.node.start_byte
                          and ctx.function_of(b.node) is function), None)
            if first is None:
                continue
            for reset in resets:
                if first.node.end_byte <= reset.node.start_byte < step.node.start_byte and \
                        ctx.function_of(reset.node) is function and \
                        _same_grads(ctx, reset, optimizer):
                    yield ctx.finding(reset.node, f"`{ctx.text(reset.node)}` wipes the "
                                      "gradients of the backward() above before "
                                      f"`{ctx.text(step.node)}` uses them")
                    break


def _window_start(ctx: Context, step: Call, function: Region,
                  steps: list[tuple[Call, Node | None]]) -> int:
    """Where this step's iteration begins: after the previous step in the same function,
    and not before the body of the innermost loop around the step."""
    start = function.start
    loops = ctx.loops_around(step.node)
    if loops and loops[0].body is not None:
        start = loops[0].body.start_byte
    for other, _ in steps:
        if other.node.end_byte <= step.node.start_byte and \
                ctx.function_of(other.node) is function:
            start = max(start, other.node.end_byte)
    return start


def _same_grads(ctx: Context, reset: Call, optimizer: Node | None) -> bool:
    """Whether the reset clears the gradients the step would apply."""
    reset_target = ctx.text(reset.receiver)
    if optimizer is not None and reset_target == ctx.text(optimizer):
        return True
    if not ctx.is_model(reset.receiver):
        return False
    built = ctx.value_of(optimizer) if optimizer is not None else None
    return built is not None and built.type == "call" and mentions(built, reset_target)
