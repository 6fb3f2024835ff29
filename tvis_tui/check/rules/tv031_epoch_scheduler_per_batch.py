"""TV031: a scheduler whose schedule counts epochs is stepped once per batch."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import schedulers
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import identifiers, unwrap

LR = schedulers.TORCH_SCHEDULERS
PER_STEP_WORDS = ("step", "iter", "batch", "len", "total", "update")


class EpochSchedulerPerBatch(Rule):
    """An epoch-level learning-rate scheduler is stepped inside the batch loop.

    What it does:
        Finds `scheduler.step()` in the same loop iteration as `optimizer.step()` (the batch
        loop, or a loop-free per-step function) when the scheduler's schedule is written in
        epochs: `StepLR` / `MultiStepLR` with small step sizes or milestones,
        `ExponentialLR` with gamma below 0.999, `CosineAnnealingLR` whose `T_max` is an
        epoch count, or `ReduceLROnPlateau`.
    Why is this bad:
        The schedule then runs hundreds of times faster than intended: `StepLR(step_size=30)`
        divides the learning rate by ten every 30 batches, so after a few hundred batches
        it is effectively zero and training stalls without any error. A cosine schedule
        meant for 90 epochs finishes its cycle within the first epoch and restarts.
    Example:
        scheduler = StepLR(optimizer, step_size=30, gamma=0.1)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
                scheduler.step()
    Use instead:
        scheduler = StepLR(optimizer, step_size=30, gamma=0.1)
        for epoch in range(epochs):
            for x, y in loader:
                optimizer.zero_grad()
                loss_fn(model(x), y).backward()
                optimizer.step()
            scheduler.step()
    Known limits:
        Per-step schedulers (OneCycleLR, LambdaLR warm-ups, Hugging Face schedules, a
        cosine whose `T_max` counts steps) are never reported. A step under an `if`
        (`if (i + 1) % steps_per_epoch == 0`) is taken as deliberate, and so is a loop whose
        header mentions epochs (full-batch training, where a step is an epoch). The old
        `scheduler.step(epoch)` sets the rate from the epoch it is given and is fine.
    """

    id = "TV031"
    title = "epoch scheduler stepped every batch"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "move scheduler.step() after the batch loop (once per epoch)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for step, qual in schedulers.scheduler_steps(ctx):
            if qual != LR + "ReduceLROnPlateau" and (step.args or step.kwargs):
                continue  # `scheduler.step(epoch)` follows the epoch it is given
            built = schedulers.constructor(ctx, step.receiver)
            if built is None or built.has_splat or not _counts_epochs(ctx, qual, built):
                continue
            body = _per_batch_body(ctx, step)
            if body is None or schedulers.is_conditional(step.node, body):
                continue
            name = qual.rsplit(".", 1)[-1]
            effect = ("its patience counts noisy batches, so the rate is cut almost at once"
                      if name == "ReduceLROnPlateau" else
                      "the learning rate decays hundreds of times too fast")
            yield ctx.finding(step.node, f"`{ctx.text(step.node)}` runs every batch but "
                              f"this {name} counts epochs: {effect}")


def _counts_epochs(ctx: Context, qual: str, built: Call) -> bool:
    if qual == LR + "ReduceLROnPlateau":
        return True
    if qual == LR + "StepLR":
        return _epoch_count(ctx, built.arg(1, "step_size"), limit=100)
    if qual == LR + "MultiStepLR":
        milestones = unwrap(ctx.resolve(built.arg(1, "milestones")))
        if milestones is not None and milestones.type in ("list", "tuple"):
            items = milestones.named_children
            return bool(items) and all(_epoch_count(ctx, i, limit=500) for i in items)
        return _epoch_count(ctx, milestones, limit=500)
    if qual == LR + "ExponentialLR":
        gamma = unwrap(ctx.resolve(built.arg(1, "gamma")))
        return gamma is not None and gamma.type == "float" and float(ctx.text(gamma)) < 0.999
    if qual == LR + "CosineAnnealingLR":
        return _epoch_count(ctx, built.arg(1, "T_max"), limit=0)
    return False


def _epoch_count(ctx: Context, node: Node | None, limit: int) -> bool:
    """A small integer literal (at most `limit`), or an expression over names that say
    epochs and none that say steps or lengths."""
    node = unwrap(node)
    if node is None:
        return False
    names = [ctx.text(n).lower() for n in identifiers(node)]
    if any("epoch" in n for n in names):
        return not any(word in n for n in names for word in PER_STEP_WORDS)
    value = unwrap(ctx.resolve(node))
    return value is not None and value.type == "integer" and \
        int(ctx.text(value).replace("_", ""), 0) <= limit


def _per_batch_body(ctx: Context, step: Call) -> Node | None:
    """The body that runs once per optimizer step around `step`, when it is one."""
    loops = ctx.loops_around(step.node)
    if loops:
        loop = loops[0]
        if _mentions_epoch(ctx, loop.node) or not any(
                ctx.loops_around(c.node)[:1] == [loop] for c in ctx.calls_in(loop.body)
                if ctx.is_optimizer_step(c)):
            return None
        return loop.body
    function = ctx.function_of(step.node)
    loops = [r.loop for r in ctx.repeats(step.node) if r.loop is not None]
    innermost = [loop for loop in loops if not any(
        other is not loop and loop.contains(other.node) for other in loops)]
    if function.kind != "function" or not innermost or any(
            _mentions_epoch(ctx, loop.node) for loop in innermost):
        return None
    direct = [c for c in ctx.calls_in(function.node) if ctx.is_optimizer_step(c)
              and ctx.function_of(c.node) is function and not ctx.loops_around(c.node)]
    return function.body if direct else None


def _mentions_epoch(ctx: Context, loop: Node) -> bool:
    """Whether a loop's header (not its body) names epochs."""
    body = loop.child_by_field_name("body")
    header = loop.text[:body.start_byte - loop.start_byte] if body is not None else loop.text
    return b"epoch" in header.lower()
