"""TV025: the same host tensor is copied to the device on every training iteration."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call, Region
from tvis_tui.check.invariance import invariant_in
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import mentions, unwrap

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
        optimizer is not invariant, nor is data that calls anything but a pure function
        (`random.random()`, `sched.get_last_lr()`). Tensors made on the device
        (`torch.ones(n, device=device)`, `torch.randn(...)`) copy nothing and are not
        reported. `torch.tensor(1e-6, device=device)` is: PyTorch builds the number on the
        host and copies it with a blocking copy, which waits for the GPU's queued work.
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
            elif ctx.qualname(call.func) in LITERAL_SOURCES and _built_on_host(ctx, call) and \
                    _data_invariant(ctx, call, loop):
                yield ctx.finding(call.node, _rebuilt_message(ctx, call))


def _training_loop(ctx: Context, node: Node) -> Region | None:
    loops = ctx.loops_around(node)
    return loops[0] if loops and ctx.loop_trains(loops[0]) else None


def _moves_to_device(ctx: Context, call: Call) -> bool:
    if call.method == "cuda":
        return True
    target = call.arg(0, "device")
    return target is not None and not call.has_splat and _names_accelerator(ctx, target)


def _names_accelerator(ctx: Context, target: Node) -> bool:
    """`device` / `"cuda"`, not a dtype (`torch.float16`) nor the CPU (`"cpu"`, or a name
    assigned once from `"cpu"` / `torch.device("cpu")`)."""
    qual = ctx.qualname(target) or ""
    if (qual.startswith("torch.") and qual != "torch.device") or "cpu" in ctx.text(target):
        return False
    value = unwrap(ctx.resolve(target))
    made = ctx.call_at(value)
    if made is not None and ctx.qualname(made.func) == "torch.device":
        value = unwrap(made.arg(0, "type"))
    return not (value is not None and value.type == "string" and
                "".join(ctx.text(part) for part in value.named_children
                        if part.type == "string_content").startswith("cpu"))


def _built_on_host(ctx: Context, call: Call) -> bool:
    """`torch.tensor(data, device=cuda)` copies `data` from the host; not when the device is
    the CPU, nor when `data` is a name already made on the device (a device-side copy)."""
    device = call.kwargs.get("device")
    if device is None or call.has_splat or not _names_accelerator(ctx, device):
        return False
    data = unwrap(call.arg(0, "data"))
    if data is None or data.type != "identifier":
        return True
    latest = ctx.latest_binding(data, call.node)
    made = ctx.call_at(latest[1] if latest is not None else ctx.value_of(data))
    return made is None or not ("device" in made.kwargs or
                                (made.method in ("to", "cuda") and _moves_to_device(ctx, made)))


def _data_invariant(ctx: Context, call: Call | None, loop: Region) -> bool:
    """The values `torch.tensor(data, ...)` is built from are the same on every iteration
    (its `device=` or `dtype=` are not data: `torch.device("cuda")` there is no change)."""
    data = call.arg(0, "data") if call is not None and not call.has_splat else None
    return data is not None and invariant_in(ctx, data, loop)


def _rebuilt_message(ctx: Context, call: Call) -> str:
    data = unwrap(call.arg(0, "data"))
    if data is not None and data.type == "unary_operator":
        data = unwrap(data.named_children[-1])
    if data is not None and data.type in ("integer", "float"):
        # A Python number is passed to kernels as an argument: no copy, no wait.
        return ("this constant is built on the host and copied to the device, waiting for "
                "the GPU, on every iteration; use the Python number itself or make the "
                "tensor once before the loop")
    return "this constant tensor is rebuilt and copied to the device on every iteration"


def _invariant_host_tensor(ctx: Context, receiver: Node | None, loop: Region) -> bool:
    receiver = unwrap(receiver)
    if receiver is None:
        return False
    if receiver.type == "call":
        return ctx.qualname(receiver.child_by_field_name("function")) in LITERAL_SOURCES \
            and _data_invariant(ctx, ctx.call_at(receiver), loop)
    if receiver.type != "identifier" or not invariant_in(ctx, receiver, loop):
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
