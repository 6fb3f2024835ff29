"""TV032: the optimizer holds parameters that are not the ones being trained."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.optimizers import Construction, constructions
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import dotted, unwrap

NEW_OBJECT_CALLS = frozenset({"copy.deepcopy", "torch.load"})
CONTAINERS = frozenset({"Sequential", "ModuleList"})
PARAMETER_FREE = ("Identity", "Dropout", "AlphaDropout", "ReLU", "ReLU6", "LeakyReLU", "GELU",
                  "SiLU", "Mish", "ELU", "SELU", "Tanh", "Sigmoid", "Hardswish", "Hardtanh",
                  "Softmax", "LogSoftmax", "Flatten", "Unflatten", "MaxPool", "AvgPool",
                  "AdaptiveAvgPool", "AdaptiveMaxPool", "Upsample", "ZeroPad", "ConstantPad",
                  "ReflectionPad", "ReplicationPad", "PixelShuffle", "ChannelShuffle")
"""torch.nn modules without parameters (name prefixes: `MaxPool` covers MaxPool1d/2d/3d)."""


class OptimizerMissesModel(Rule):
    """The optimizer was built before the model (or one of its layers) was replaced.

    What it does:
        After `optimizer = Optim(model.parameters())`, finds in the same function an
        assignment that replaces `model` with a new object (`model = Net()`,
        `copy.deepcopy(...)`, `torch.load(...)`) or replaces one of its layers with a new
        module (`model.fc = nn.Linear(...)`, `model.classifier[6] = ...`), when the
        optimizer is used afterwards and not rebuilt.
    Why is this bad:
        The optimizer keeps references to the old parameter tensors. The new layer (or the
        whole new model) is never updated: fine-tuning trains nothing but a head that is
        not in the network any more, the loss barely moves, and nothing errors.
    Example:
        model = torchvision.models.resnet18(weights="DEFAULT")
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        model.fc = nn.Linear(512, 10)
    Use instead:
        model = torchvision.models.resnet18(weights="DEFAULT")
        model.fc = nn.Linear(512, 10)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    Known limits:
        Only constructions and replacements in the same function, in source order, are
        compared. Moving or wrapping the same model (`model.to(device)`, `DDP(model)`,
        `torch.compile(model)`) keeps its parameters and is not reported; nor is a
        replacement followed by any new optimizer or an `add_param_group()`.
    """

    id = "TV032"
    title = "optimizer built before the model or a layer is replaced"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "build the optimizer after the model is final"

    def check(self, ctx: Context) -> Iterator[Finding]:
        built = constructions(ctx)
        for opt in built:
            if not opt.models:
                continue
            function = ctx.function_of(opt.call.node)
            for assign in ctx.index.assignments:
                if assign.start_byte < opt.call.node.end_byte or \
                        ctx.function_of(assign) is not function:
                    continue
                replaced = _replaced_model(ctx, assign, opt)
                if replaced is None or _rebuilt(ctx, built, assign, function) or \
                        not _used_after(ctx, opt, assign, function):
                    continue
                yield ctx.finding(assign, _message(ctx, assign, opt, replaced))
                break


def _message(ctx: Context, assign: Node, opt: Construction, replaced: str) -> str:
    where = f"after `{opt.name}` was built (line {opt.call.line})"
    if replaced in opt.models:
        return (f"`{replaced}` is rebound to a new model {where} over the old one's "
                "parameters: the new model is never updated")
    left = ctx.text(assign.child_by_field_name("left"))
    return f"`{left}` gets a new module {where}: its parameters are never updated"


def _replaced_model(ctx: Context, assign: Node, opt: Construction) -> str | None:
    """The replaced name when `assign` puts a new module at a model or inside it."""
    left = unwrap(assign.child_by_field_name("left"))
    right = unwrap(assign.child_by_field_name("right"))
    if left is None or right is None or right.type != "call":
        return None
    base = left
    while base.type == "subscript":
        base = unwrap(base.child_by_field_name("value"))
    name = dotted(base)
    if name is None:
        return None
    whole = name in opt.models and base is left
    inside = any(name.startswith(model + ".") for model in opt.models)
    if not (whole or inside) or not _new_module(ctx, right, name):
        return None
    return name


def _new_module(ctx: Context, value: Node, name: str) -> bool:
    """A call that makes a module with new parameters (not the same one moved or wrapped)."""
    call = ctx.call_at(value)
    if call is None or call.method in kinds.SELF_RETURNING_METHODS:
        return False
    qual = ctx.qualname(call.func)
    if qual in NEW_OBJECT_CALLS:
        return True
    if qual in kinds.MODEL_WRAPPERS or qual == "torch.compile" or \
            any(dotted(unwrap(arg)) == name for arg in call.args):
        return False  # the old module itself, wrapped: its parameters stay
    return ctx.is_model(value) and _has_parameters(ctx, call)


def _has_parameters(ctx: Context, call: Call) -> bool:
    """Whether the module a constructor call builds holds parameters (`nn.Identity()` or a
    `Sequential` of activations swapped in for a head removes it harmlessly)."""
    qual = ctx.qualname(call.func) or ""
    if not qual.startswith("torch.nn."):
        return True
    last = qual.rsplit(".", 1)[-1]
    if last in CONTAINERS:
        return any(_has_parameters(ctx, inner) for arg in call.args
                   if (inner := ctx.call_at(arg)) is not None)
    return not last.startswith(PARAMETER_FREE)


def _rebuilt(ctx: Context, built: list[Construction], after: Node, function) -> bool:
    return any(o.call.node.start_byte > after.end_byte
               and ctx.function_of(o.call.node) is function for o in built)


def _used_after(ctx: Context, opt: Construction, after: Node, function) -> bool:
    """Whether the optimizer is put to work later in the same function (an attribute of
    `self` lives on in the other methods), and no parameters are added to it."""
    if any(call.method == "add_param_group" and ctx.text(call.receiver) == opt.name
           and call.node.start_byte > after.end_byte and ctx.function_of(call.node) is function
           for call in ctx.calls_named("add_param_group")):
        return False
    return opt.name.startswith("self.") or any(
        call.node.start_byte > after.end_byte and _steps_or_hands_on(ctx, call, opt.name)
        for call in ctx.calls_in(function.node))


def _steps_or_hands_on(ctx: Context, call: Call, name: str) -> bool:
    """`name.step()`, `scaler.step(name)` or `train(model, name)`: the optimizer is put to
    work (saving its state_dict is not)."""
    if call.method == "step" and ctx.text(call.receiver) == name:
        return True
    return any(ctx.text(unwrap(arg)) == name for arg in [*call.args, *call.kwargs.values()])
