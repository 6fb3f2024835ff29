"""TV008: an evaluation loop that runs the model with autograd on."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.rule import Rule
from tvis_tui.check.training import trains_directly

GRAD_OFF_CALLS = frozenset({"torch.set_grad_enabled", "torch.autograd.set_grad_enabled"})


class EvalWithoutNoGrad(Rule):
    """The model is put in eval mode and run in a loop, but autograd still records.

    What it does:
        After `model.eval()`, finds a loop or comprehension in the same function that calls
        the model, never runs backward() or an optimizer step, and is not under
        `torch.no_grad()`, `torch.inference_mode()` or a decorator/caller that disables
        gradients.
    Why is this bad:
        `eval()` only switches dropout and batch-norm behaviour; it does not stop autograd.
        Every forward pass builds a graph and keeps activations: evaluation uses several
        times the memory it needs (often the cause of OOM at validation time) and runs
        slower.
    Example:
        model.eval()
        for x, y in val_loader:
            correct += (model(x).argmax(1) == y).sum().item()
    Use instead:
        model.eval()
        with torch.no_grad():
            for x, y in val_loader:
                correct += (model(x).argmax(1) == y).sum().item()
    Known limits:
        Needs the `model.eval()` call and the loop in the same function. Loops that
        compute gradients on purpose (adversarial examples, saliency) run backward() and
        are not reported. A model frozen with `requires_grad_(False)` is not reported.
    """

    id = "TV008"
    title = "evaluation loop without torch.no_grad()"
    severity = Severity.WARNING
    category = Category.WASTED_COMPUTE
    fix = "wrap the evaluation loop in `with torch.no_grad():` (or torch.inference_mode())"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for switch in ctx.calls_named("eval"):
            if switch.method != "eval" or switch.args or switch.kwargs or switch.receiver is None:
                continue
            model = ctx.text(switch.receiver)
            function = ctx.function_of(switch.node)
            for loop in _loops_after(ctx, switch, function):
                forward = _model_call(ctx, loop, model)
                if forward is not None and not ctx.reaches(loop, trains_directly) and \
                        not ctx.grad_disabled(forward.node) and \
                        not _grad_turned_off(ctx, function, model, loop):
                    yield ctx.finding(forward.node, f"`{model}` is evaluated in a loop with "
                                      "autograd on: wrap the loop in torch.no_grad()")


def _loops_after(ctx: Context, switch: Call, function: Region) -> list[Node]:
    """Outermost loops and comprehensions of `function` after `switch`, before `.train()`."""
    model = ctx.text(switch.receiver)
    ends = [c.node.start_byte for c in ctx.calls_named("train")
            if ctx.text(c.receiver) == model and c.node.start_byte > switch.node.end_byte
            and ctx.function_of(c.node) is function]
    start, stop = switch.node.end_byte, min(ends, default=function.end)
    candidates = sorted([loop.node for loop in ctx.index.loops] + ctx.index.comprehensions,
                        key=lambda n: (n.start_byte, -n.end_byte))
    found: list[Node] = []
    for node in candidates:
        if start <= node.start_byte < stop and ctx.function_of(node) is function and \
                not any(outer.start_byte <= node.start_byte < outer.end_byte for outer in found):
            found.append(node)
    return found


def _model_call(ctx: Context, loop: Node, model: str) -> Call | None:
    for call in ctx.calls_in(loop):
        if ctx.text(call.func) == model or (call.method == "forward"
                                             and ctx.text(call.receiver) == model):
            return call
    return None


def _grad_turned_off(ctx: Context, function: Region, model: str, loop: Node) -> bool:
    """`torch.set_grad_enabled(False)` or `model.requires_grad_(False)` before the loop."""
    for call in ctx.calls_in(function.node):
        if call.node.start_byte >= loop.start_byte:
            break
        if ctx.qualname(call.func) in GRAD_OFF_CALLS and call.args and \
                ctx.text(call.args[0]) == "False":
            return True
        if call.method == "requires_grad_" and ctx.text(call.receiver) == model:
            return True
    return False
