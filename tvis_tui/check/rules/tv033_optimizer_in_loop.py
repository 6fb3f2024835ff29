"""TV033: the optimizer is built again on every iteration of the loop that steps it."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.optimizers import Construction, constructions
from tvis_tui.check.rule import Rule
from tvis_tui.check.schedulers import is_conditional
from tvis_tui.check.syntax import dotted, identifiers, mentions, text, unwrap


class OptimizerInLoop(Rule):
    """An optimizer is re-created inside the training loop, losing its state every time.

    What it does:
        Finds `optimizer = Optim(params)` inside a loop whose iteration also steps that
        optimizer (reported as an error), or inside an epoch loop whose batches step it
        (a warning), when the parameters it is given are not themselves new in that
        iteration (a fresh model per fold, an adversarial perturbation per batch).
    Why is this bad:
        Adam's moment estimates, momentum buffers and step counts live in the optimizer.
        Re-creating it throws them away: Adam restarts its bias correction with a full-size
        first update every batch, momentum never builds up, and any scheduler attached to
        the old optimizer no longer changes the learning rate. Training is noisy or diverges.
    Example:
        for x, y in loader:
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    Use instead:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for x, y in loader:
            optimizer.zero_grad()
            loss_fn(model(x), y).backward()
            optimizer.step()
    Known limits:
        Plain SGD without momentum keeps no state and is not reported, nor is a
        construction under an `if` (rebuilt once, when layers are unfrozen). A loop over
        stages, folds or learning rates whose header does not mention epochs is taken as
        deliberate. The construction and the loop must be in the same function.
    """

    id = "TV033"
    title = "optimizer re-created inside the training loop"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "build the optimizer once, before the training loop"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for opt in constructions(ctx):
            loops = ctx.loops_around(opt.call.node)
            if not loops or _stateless(ctx, opt.call) or _fresh_params(ctx, opt, loops[0]) \
                    or is_conditional(opt.call.node, loops[0].body):
                continue  # under an `if`: rebuilt once (an unfreezing epoch), not every time
            loop = loops[0]
            if any(ctx.loops_around(step.node)[:1] == [loop] for step in _steps(ctx, opt, loop)):
                yield ctx.finding(opt.call.node, f"`{opt.name}` is re-created on every "
                                  "iteration of the loop that steps it: its state (moments, "
                                  "momentum, step count) is thrown away each step")
            elif _header_says_epoch(loop) and ctx.runs_step(loop.body):
                yield ctx.finding(opt.call.node, f"`{opt.name}` is re-created every epoch: "
                                  "its moments and momentum restart from zero each epoch",
                                  severity=Severity.WARNING)


def _steps(ctx: Context, opt: Construction, loop: Region) -> list[Call]:
    """`opt.step()` / `scaler.step(opt)` inside the loop."""
    found = []
    for call in ctx.calls_in(loop.body):
        if call.method == "step" and ctx.is_optimizer_step(call):
            stepped = call.args[0] if call.args else call.receiver
            if text(unwrap(stepped)) == opt.name:
                found.append(call)
    return found


def _stateless(ctx: Context, call: Call) -> bool:
    """Plain SGD (no momentum): nothing is lost by building it again."""
    qual = ctx.qualname(call.func) or ""
    momentum = call.kwargs.get("momentum")
    return qual.endswith(".SGD") and not call.has_splat and \
        (momentum is None or text(momentum) in ("0", "0.0"))


def _fresh_params(ctx: Context, opt: Construction, loop: Region) -> bool:
    """Whether what the optimizer is given is bound anew in this loop (its header or body)."""
    params = opt.call.arg(0, "params")
    if params is None:
        return True
    names = set(opt.models) | {text(n) for n in identifiers(params)
                               if n.parent is None or n.parent.type != "attribute"}
    header = loop.node.child_by_field_name("left")
    for name in names:
        if header is not None and mentions(header, name.split(".")[0]):
            return True
        for assign in ctx.index.assignments:
            left = assign.child_by_field_name("left")
            if loop.contains(assign) and left is not None and \
                    (mentions(left, name) or dotted(left) == name):
                return True
    return False


def _header_says_epoch(loop: Region) -> bool:
    body = loop.body
    header = loop.node.text[:body.start_byte - loop.start] if body is not None else b""
    return b"epoch" in header.lower()
