"""TV036: gradients clipped while still multiplied by the GradScaler's scale."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import text, unwrap

CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


class ClipScaledGradients(Rule):
    """Gradient clipping after `scaler.scale(loss).backward()` without `scaler.unscale_()`.

    What it does:
        In one loop iteration (or one function), finds `torch.nn.utils.clip_grad_norm_` / `clip_grad_value_` that
        runs after a backward of a loss scaled by a `GradScaler` when no
        `scaler.unscale_(optimizer)` runs between that backward and the clip.
    Why is this bad:
        Until `unscale_()`, every gradient is multiplied by the loss scale (65536 at the
        start). Clipping to a norm of 1.0 then cuts the real gradients by a factor of tens of
        thousands: the model barely learns, and as the scale changes the effective learning
        rate changes with it. Nothing errors.
    Example:
        scaler.scale(loss).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    Use instead:
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
    Known limits:
        The scaled backward, the clip and the `unscale_()` must be in the same function.
        A scaler created with `enabled=False` is ignored; one enabled by a flag is not.
        Library clipping (`accelerator.clip_grad_norm_`) unscales by itself and is not
        reported.
    """

    id = "TV036"
    title = "gradient clipping with GradScaler but no unscale_()"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "call scaler.unscale_(optimizer) right before clipping"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for clip in ctx.calls_named(*CLIPS):
            qual = ctx.qualname(clip.func) or ""
            if not qual.startswith("torch.nn.utils."):
                continue
            function = ctx.function_of(clip.node)
            loops = ctx.loops_around(clip.node)
            if not loops and function.kind != "function":
                continue  # module level outside loops: no iteration to pair within
            scope = loops[0].body if loops else function.node  # one iteration's code
            here = [c for c in ctx.calls_in(scope) if ctx.function_of(c.node) is function]
            scaled = [c for c in here if c.node.end_byte <= clip.node.start_byte
                      and _scaler_of_backward(ctx, c) is not None]
            if not scaled:
                continue
            last = scaled[-1].node.end_byte
            if not any(c.method == "unscale_" and last <= c.node.start_byte < clip.node.start_byte
                       for c in here):
                scaler = _scaler_of_backward(ctx, scaled[-1])
                yield ctx.finding(clip.node, f"`{ctx.text(clip.func)}` clips gradients that "
                                  f"are still multiplied by `{ctx.text(scaler)}`'s scale: "
                                  f"call `{ctx.text(scaler)}.unscale_(optimizer)` first")


def _scaler_of_backward(ctx: Context, call: Call) -> Node | None:
    """`scaler` for `scaler.scale(loss).backward()` on an enabled GradScaler."""
    if call.method != "backward":
        return None
    inner = ctx.call_at(call.receiver)
    if inner is None or inner.method != "scale" or inner.receiver is None:
        return None
    if not (ctx.type_of(inner.receiver) or "").endswith("GradScaler"):
        return None
    built = ctx.call_at(ctx.resolve(inner.receiver))
    enabled = built.arg(99, "enabled") if built is not None else None
    if enabled is not None and text(unwrap(enabled)) == "False":
        return None
    return inner.receiver
