"""TV039: float16 autocast on CUDA for training, with no GradScaler anywhere."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap

AUTOCASTS = frozenset({"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast",
                       "torch.amp.autocast_mode.autocast",
                       "torch.cuda.amp.autocast_mode.autocast"})
CUDA_ONLY = frozenset({"torch.cuda.amp.autocast", "torch.cuda.amp.autocast_mode.autocast"})
FLOAT16 = frozenset({"torch.float16", "torch.half"})
SCALING_LIBRARIES = ("accelerate", "deepspeed", "apex", "lightning", "pytorch_lightning",
                     "transformers.Trainer", "fairscale")
"""Libraries that scale the loss themselves when they run the backward pass."""


class Fp16AutocastWithoutScaler(Rule):
    """Training under float16 autocast on CUDA without a GradScaler.

    What it does:
        Finds `torch.autocast("cuda")` / `torch.cuda.amp.autocast()` with float16 (their
        default on CUDA) around code whose iteration runs backward(), when no
        `GradScaler` is created and no `.scale()` is called anywhere in the checked files,
        and no library that scales losses itself (Accelerate, DeepSpeed, Lightning, apex)
        is imported.
    Why is this bad:
        float16 cannot represent values below about 6e-8: small gradients flush to zero
        in the backward pass, so layers stop learning, and the loss plateaus or goes NaN
        a few thousand steps in. GradScaler multiplies the loss before backward to keep
        gradients in range and skips the steps that overflow.
    Example:
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
    Use instead:
        scaler = torch.amp.GradScaler("cuda")
        for x, y in loader:
            optimizer.zero_grad()
            with torch.autocast("cuda", dtype=torch.float16):
                loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
    Known limits:
        bfloat16 (which needs no scaler) and a device or dtype the code does not spell
        out (a variable set from the command line) are not reported; nor is autocast used
        only for evaluation.
    """

    id = "TV039"
    title = "float16 autocast training without GradScaler"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "scale the loss with torch.amp.GradScaler('cuda'), or use dtype=torch.bfloat16"

    def check(self, ctx: Context) -> Iterator[Finding]:
        casts = [c for c in ctx.calls_named("autocast") if _fp16_on_cuda(ctx, c)]
        if not casts or _scales_anywhere(ctx):
            return
        for cast in casts:
            if _iteration_runs_backward(ctx, cast.node):
                yield ctx.finding(cast.node, f"`{ctx.text(cast.func)}` trains in float16 "
                                  "on CUDA without a GradScaler: small gradients underflow "
                                  "to zero")


def _fp16_on_cuda(ctx: Context, call: Call) -> bool:
    qual = ctx.qualname(call.func)
    if qual not in AUTOCASTS or call.has_splat:
        return False
    cuda_only = qual in CUDA_ONLY
    enabled = call.arg(0 if cuda_only else 2, "enabled")
    if enabled is not None and ctx.text(unwrap(ctx.resolve(enabled))) != "True":
        return False
    if not cuda_only and _string(ctx, call.arg(0, "device_type")) != "cuda":
        return False
    dtype = call.arg(1, "dtype")
    return dtype is None or ctx.qualname(unwrap(ctx.resolve(dtype))) in FLOAT16


def _string(ctx: Context, node: Node | None) -> str | None:
    """The value of a plain string literal (followed through a name assigned once)."""
    node = unwrap(ctx.resolve(node))
    if node is None or node.type != "string" or any(
            c.type == "interpolation" for c in node.named_children):
        return None
    return ctx.text(node).strip("'\"")


def _scales_anywhere(ctx: Context) -> bool:
    """A GradScaler, a `.scale(...)` call or a loss-scaling library in the checked files."""
    for fm in ctx.project.files:
        calls = fm.index.calls_by_name
        if calls.get("GradScaler") or calls.get("ShardedGradScaler") or any(
                c.receiver is not None for c in calls.get("scale", [])):
            return True
        if any(module.startswith(SCALING_LIBRARIES) for module in fm.symbols.imports.values()):
            return True
    return False


def _iteration_runs_backward(ctx: Context, node: Node) -> bool:
    """Whether the loop iteration (or function) around `node` calls backward() itself."""
    if ctx.grad_disabled(node):
        return False
    loops = ctx.loops_around(node)
    function = ctx.function_of(node)
    if not loops and function.kind != "function":
        return False  # module level outside loops: no iteration to speak of
    scope = loops[0].body if loops else function.node
    return any(ctx.is_backward(c) and ctx.function_of(c.node) is function
               for c in ctx.calls_in(scope))
