"""TV004: gradient accumulation that does not divide the loss by the number of micro-steps."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.graph import is_graph_source
from tvis_tui.check.index import Call, Region
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import enclosing, identifiers, text, unwrap

REDUCTIONS = frozenset({"mean", "sum", "squeeze", "float", "to"})


class UnscaledAccumulation(Rule):
    """Gradients are accumulated over several backward() calls but the loss is not divided.

    What it does:
        Finds a loop where `optimizer.step()` runs only every k-th iteration (guarded by
        `i % k == 0` or a counter compared to a limit) while `backward()` runs every
        iteration, and the loss passed to `backward()` is the raw loss, not `loss / k`.
    Why is this bad:
        Accumulated gradients are summed, so each step applies k times the gradient of one
        batch: the effective learning rate is multiplied by k, which diverges or silently
        changes the tuned hyper-parameters whenever k changes.
    Example:
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    Use instead:
        for i, (x, y) in enumerate(loader):
            loss = criterion(model(x), y) / accum_steps
            loss.backward()
            if (i + 1) % accum_steps == 0:
                optimizer.step()
                optimizer.zero_grad()
    Known limits:
        Reports only when the loss provably comes straight from a model or loss call; any
        division or multiplication on the way (`loss / k`, `loss * (1 / k)`, a scale factor
        in a variable) counts as scaling, and so does a `backward(gradient=w)` weight other
        than one. `accelerator.backward(loss)` scales for you and
        is not reported. A guarded step whose backward() is inside the same `if` (a GAN
        generator trained every n-th batch) is not accumulation.
    """

    id = "TV004"
    title = "gradient accumulation without dividing the loss"
    severity = Severity.WARNING
    category = Category.CONVERGENCE
    fix = "divide the loss by the number of accumulation steps before backward()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        backwards = [c for c in ctx.calls_named("backward") if ctx.is_backward(c)]
        for step, _ in ctx.step_events():
            loops = ctx.loops_around(step.node)
            if not loops:
                continue
            guard = _accumulation_guard(ctx, step.node, loops[0])
            if guard is None:
                continue
            before = [b for b in backwards if loops[0].contains(b.node)
                      and b.node.end_byte <= step.node.start_byte]
            if not before or guard.start_byte <= before[-1].node.start_byte or \
                    _reset_every_iteration(ctx, loops[0], guard):
                continue
            backward = before[-1]
            loss = _loss_of(ctx, backward)
            if loss is not None and _raw_loss(ctx, loss, backward.node):
                yield ctx.finding(backward.node, f"`{ctx.text(loss)}` is accumulated over "
                                  "several backward() calls per optimizer step but not "
                                  "divided by their number")


def _reset_every_iteration(ctx: Context, loop: Region, guard: Node) -> bool:
    """A zero_grad outside the step's `if`: gradients are dropped, not accumulated."""
    return any(not (guard.start_byte <= reset.start_byte < guard.end_byte)
               for reset in ctx.grad_resets(loop.node))


def _loss_of(ctx: Context, backward: Call) -> Node | None:
    """The loss tensor a backward call differentiates (None for accelerator.backward, or
    when a `gradient=` weight other than one scales it: `gradient=torch.tensor(1 / k)`
    divides the gradients as `(loss / k).backward()` would)."""
    if backward.method != "backward" or backward.receiver is None:
        return None
    weight = backward.arg(0, "gradient")
    if weight is not None and not _is_one(ctx, weight):
        return None
    return unwrap(backward.receiver)


def _is_one(ctx: Context, weight: Node) -> bool:
    """`torch.ones_like(loss)`, `torch.tensor(1.0)`: a gradient weight that scales nothing."""
    call = ctx.call_at(weight)
    qual = ctx.qualname(call.func) if call is not None else None
    if qual in ("torch.ones_like", "torch.ones"):
        return True
    return qual == "torch.tensor" and bool(call.args) and \
        text(call.args[0]) in ("1", "1.0", "1.")


def _accumulation_guard(ctx: Context, step: Node, loop: Region) -> Node | None:
    """The `if` inside `loop` whose condition makes `step` run every k-th iteration."""
    node = enclosing(step, "if_statement", stop=("for_statement", "while_statement",
                                                 "function_definition"))
    while node is not None and loop.contains(node):
        condition = node.child_by_field_name("condition")
        consequence = node.child_by_field_name("consequence")
        in_branch = consequence is not None and consequence.start_byte <= step.start_byte \
            < consequence.end_byte
        if in_branch and condition is not None and (
                _has_modulo(condition) or _counts(ctx, condition, loop)):
            return node
        node = enclosing(node, "if_statement", stop=("for_statement", "while_statement",
                                                     "function_definition"))
    return None


def _has_modulo(node: Node) -> bool:
    if node.type == "binary_operator" and text(node.child_by_field_name("operator")) == "%":
        return True
    return any(_has_modulo(child) for child in node.named_children)


def _counts(ctx: Context, condition: Node, loop: Region) -> bool:
    """`if counter >= k:` where `counter += 1` runs in the loop."""
    if condition.type != "comparison_operator":
        return False
    names = {text(n) for n in identifiers(condition)}
    for node in ctx.index.aug_assignments:
        if loop.contains(node) and text(node.child_by_field_name("left")) in names and \
                text(node.child_by_field_name("operator")) == "+=":
            return True
    return False


def _raw_loss(ctx: Context, expr: Node | None, at: Node, depth: int = 0) -> bool:
    """Whether `expr` is provably an unscaled loss: a model/loss call, possibly reduced."""
    expr = unwrap(expr)
    if expr is None or depth > 6:
        return False
    if expr.type == "identifier":
        latest = ctx.latest_binding(expr, at)
        return latest is not None and _raw_loss(ctx, latest[1], latest[0], depth + 1)
    if expr.type == "attribute":  # outputs.loss from a Hugging Face model
        return text(expr.child_by_field_name("attribute")) == "loss" and \
            _raw_loss(ctx, expr.child_by_field_name("object"), at, depth + 1)
    if expr.type == "binary_operator" and text(expr.child_by_field_name("operator")) in "+-":
        # a sum with one raw term is not divided as a whole
        return _raw_loss(ctx, expr.child_by_field_name("left"), at, depth + 1) or \
            _raw_loss(ctx, expr.child_by_field_name("right"), at, depth + 1)
    if expr.type != "call":
        return False
    if is_graph_source(ctx, expr):
        return True
    call = ctx.call_at(expr)
    if call is not None and call.method in REDUCTIONS and call.receiver is not None:
        return _raw_loss(ctx, call.receiver, at, depth + 1)
    if call is not None and call.method == "scale" and len(call.args) == 1:  # GradScaler
        return _raw_loss(ctx, call.args[0], at, depth + 1)
    return call is not None and _helper_returns_raw(ctx, call, depth)


def _helper_returns_raw(ctx: Context, call: Call, depth: int) -> bool:
    """`loss = compute_loss(model, batch)`: every return of the helper is a raw loss."""
    returned = [(ref, value) for ref in ctx.project.callees(ctx.file, call)
                for value in ctx.project.returned(ref)]
    return bool(returned) and all(
        _raw_loss(Context(ctx.project, ref.file, ctx.rule), value, value, depth + 1)
        for ref, value in returned)
