"""TV028: the random generators are re-seeded with the same value inside the training loop."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds, training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import identifiers

SEEDING = frozenset({"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all",
                     "torch.random.manual_seed", "numpy.random.seed", "random.seed"})
SEEDING_NAMES = frozenset({"seed_everything", "set_seed"})


class ReseedInLoop(Rule):
    """Re-seeding every step or epoch replays the same random numbers each time.

    What it does:
        Finds `torch.manual_seed(s)`, `np.random.seed(s)`, `random.seed(s)`,
        `seed_everything(s)` / `set_seed(s)` inside the per-step training loop, in the
        loop that directly runs it (the epoch loop), or in a function called on every
        step, when `s` does not change from one iteration to the next. A loop that also
        builds a new model or optimizer (a sweep or restart) is not reported.
    Why is this bad:
        Each iteration restarts the generators at the same state: every step draws the
        same dropout masks and noise, and every epoch shuffles the data in the same order
        (the DataLoader draws its shuffle from torch's generator). Regularisation that
        relies on fresh randomness quietly stops working.
    Example:
        for epoch in range(epochs):
            torch.manual_seed(42)
            for x, y in loader:
                train_step(x, y)
    Use instead:
        torch.manual_seed(42)
        for epoch in range(epochs):
            for x, y in loader:
                train_step(x, y)
    Known limits:
        A seed that depends on the loop (`seed + epoch`) or on a parameter of the called
        function is not reported, nor is `torch.Generator().manual_seed()` (often a
        deliberate fixed generator).
    """

    id = "TV028"
    title = "random seed reset inside the training loop"
    severity = Severity.WARNING
    category = Category.CONVERGENCE
    fix = "seed once before the training loop"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("manual_seed", "manual_seed_all", "seed", *SEEDING_NAMES):
            if not _is_seeding(ctx, call) or call.has_splat:
                continue
            loops = ctx.loops_around(call.node)
            if loops:
                fires = _runs_steps(ctx, loops[0]) and \
                    _invariant(ctx, call.node, loops[0].node) and not _restarts(ctx, loops[0])
            else:
                fires = training.runs_every_step(ctx.project, ctx.file, call.node) and \
                    _invariant(ctx, call.node, ctx.function_of(call.node).node) and \
                    not any(r.loop is not None and training.reaches(
                        ctx.project, r.file, r.loop.body, _builds_run)
                        for r in ctx.repeats(call.node))
            if fires:
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` resets the generator "
                                  "to the same state on every iteration of the training loop")


def _is_seeding(ctx: Context, call: Call) -> bool:
    if call.method is None and call.name in SEEDING_NAMES:
        return True
    return ctx.qualname(call.func) in SEEDING or \
        (ctx.qualname(call.func) or "").endswith((".seed_everything", ".set_seed"))


def _runs_steps(ctx: Context, loop: Region) -> bool:
    """The loop is the step loop, or the loop right around it (an epoch loop): every
    training loop it holds is a step loop, and so is every loop it reaches by a call."""
    project, fm = ctx.project, ctx.file
    if not ctx.loop_trains(loop):
        return False
    if training.is_step_loop(project, fm, loop):
        return True
    inner = [other for other in fm.index.loops
             if other is not loop and loop.contains(other.node) and ctx.loop_trains(other)]
    if inner:
        return all(training.is_step_loop(project, fm, other) and
                   ctx.loops_around(other.node)[:1] == [loop] for other in inner)
    return not ctx.reaches(loop.body, _nested_training_loops)


def _nested_training_loops(project: Project, fm: FileModel, node: Node) -> bool:
    """A training loop inside `node` that is not a step loop (an epoch loop in a callee)."""
    return any(node.start_byte <= loop.start and loop.end <= node.end_byte and
               training.loop_trains(project, fm, loop) and
               not training.is_step_loop(project, fm, loop) for loop in fm.index.loops)


def _invariant(ctx: Context, node: Node, scope: Node) -> bool:
    """No name in `node` is a parameter or is assigned inside `scope` (the loop, or the
    function called once per step)."""
    for name in identifiers(node):
        if ctx.symbols.is_parameter(name) and ctx.function_of(name).node == scope:
            return False
        for target, _ in ctx.symbols.bindings_of(name) or ():
            if scope.start_byte <= target.start_byte < scope.end_byte:
                return False
    return True


def _restarts(ctx: Context, loop: Region) -> bool:
    """The loop builds an optimizer or a model (itself or in a function it calls): each
    iteration is a fresh training run, seeded the same way on purpose."""
    return ctx.reaches(loop.body, _builds_run)


def _builds_run(project: Project, fm: FileModel, node: Node) -> bool:
    for call in fm.index.calls_in(node):
        qual = fm.symbols.qualname(call.func)
        if qual is not None and (kinds.is_optimizer_class(qual) or
                                 project.is_model(fm, call.node)):
            return True
    return False
