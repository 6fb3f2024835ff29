"""TV030: the learning-rate scheduler steps before the optimizer it drives."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import schedulers
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap

# Stepped with a metric after evaluation: stepping it first changes nothing that matters.
METRIC_SCHEDULERS = frozenset({"torch.optim.lr_scheduler.ReduceLROnPlateau"})


class SchedulerBeforeOptimizerStep(Rule):
    """`scheduler.step()` runs before `optimizer.step()` in the same iteration.

    What it does:
        Finds a learning-rate scheduler's `step()` that, within one loop iteration (or one
        call of a per-step function), comes before every step of the optimizer it was built
        over: `optimizer.step()`, `scaler.step(optimizer)` or a function that steps it.
    Why is this bad:
        Since PyTorch 1.1 the scheduler must step after the optimizer. Stepping it first
        skips the first value of the schedule: the warm-up or the initial learning rate is
        never used and every later value comes one epoch (or step) early. PyTorch only warns
        once, and training quietly follows a different schedule from the one configured.
    Example:
        for epoch in range(epochs):
            scheduler.step()
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
    Use instead:
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    Known limits:
        A scheduler step under an `if` (`if epoch > 0: scheduler.step()`) is not reported:
        the guard usually makes it follow an earlier iteration's optimizer step.
        `ReduceLROnPlateau` is not reported, nor is the old `scheduler.step(epoch)`, which
        sets the rate for the epoch it is given. Schedulers whose type or optimizer cannot be
        proven from the code are skipped.
    """

    id = "TV030"
    title = "scheduler.step() before optimizer.step()"
    severity = Severity.WARNING
    category = Category.CONVERGENCE
    fix = "call scheduler.step() after optimizer.step()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for step, qual in schedulers.scheduler_steps(ctx):
            if qual in METRIC_SCHEDULERS or step.args or step.kwargs:
                continue  # `scheduler.step(epoch)` sets the rate for that epoch outright
            scope = _iteration(ctx, step.node)
            if scope is None or schedulers.is_conditional(step.node, scope):
                continue
            optimizer = schedulers.driven_optimizer(ctx, step.receiver)
            positions = [c.node.start_byte for c in ctx.calls_in(scope)
                         if _steps_optimizer(ctx, c, optimizer)]
            if positions and min(positions) > step.node.end_byte:
                name = ctx.text(step.receiver)
                yield ctx.finding(step.node, f"`{name}.step()` runs before "
                                  f"`{optimizer or 'the optimizer'}.step()` in the same "
                                  "iteration: the first learning rate of the schedule is "
                                  "skipped")


def _iteration(ctx: Context, node: Node) -> Node | None:
    """The body that runs once per iteration around `node`: its innermost loop's body, or
    the body of a loop-free function that is itself called repeatedly."""
    loops = ctx.loops_around(node)
    if loops:
        return loops[0].body
    function = ctx.function_of(node)
    if function.kind == "function" and ctx.repeats(node):
        return function.body
    return None


def _steps_optimizer(ctx: Context, call: Call, optimizer: str | None) -> bool:
    """`optimizer.step()`, `scaler.step(optimizer)`, or a checked-file function that steps
    an optimizer (which one is not followed)."""
    if call.method == "step":
        if not ctx.is_optimizer_step(call) or optimizer is None:
            return ctx.is_optimizer_step(call)
        stepped = call.args[0] if call.args else call.receiver
        return ctx.text(unwrap(stepped)) == optimizer
    if call.name in ctx.project.functions or call.name in ctx.project.classes:
        return ctx.runs_step(call.node)
    return False
