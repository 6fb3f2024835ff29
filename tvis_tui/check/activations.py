"""What a tensor expression is, at the output end of a network: softmax probabilities,
log-probabilities, sigmoid probabilities, or raw logits from a linear layer.

Follows names to their latest assignment, `.view()`-style reshapes, `nn.Sequential` chains and
the `return` of a project model's `forward`. Answers None when the code does not prove it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from tvis_tui.check.index import Call
from tvis_tui.check.project import FunctionRef
from tvis_tui.check.syntax import unwrap

if TYPE_CHECKING:
    from tvis_tui.check.context import Context

SOFTMAX, LOG_SOFTMAX, SIGMOID, LOGITS = "softmax", "log_softmax", "sigmoid", "logits"

_FUNCTIONS = {
    "torch.softmax": SOFTMAX, "torch.nn.functional.softmax": SOFTMAX,
    "torch.special.softmax": SOFTMAX,
    "torch.log_softmax": LOG_SOFTMAX, "torch.nn.functional.log_softmax": LOG_SOFTMAX,
    "torch.special.log_softmax": LOG_SOFTMAX,
    "torch.sigmoid": SIGMOID, "torch.nn.functional.sigmoid": SIGMOID,
    "torch.special.expit": SIGMOID,
}
_METHODS = {"softmax": SOFTMAX, "log_softmax": LOG_SOFTMAX, "sigmoid": SIGMOID}
_MODULES = {
    "torch.nn.Softmax": SOFTMAX, "torch.nn.LogSoftmax": LOG_SOFTMAX,
    "torch.nn.Sigmoid": SIGMOID, "torch.nn.Linear": LOGITS, "torch.nn.LazyLinear": LOGITS,
    "torch.nn.Bilinear": LOGITS, "torch.nn.Conv1d": LOGITS, "torch.nn.Conv2d": LOGITS,
}
_SHAPE_METHODS = frozenset({"view", "reshape", "squeeze", "unsqueeze", "flatten", "float",
                            "contiguous", "permute", "transpose", "to", "double", "half"})
_MAX_DEPTH = 8


def output_kind(ctx: "Context", expr: Node | None, at: Node, depth: int = 0) -> str | None:
    """SOFTMAX, LOG_SOFTMAX, SIGMOID or LOGITS when the code proves what `expr` holds."""
    expr = unwrap(expr)
    if expr is None or depth > _MAX_DEPTH:
        return None
    if expr.type == "identifier":
        latest = ctx.latest_binding(expr, at)
        if latest is None or latest[1] is None:
            return None
        return output_kind(ctx, latest[1], latest[0], depth + 1)
    if expr.type == "subscript":
        return output_kind(ctx, expr.child_by_field_name("value"), at, depth + 1)
    if expr.type != "call":
        return None
    call = ctx.call_at(expr)
    if call is None or call.func is None:
        return None
    qual = ctx.qualname(call.func)
    if qual in _FUNCTIONS:
        return _FUNCTIONS[qual]
    if call.method in _METHODS and call.receiver is not None and qual is None:
        return _METHODS[call.method]
    if call.method in _SHAPE_METHODS and call.receiver is not None:
        return output_kind(ctx, call.receiver, at, depth + 1)
    return _module_output(ctx, call.func, depth)


def _module_output(ctx: "Context", module: Node, depth: int) -> str | None:
    """What calling the module `module` returns: by its class, its Sequential's last layer,
    or the `return` statements of a project model's forward()."""
    module_type = ctx.type_of(module)
    if module_type in _MODULES:
        return _MODULES[module_type]
    if module_type == "torch.nn.Sequential":
        built = ctx.resolve(module)
        layers = ctx.call_at(built).args if ctx.call_at(built) is not None else []
        return _layer_kind(ctx, layers[-1]) if layers else None
    cls = ctx.project.project_class(module_type, ctx.file)
    if cls is None:
        return None
    return _forward_output(ctx, cls, depth)


def _layer_kind(ctx: "Context", layer: Node) -> str | None:
    layer = unwrap(layer)
    if layer is None or layer.type != "call":
        return None
    return _MODULES.get(ctx.qualname(layer.child_by_field_name("function")) or "")


def _forward_output(ctx: "Context", cls, depth: int) -> str | None:
    from tvis_tui.check.context import Context

    fm, region = cls
    forwards = [r for r in fm.index.functions if r.parent is region and r.name == "forward"]
    if len(forwards) != 1:
        return None
    other = Context(ctx.project, fm, ctx.rule)
    kinds = {output_kind(other, value, value, depth + 1)
             for value in ctx.project.returned(FunctionRef(fm, forwards[0]))}
    return kinds.pop() if len(kinds) == 1 else None


def loss_inputs(ctx: "Context", losses: frozenset[str]) -> list[tuple[Call, Node]]:
    """(call, prediction argument) for each call of one of `losses` (module classes or
    functional losses, by qualified name) whose arguments are all visible."""
    found = []
    for call, qual in ctx.loss_calls():
        prediction = call.arg(0, "input") if qual in losses and not call.has_splat else None
        if prediction is not None:
            found.append((call, prediction))
    return found
