"""TV009: `tensor.to(device)` or `tensor.cuda()` whose result is thrown away."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.graph import is_graph_source
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap

MOVES = frozenset({"to", "cuda", "cpu", "half", "float", "double", "bfloat16", "long", "int",
                   "pin_memory", "contiguous"})
TENSOR_FACTORIES = frozenset({
    "tensor", "as_tensor", "from_numpy", "randn", "rand", "randint", "randperm", "zeros", "ones",
    "empty", "full", "arange", "linspace", "eye", "stack", "cat", "randn_like", "rand_like",
    "zeros_like", "ones_like", "empty_like", "full_like",
})


TENSOR_TYPES = frozenset({"torch.Tensor", "torch.FloatTensor", "torch.LongTensor"})


class DiscardedTo(Rule):
    """A tensor's `.to()` / `.cuda()` result is discarded: tensors are not moved in place.

    What it does:
        Finds a statement that is only `x.to(...)`, `x.cuda()`, `x.half()`, ... where `x`
        is provably a tensor: made by a torch factory (`torch.randn`, `torch.tensor`, ...),
        a batch unpacked from a DataLoader, a model's output, or a parameter annotated
        `torch.Tensor`.
    Why is this bad:
        Unlike `nn.Module.to()`, `Tensor.to()` returns a new tensor and leaves the original
        where it was. The data stays on the CPU (or in the old dtype), so the script either
        crashes with a device mismatch after start-up or silently runs slowly on the CPU.
    Example:
        for x, y in loader:
            x.to(device)
            y.to(device)
            loss = criterion(model(x), y)
    Use instead:
        for x, y in loader:
            x = x.to(device)
            y = y.to(device)
            loss = criterion(model(x), y)
    Known limits:
        Values whose type is not proven (a parameter, an object from another library such
        as a Hugging Face `BatchEncoding`, whose `.to()` is in place) are not reported.
        `model.to(device)` on an nn.Module is correct and never reported.
    """

    id = "TV009"
    title = "tensor .to()/.cuda() result discarded"
    severity = Severity.ERROR
    category = Category.CORRECTNESS
    fix = "assign the result: x = x.to(device)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named(*MOVES):
            parent = call.node.parent
            if call.method is None or parent is None or parent.type != "expression_statement":
                continue
            if not ctx.is_model(call.receiver) and _is_tensor(ctx, call.receiver, call.node):
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` returns a new tensor "
                                  f"and the result is discarded; `{ctx.text(call.receiver)}` "
                                  "is unchanged")


def _is_tensor(ctx: Context, node: Node | None, at: Node, depth: int = 0,
               element: bool = False) -> bool:
    """Whether `node` is provably a tensor; `element` when it is indexed (`batch[0]`)."""
    node = unwrap(node)
    if node is None or depth > 6:
        return False
    if node.type == "subscript":
        return _is_tensor(ctx, node.child_by_field_name("value"), at, depth + 1, element=True)
    if node.type == "call":
        qual = ctx.qualname(node.child_by_field_name("function")) or ""
        return not element and (
            (qual.startswith("torch.") and qual.rsplit(".", 1)[-1] in TENSOR_FACTORIES)
            or is_graph_source(ctx, node))
    if node.type != "identifier":
        return False
    latest = ctx.latest_binding(node, at)
    if latest is None:  # a parameter annotated `x: torch.Tensor`
        return not element and ctx.type_of(node) in TENSOR_TYPES
    target, value = latest
    if value is not None:
        return _is_tensor(ctx, value, target, depth + 1, element)
    return _from_loader(ctx, target, element)


def _from_loader(ctx: Context, target: Node, element: bool) -> bool:
    """Whether `target` holds tensors from `for ... in loader` (or `enumerate(loader)`):
    an unpacked part of the batch (`for x, y in loader`), or the batch when indexed. A whole
    batch may be a dict-like object whose `.to()` works in place (Hugging Face)."""
    for loop in ctx.loops_around(target):
        left = loop.node.child_by_field_name("left")
        if loop.kind != "for" or not left.start_byte <= target.start_byte < left.end_byte:
            continue
        source = unwrap(loop.node.child_by_field_name("right"))
        call = ctx.call_at(source)
        if call is not None and call.name == "enumerate" and call.args:
            source = call.args[0]
            items = left.named_children if left.type in ("pattern_list", "tuple_pattern") else []
            left = items[1] if len(items) == 2 else None
        if left is None or not (element or left != target):
            return False
        return ctx.is_dataloader(source)
    return False
