"""TV002: backward() in a training loop whose gradients are never reset."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.rule import Rule


class MissingZeroGrad(Rule):
    """Gradients are never reset in the loop that steps the optimizer.

    What it does:
        Finds a `backward()` call whose optimizer step runs in a loop where no gradient
        reset happens: no `optimizer.zero_grad()`, `model.zero_grad()`, `p.grad = None` or
        `p.grad.zero_()`, neither in the loop nor in a function it calls.
    Why is this bad:
        `backward()` adds into `.grad`. Without a reset, every step applies the sum of all
        gradients so far: the effective learning rate grows with each step and training
        diverges or stalls, with no error.
    Example:
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    Use instead:
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
    Known limits:
        The reset may be anywhere in the stepping loop (top, bottom, or inside an
        accumulation `if`). A loop that steps two optimizers and zeroes one, with each
        optimizer's own `zero_grad()`, is reported for the other. Loops that never step an
        optimizer (computing saliency maps)
        are not reported. Frameworks that zero gradients for you (Lightning's
        `training_step`) are not reported.
    """

    id = "TV002"
    title = "backward() in a loop with no zero_grad()"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "call optimizer.zero_grad(set_to_none=True) once per optimizer step"

    def check(self, ctx: Context) -> Iterator[Finding]:
        partly: set[int] = set()  # loops reported for an optimizer left out of their resets
        for call in ctx.calls_named("backward", "manual_backward"):
            if not ctx.is_backward(call):
                continue
            if _unreset(ctx, call):
                yield ctx.finding(call.node, "gradients accumulate across steps: no "
                                             "zero_grad() in the loop that runs "
                                             "optimizer.step()")
                continue
            loop = _stepping_loop(ctx, ctx.loops_around(call.node))
            missed, zeroed = _unzeroed(ctx, loop.body) if loop is not None and id(loop) not in partly else ([], [])
            if missed:
                partly.add(id(loop))
                yield ctx.finding(call.node, f"the loop steps {_names(missed)} but calls zero_grad() "
                                             f"on {_names(zeroed)} only: the gradients "
                                             f"{_names(missed)} applies accumulate across steps")


def _unreset(ctx: Context, call: Call) -> bool:
    """Whether the loop that steps after this backward never resets gradients."""
    loops = ctx.loops_around(call.node)
    if loops:
        return _stepping_loop_unreset(ctx, loops)
    function = ctx.function_of(call.node)
    if function.kind != "function" or ctx.runs_grad_reset(function.node):
        return False
    repeats = ctx.repeats(call.node)
    if not repeats or any(r.loop is None for r in repeats):
        return False
    for r in repeats:
        other = Context(ctx.project, r.file, ctx.rule)
        if _stepping_loop_unreset(other, [r.loop, *_outer(r.loop)]):
            return True
    return False


def _outer(loop: Region) -> list[Region]:
    found = []
    region = loop.parent
    while region is not None and region.kind not in ("function", "class", "module"):
        if region.kind in ("for", "while"):
            found.append(region)
        region = region.parent
    return found


def _stepping_loop(ctx: Context, loops: list[Region]) -> Region | None:
    """The innermost of `loops` that runs an optimizer step."""
    return next((loop for loop in loops if loop.body is not None and ctx.runs_step(loop.body)), None)


def _stepping_loop_unreset(ctx: Context, loops: list[Region]) -> bool:
    """The innermost of `loops` that runs an optimizer step must also reset gradients."""
    loop = _stepping_loop(ctx, loops)
    return loop is not None and not ctx.runs_grad_reset(loop.body) and not _opaque_reset(ctx, loop.body)


def _unzeroed(ctx: Context, body: Node) -> tuple[list[str], list[str]]:
    """Optimizers the loop steps that its resets leave out, where every reset is an
    optimizer's own `zero_grad()` written in the loop (two optimizers, one zeroed: the
    other's gradients accumulate, sweep T). [] where a reset could cover them: a model's
    `zero_grad()`, `p.grad = None`, a function the loop calls that resets. Both lists are
    the optimizers' names: (left out, zeroed)."""
    zeroed = set()
    for reset in ctx.grad_resets(body):
        call = ctx.call_at(reset)
        if call is None or call.method != "zero_grad" or not ctx.is_optimizer(call.receiver):
            return [], []
        zeroed.add(ctx.text(call.receiver))
    calls = ctx.calls_in(body)
    if not zeroed or _opaque_reset(ctx, body) or any(
            ctx.project.callees(ctx.file, c) and ctx.runs_grad_reset(c.node) for c in calls):
        return [], []
    if any(c.args and ctx.is_optimizer(c.receiver) for c in calls if ctx.is_optimizer_step(c)):
        return [], []  # `lbfgs.step(closure)`: the closure may zero its gradients
    stepped = {ctx.text(opt) for opt in _stepped(ctx, body) if ctx.is_optimizer(opt)}
    # Names compared by their last part (`self.opt_g` and its alias `opt_g`); a zeroed one
    # that names no stepped optimizer (`for o in opts: o.zero_grad()`) may be any of them.
    zeroed_last = {_last(name) for name in zeroed}
    if not zeroed_last <= {_last(name) for name in stepped}:
        return [], []
    return sorted(name for name in stepped if _last(name) not in zeroed_last), sorted(zeroed)


def _stepped(ctx: Context, body: Node) -> list[Node]:
    """What each optimizer step in `body` steps: `opt` of `opt.step()` and of
    `scaler.step(opt)`."""
    return [c.receiver if ctx.is_optimizer(c.receiver) or not c.args else c.args[0]
            for c in ctx.calls_in(body) if ctx.is_optimizer_step(c)]


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _names(names: list[str]) -> str:
    return " and ".join(f"`{name}`" for name in names)


def _opaque_reset(ctx: Context, body: Node) -> bool:
    """A call we cannot see into (another library, an untyped object) that is handed the
    optimizer or the model may well reset gradients: stay silent rather than guess."""
    stepped = {ctx.text(opt) for opt in _stepped(ctx, body)}
    for call in ctx.calls_in(body):
        if ctx.project.callees(ctx.file, call) or _torch_call(ctx, call) or \
                ctx.is_optimizer_step(call):
            continue
        for arg in [*call.args, *call.kwargs.values()]:
            if ctx.text(arg) in stepped or ctx.is_optimizer(arg) or ctx.is_model(arg):
                return True
    return False


def _torch_call(ctx: Context, call: Call) -> bool:
    """A torch function, or a method of a torch object (`scaler.step(opt)`): neither resets
    gradients behind our back."""
    if (ctx.qualname(call.func) or "").startswith("torch."):
        return True
    owner = ctx.type_of(call.receiver) if call.receiver is not None else None
    return owner is not None and owner.startswith("torch.")
