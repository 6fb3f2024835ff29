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
        A dtype chosen at run time with float16 among the choices (`'bfloat16' if
        torch.cuda.is_bf16_supported() else 'float16'`, looked up in a dict of dtypes) is
        reported too: on a GPU without bfloat16 (V100, T4) it trains in float16. An
        autocast assigned to a name is checked where `with name:` enters it.
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
        found = ((c, _fp16_on_cuda(ctx, c)) for c in ctx.calls_named("autocast"))
        casts = [(c, fp16) for c, fp16 in found if fp16]
        if not casts or _scales_anywhere(ctx):
            return
        for cast, fp16 in casts:
            if any(_iteration_runs_backward(ctx, node) for node in _entered_at(ctx, cast)):
                where = "" if fp16 == ALWAYS else " where the GPU has no bfloat16 (V100, T4)"
                yield ctx.finding(cast.node, f"`{ctx.text(cast.func)}` trains in float16 "
                                  f"on CUDA{where} without a GradScaler: small gradients "
                                  "underflow to zero")


ALWAYS, SOMETIMES = "always", "sometimes"


def _fp16_on_cuda(ctx: Context, call: Call) -> str | None:
    """ALWAYS where the autocast is float16 on CUDA, SOMETIMES where float16 is one of the
    dtypes the script picks from at run time (nanoGPT's `'bfloat16' if
    torch.cuda.is_bf16_supported() else 'float16'`), else None."""
    qual = ctx.qualname(call.func)
    if qual not in AUTOCASTS or call.has_splat:
        return None
    cuda_only = qual in CUDA_ONLY
    enabled = call.arg(0 if cuda_only else 2, "enabled")
    if enabled is not None and ctx.text(unwrap(ctx.resolve(enabled))) != "True":
        return None
    if not cuda_only and _string(ctx, call.arg(0, "device_type")) != "cuda":
        return None
    dtype = call.arg(1, "dtype")
    if dtype is None or ctx.qualname(unwrap(ctx.resolve(dtype))) in FLOAT16:
        return ALWAYS
    return SOMETIMES if _may_be_fp16(ctx, dtype) else None


def _may_be_fp16(ctx: Context, node: Node | None, depth: int = 0) -> bool:
    """Whether float16 is among what `node` chooses from: a branch of a conditional, or a
    value of the dict it indexes (`{'float16': torch.float16, ...}[dtype]`) whose key the
    index may be."""
    node = unwrap(ctx.resolve(node))
    if node is None or depth > 4:
        return False
    if ctx.qualname(node) in FLOAT16 or _string(ctx, node) == "float16":
        return True
    if node.type == "conditional_expression":
        return any(_may_be_fp16(ctx, branch, depth + 1) for branch in node.named_children[:3:2])
    if node.type == "subscript":
        table = unwrap(ctx.resolve(node.child_by_field_name("value")))
        if table is not None and table.type == "dictionary" and _may_be_fp16(
                ctx, node.child_by_field_name("subscript"), depth + 1):
            return any(ctx.qualname(unwrap(pair.child_by_field_name("value"))) in FLOAT16
                       for pair in table.named_children if pair.type == "pair")
    return False


def _entered_at(ctx: Context, call: Call) -> list[Node]:
    """Where the autocast runs: the call itself, or the bodies of the `with ctx:`
    statements that enter the name it is assigned to (alone, or as a branch of a
    conditional: `ctx = nullcontext() if cpu else autocast(...)`)."""
    node = call.node
    while node.parent is not None and node.parent.type in ("conditional_expression", "parenthesized_expression"):
        node = node.parent
    parent = node.parent
    target = parent.child_by_field_name("left") if parent is not None and parent.type == "assignment" else None
    if target is None or target.type != "identifier":
        return [call.node]
    name = ctx.text(target)
    # The body: `with torch.no_grad(), ctx:` is an evaluation, under its own no_grad.
    return [w.node.child_by_field_name("body") for w in ctx.index.withs
            if name in _entered(ctx, w.node)] or [call.node]


def _entered(ctx: Context, with_statement: Node) -> list[str]:
    """The text of each context manager a `with` statement enters."""
    clause = next((c for c in with_statement.named_children if c.type == "with_clause"), None)
    items = [i for i in clause.named_children if i.type == "with_item"] if clause is not None else []
    return [ctx.text(unwrap(item.child_by_field_name("value"))) for item in items]


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
