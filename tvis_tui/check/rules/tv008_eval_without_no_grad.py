"""TV008: an evaluation loop that runs the model with autograd on."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import FunctionRef
from tvis_tui.check.symbols import parameters
from tvis_tui.check.rule import Rule
from tvis_tui.check.trained import freezes
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
        Follows the model one call deep: into a helper the loop hands it to, or a helper
        called after `eval()` that loops over batches itself. Loops that
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
            for call, helper in _evaluating_helpers(ctx, switch, function):
                yield ctx.finding(call.node, f"`{helper}` evaluates `{model}` in a loop with "
                                  "autograd on: wrap the loop in torch.no_grad()")


def _span(ctx: Context, switch: Call, function: Region) -> tuple[int, int]:
    """From `model.eval()` to the next `model.train()` in the same function (or its end)."""
    model = ctx.text(switch.receiver)
    ends = [c.node.start_byte for c in ctx.calls_named("train")
            if ctx.text(c.receiver) == model and c.node.start_byte > switch.node.end_byte
            and ctx.function_of(c.node) is function]
    return switch.node.end_byte, min(ends, default=function.end)


def _evaluating_helpers(ctx: Context, switch: Call, function: Region) -> list[tuple[Call, str]]:
    """Calls after `model.eval()`, outside any loop, of a checked-file helper that is handed
    the model and runs it in a loop of its own with autograd on (`run_batches(model, ...)`)."""
    model = ctx.text(switch.receiver)
    start, stop = _span(ctx, switch, function)
    found = []
    for call in ctx.calls_in(function.node):
        if not start <= call.node.start_byte < stop or ctx.loops_around(call.node) or \
                ctx.function_of(call.node) is not function or ctx.grad_disabled(call.node):
            continue
        if call.name in ctx.project.functions and any(
                ctx.text(arg) == model for arg in [*call.args, *call.kwargs.values()]):
            for ref in ctx.project.callees(ctx.file, call):
                if _helper_loops_over(ctx, call, ref, model):
                    found.append((call, ref.region.name))
                    break
    return found


def _helper_loops_over(ctx: Context, call: Call, ref: FunctionRef, model: str) -> bool:
    inner = Context(ctx.project, ref.file, ctx.rule)
    received = _received(ctx, call, ref, model)
    if any(c.method == "eval" and inner.text(c.receiver) in received
           for c in inner.calls_in(ref.region.node)):
        return False  # the helper switches to eval itself: reported there
    loops = [loop.node for loop in ref.file.index.loops if ref.region.contains(loop.node)]
    loops += [c for c in ref.file.index.comprehensions if ref.region.contains(c)]
    return any(_runs(inner, c, name) and not inner.grad_disabled(c.node)
               and not inner.reaches(loop, trains_directly)
               for loop in loops for c in inner.calls_in(loop) for name in received)


def _loops_after(ctx: Context, switch: Call, function: Region) -> list[Node]:
    """Outermost loops and comprehensions of `function` after `switch`, before `.train()`."""
    start, stop = _span(ctx, switch, function)
    candidates = sorted([loop.node for loop in ctx.index.loops] + ctx.index.comprehensions,
                        key=lambda n: (n.start_byte, -n.end_byte))
    found: list[Node] = []
    for node in candidates:
        if start <= node.start_byte < stop and ctx.function_of(node) is function and \
                not any(outer.start_byte <= node.start_byte < outer.end_byte for outer in found):
            found.append(node)
    return found


def _model_call(ctx: Context, loop: Node, model: str) -> Call | None:
    """The call in `loop` that runs `model` forward: directly, or a checked-file helper that
    is handed the model and calls it (`compute_metrics(model, batch)`)."""
    for call in ctx.calls_in(loop):
        if _runs(ctx, call, model):
            return call
    for call in ctx.calls_in(loop):
        if call.name in ctx.project.functions and any(
                ctx.text(arg) == model for arg in [*call.args, *call.kwargs.values()]):
            if any(_helper_runs_argument(ctx, call, ref, model)
                   for ref in ctx.project.callees(ctx.file, call)):
                return call
    return None


def _runs(ctx: Context, call: Call, model: str) -> bool:
    return ctx.text(call.func) == model or (call.method == "forward"
                                             and ctx.text(call.receiver) == model)


def _helper_runs_argument(ctx: Context, call: Call, ref: FunctionRef, model: str) -> bool:
    """Whether the helper calls the parameter that receives `model` at this call site."""
    received = _received(ctx, call, ref, model)
    inner = Context(ctx.project, ref.file, ctx.rule)
    return any(_runs(inner, c, name) and not inner.grad_disabled(c.node)
               for c in ref.file.index.calls_in(ref.region.node) for name in received)


def _received(ctx: Context, call: Call, ref: FunctionRef, model: str) -> set[str]:
    """The helper's parameter names that receive `model` at this call site."""
    names = [name for name, _, _ in parameters(ref.region)]
    offset = 1 if ref.is_method else 0
    received = {names[i + offset] for i, arg in enumerate(call.args)
                if ctx.text(arg) == model and i + offset < len(names)}
    return received | {key for key, arg in call.kwargs.items() if ctx.text(arg) == model}


def _grad_turned_off(ctx: Context, function: Region, model: str, loop: Node) -> bool:
    """`torch.set_grad_enabled(False)` or a frozen model (`model.requires_grad_(False)`, or
    `p.requires_grad_(False)` for its parameters) before the loop."""
    for call in ctx.calls_in(function.node):
        if call.node.start_byte >= loop.start_byte:
            break
        if ctx.qualname(call.func) in GRAD_OFF_CALLS and call.args and \
                ctx.text(call.args[0]) == "False":
            return True
        if freezes(ctx.file, call) == model:
            return True
    return False
