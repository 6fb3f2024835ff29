"""TV025: the same host tensor is copied to the device on every training iteration."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import identifiers, mentions, unwrap

HOST_TENSORS = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy", "torch.Tensor",
                          "torch.FloatTensor", "torch.LongTensor", "torch.ones", "torch.zeros",
                          "torch.full", "torch.arange", "torch.linspace", "torch.eye",
                          "torch.randn", "torch.rand", "torch.randint", "torch.empty"})
LITERAL_SOURCES = frozenset({"torch.tensor", "torch.as_tensor", "torch.from_numpy",
                             "torch.Tensor", "torch.FloatTensor", "torch.LongTensor"})


class RepeatedTransfer(Rule):
    """A tensor that never changes is copied to the GPU again in every training step.

    What it does:
        In a loop that trains, finds `w.to(device)` / `w.cuda()` where `w` is a tensor
        built on the host before the loop and never reassigned in it, and
        `torch.tensor([...]).to(device)` / `torch.tensor(..., device=device)` built from
        values that do not change in the loop (class weights, masks, constants).
    Why is this bad:
        Every iteration pays a host-to-device copy (and, from pageable memory, a sync) for
        data that is already known: wasted PCIe bandwidth and stalls in the hottest loop
        of the script. Moving it once before the loop costs the same copy a single time.
    Example:
        class_weights = torch.tensor([0.2, 0.8])
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, weight=class_weights.to(device))
    Use instead:
        class_weights = torch.tensor([0.2, 0.8]).to(device)
        for x, y in loader:
            loss = F.cross_entropy(model(x), y, weight=class_weights)
    Known limits:
        Only plain names assigned from a torch constructor in the same function, and
        tensors built inline from literals or unchanged names, are followed; attributes
        (`self.weights.to(...)`) and transfers in functions called from the loop are not
        reported. `.to(dtype)` without a device is not a transfer and is not reported;
        a tensor changed in place in the loop (`w.mul_()`, `w[i] = v`) or trained by an
        optimizer is not invariant.
    """

    id = "TV025"
    title = "loop-invariant tensor moved to the device every iteration"
    severity = Severity.WARNING
    category = Category.WASTED_COMPUTE
    fix = "move the tensor to the device once, before the training loop"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("to", "cuda", "tensor", "as_tensor"):
            loop = _training_loop(ctx, call.node)
            if loop is None:
                continue
            if call.method in ("to", "cuda") and _moves_to_device(ctx, call) and \
                    _invariant_host_tensor(ctx, call.receiver, loop):
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` copies the same host "
                                  "tensor to the device on every iteration")
            elif ctx.qualname(call.func) in LITERAL_SOURCES and "device" in call.kwargs and \
                    _invariant(ctx, call.node, loop):
                yield ctx.finding(call.node, "this constant tensor is rebuilt and copied to "
                                  "the device on every iteration")


def _training_loop(ctx: Context, node: Node) -> Region | None:
    loops = ctx.loops_around(node)
    return loops[0] if loops and ctx.loop_trains(loops[0]) else None


def _moves_to_device(ctx: Context, call: Call) -> bool:
    if call.method == "cuda":
        return True
    target = call.arg(0, "device")
    if target is None or call.has_splat:
        return False
    qual = ctx.qualname(target) or ""
    return not (qual.startswith("torch.") and qual != "torch.device") and \
        "cpu" not in ctx.text(target)


def _invariant_host_tensor(ctx: Context, receiver: Node | None, loop: Region) -> bool:
    receiver = unwrap(receiver)
    if receiver is None:
        return False
    if receiver.type == "call":
        return ctx.qualname(receiver.child_by_field_name("function")) in LITERAL_SOURCES \
            and _invariant(ctx, receiver, loop)
    if receiver.type != "identifier" or not _invariant(ctx, receiver, loop):
        return False
    latest = ctx.latest_binding(receiver, loop.node)
    value = unwrap(latest[1]) if latest is not None else unwrap(ctx.value_of(receiver))
    made = ctx.call_at(value)
    return made is not None and ctx.qualname(made.func) in HOST_TENSORS and \
        "device" not in made.kwargs and "requires_grad" not in made.kwargs and \
        not made.has_splat and not _trained(ctx, receiver)


def _trained(ctx: Context, name: Node) -> bool:
    """`name` is handed to an optimizer or made trainable: its value changes every step."""
    raw = ctx.text(name)
    for call in ctx.calls_named("requires_grad_"):
        if ctx.text(call.receiver) == raw:
            return True
    return any(kinds.is_optimizer_class(ctx.qualname(call.func) or "") and
               mentions(call.node, raw) for call in ctx.calls if call.args)


def _invariant(ctx: Context, node: Node, loop: Region) -> bool:
    """No name used in `node` is assigned inside `loop` (loop variables included), nor
    changed in place there (`w.mul_(...)`, `w[i] = ...`)."""
    names = {ctx.text(name) for name in identifiers(node)}
    for name in identifiers(node):
        for target, _ in ctx.symbols.bindings_of(name) or ():
            if loop.contains(target):
                return False
    for call in ctx.calls_in(loop.node):
        if call.method is not None and call.method.endswith("_") and \
                ctx.text(call.receiver) in names:
            return False
    for assign in ctx.index.assignments:
        left = assign.child_by_field_name("left")
        if loop.contains(assign) and left is not None and left.type == "subscript" and \
                ctx.text(left.child_by_field_name("value")) in names:
            return False
    return True
