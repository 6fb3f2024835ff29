"""TV034: backward() on a loss computed with autograd switched off."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap


class BackwardWithoutGrad(Rule):
    """`loss.backward()` runs inside `torch.no_grad()` / `inference_mode()`.

    What it does:
        Finds `backward()` (also `scaler.scale(loss).backward()`,
        `accelerator.backward(loss)`) where gradients are disabled: inside `with
        torch.no_grad():`, `torch.inference_mode()`, `torch.set_grad_enabled(False)`, a
        function decorated with one of them, or a function only ever called under one; and
        the loss itself was computed there too.
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
        A loss passed in as a parameter is not followed. `torch.enable_grad()` (or
        `set_grad_enabled(True)`) inside the disabled region turns gradients back on and
        is respected.
    """

    id = "TV034"
    title = "backward() with gradients disabled"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "compute the loss and call backward() outside torch.no_grad()"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("backward", "manual_backward"):
            if not ctx.is_backward(call) or not ctx.grad_disabled(call.node):
                continue
            if _computed_without_grad(ctx, _loss_of(ctx, call), call.node):
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` runs with gradients "
                                  "disabled (no_grad / inference_mode): the loss has no "
                                  "graph and backward() raises")


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
