"""TV038: gradients clipped before backward() has produced them."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule

CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


class ClipBeforeBackward(Rule):
    """`clip_grad_norm_()` runs before `backward()` in the same iteration.

    What it does:
        Finds `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_` that, within one loop
        iteration (or one function), comes before every backward() of that iteration,
        directly or through a called function.
    Why is this bad:
        Clipping acts on the gradients that are there when it runs: the zeros left by
        `zero_grad()`, or the previous step's. The gradients backward() then computes are
        applied unclipped, so the protection against exploding gradients that the script
        relies on does nothing, and a loss spike can still blow up training.
    Example:
        for x, y in loader:
            optimizer.zero_grad()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            loss_fn(model(x), y).backward()
            optimizer.step()
    Use instead:
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
    Known limits:
        A clip followed by an optimizer step before the backward (a step deferred to the
        next iteration) is not reported. Compares source order inside the innermost loop (or function) around the clip; a
        backward() in another function is seen only when that function is called from
        the same iteration.
    """

    id = "TV038"
    title = "gradient clipping before backward()"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "clip after backward() and before optimizer.step()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for clip in ctx.calls_named(*CLIPS):
            if not (ctx.qualname(clip.func) or "").startswith("torch.nn.utils."):
                continue
            scope = _iteration(ctx, clip.node)
            if scope is None:
                continue
            function = ctx.function_of(clip.node)
            later = [c.node.start_byte for c in ctx.calls_in(scope)
                     if ctx.function_of(c.node) is function and _runs_backward(ctx, c)]
            if later and min(later) > clip.node.end_byte and \
                    not _step_between(ctx, scope, clip.node.end_byte, min(later)):
                yield ctx.finding(clip.node, f"`{ctx.text(clip.func)}` runs before "
                                  "backward() in the same iteration: it clips stale "
                                  "gradients and the new ones are applied unclipped")


def _iteration(ctx: Context, node: Node) -> Node | None:
    """The body that runs once per iteration around `node`: its innermost loop's, else its
    function's (None at module level outside loops, where "one iteration" means nothing)."""
    loops = ctx.loops_around(node)
    if loops:
        return loops[0].body
    function = ctx.function_of(node)
    return function.node if function.kind == "function" else None


def _step_between(ctx: Context, scope: Node, start: int, end: int) -> bool:
    """An optimizer step between the clip and the backward: the clip belongs to a step
    deferred to the next iteration (applied to the previous iteration's gradients)."""
    return any(start <= c.node.start_byte < end and ctx.is_optimizer_step(c)
               for c in ctx.calls_in(scope))


def _runs_backward(ctx: Context, call: Call) -> bool:
    if ctx.is_backward(call):
        return True
    if call.name in ctx.project.functions or call.name in ctx.project.classes:
        return ctx.reaches(call.node, _backward_directly)
    return False


def _backward_directly(project: Project, fm: FileModel, node: Node) -> bool:
    return any(training.is_backward(project, fm, c) for c in fm.index.calls_in(node))
