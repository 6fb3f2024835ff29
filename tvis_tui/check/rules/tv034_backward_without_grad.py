"""TV034: backward() on a loss computed with autograd switched off."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.project import FunctionRef
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap


class BackwardWithoutGrad(Rule):
    """`loss.backward()` runs inside `torch.no_grad()` / `inference_mode()`.

    What it does:
        Finds `backward()` (also `scaler.scale(loss).backward()`,
        `accelerator.backward(loss)`) where gradients are disabled: inside `with
        torch.no_grad():`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`, a
        function decorated with one of them, or a function only ever called under one; and
        the loss itself was computed there too. A call made with gradients disabled of a
        function that computes its own loss and calls backward() is reported at the call.
    Why is this bad:
        A loss computed without autograd has no graph, so `backward()` raises
        `RuntimeError: element 0 of tensors does not require grad` — often only after the
        first epoch, when the code path that holds it (a fine-tuning phase, a validation
        step reused for training) is first reached, with the GPU time already spent.
    Example:
        @torch.no_grad()
        def adapt(model, optimizer, x, y):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    Use instead:
        def adapt(model, optimizer, x, y):
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    Known limits:
        A closure defined in a no_grad function is not reported (it runs where it is
        called). A loss passed in as a parameter is not followed; calls are followed one level. `torch.enable_grad()` (or
        `set_grad_enabled(True)`) inside the disabled region turns gradients back on and
        is respected. `torch.set_grad_enabled(False)` written as a statement counts for
        what follows it in its block (and in functions called only from there); one in an
        `if` arm the backward is not in leaves the mode unknown, and nothing is reported.
    """

    id = "TV034"
    title = "backward() with gradients disabled"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "compute the loss and call backward() outside torch.no_grad()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("backward", "manual_backward"):
            if not ctx.is_backward(call) or not ctx.grad_disabled(call.node) or \
                    _closure_of_disabled(ctx, call.node):
                continue
            if _computed_without_grad(ctx, _loss_of(ctx, call), call.node):
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` runs with gradients "
                                  "disabled (no_grad / inference_mode): the loss has no "
                                  "graph and backward() raises")
        for call in ctx.calls:
            if call.name in ctx.project.functions:
                inner = _backward_inside(ctx, call)
                if inner is not None and ctx.grad_disabled(call.node):
                    yield ctx.finding(call.node, f"`{ctx.text(call.func)}()` computes a loss "
                                      f"and calls backward() ({inner}) but runs here with "
                                      "gradients disabled: backward() raises")


def _backward_inside(ctx: Context, call: Call) -> str | None:
    """`path line N` of a backward() in a function `call` runs whose loss that function
    computes itself with gradients on (so only this caller's no_grad breaks it)."""
    for ref in ctx.project.callees(ctx.file, call):
        key = ("own_backward", id(ref.region.node))
        if key not in ctx.project.memo:
            ctx.project.memo[key] = _own_backward(ctx, ref)
        if ctx.project.memo[key] is not None:
            return ctx.project.memo[key]
    return None


def _own_backward(ctx: Context, ref: FunctionRef) -> str | None:
    if b"backward" not in ref.region.node.text:  # cheap: most called functions never do
        return None
    inner = Context(ctx.project, ref.file, ctx.rule)
    for candidate in inner.calls_in(ref.region.node):
        if inner.function_of(candidate.node) is not ref.region or \
                not inner.is_backward(candidate) or inner.grad_disabled(candidate.node) \
                or _enables_grad(inner, candidate.node):
            continue
        loss = _loss_of(inner, candidate)
        if loss is not None and (loss.type != "identifier" or
                                 inner.latest_binding(loss, candidate.node)):
            return f"{ref.file.path} line {candidate.line}"
    return None


def _closure_of_disabled(ctx: Context, node: Node) -> bool:
    """A nested function (an optimizer closure) whose no_grad comes from the function it is
    defined in: it runs when it is called (`LBFGS.step` re-enables gradients), not there."""
    own = ctx.function_of(node)
    if own.kind != "function" or ctx.function_of(own.node).kind != "function":
        return False
    for region in ctx.index.region_at(node).ancestors():
        if region is own:
            return True
        if region.kind == "with" and any(
                ctx.qualname(c.func) in kinds.NO_GRAD_CONTEXTS
                for c in ctx.calls_in(region.node.child(1))):
            return False
    return True


def _enables_grad(ctx: Context, node: Node) -> bool:
    return any(qual in kinds.GRAD_ENABLING_CONTEXTS or qual == "torch.set_grad_enabled"
               for qual in ctx.context_managers(node))


def _loss_of(ctx: Context, call: Call) -> Node | None:
    """The loss expression a backward call differentiates."""
    loss = call.receiver if call.method == "backward" and not call.args else call.arg(0)
    loss = unwrap(loss)
    inner = ctx.call_at(loss)
    if inner is not None and inner.method == "scale" and inner.args:  # scaler.scale(loss)
        return unwrap(inner.args[0])
    return loss


def _computed_without_grad(ctx: Context, loss: Node | None, at: Node) -> bool:
    """Whether `loss` was computed where gradients are disabled too: inline at `at`, or
    bound by an assignment that is itself under no_grad."""
    if loss is None:
        return False
    if loss.type != "identifier":
        return loss.type in ("call", "binary_operator", "unary_operator")
    binding = ctx.latest_binding(loss, at)
    return binding is not None and binding[1] is not None and ctx.grad_disabled(binding[0])
