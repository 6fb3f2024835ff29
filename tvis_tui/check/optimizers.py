"""Optimizer constructions: where an optimizer is built, the name it is bound to and the
models whose parameters it holds (TV032, TV033)."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.context import Context
from tvis_tui.check.index import Call
from tvis_tui.check.syntax import dotted, unwrap

PARAMETER_METHODS = frozenset({"parameters", "named_parameters"})


@dataclass(frozen=True)
class Construction:
    """`name = Optimizer(model.parameters(), ...)`: the call, `name`'s node and `model`s."""

    call: Call
    target: Node
    models: tuple[str, ...]

    @property
    def name(self) -> str:
        return self.target.text.decode()


def constructions(ctx: Context) -> list[Construction]:
    """Every optimizer built from a torch (or known library) class and assigned to a name."""
    key = ("optimizer_constructions", id(ctx.file))
    if key not in ctx.project.memo:
        ctx.project.memo[key] = [c for call in ctx.calls if (c := _construction(ctx, call))]
    return ctx.project.memo[key]


def _construction(ctx: Context, call: Call) -> Construction | None:
    if call.func is None or call.name[:1].islower():
        return None
    qual = ctx.qualname(call.func)
    if qual is None or not kinds.is_optimizer_class(qual):
        return None
    parent = call.node.parent
    if parent is None or parent.type != "assignment":
        return None
    target = unwrap(parent.child_by_field_name("left"))
    if target is None or dotted(target) is None:
        return None
    models = tuple(dict.fromkeys(
        name for c in ctx.calls_in(call.node) if c.method in PARAMETER_METHODS
        and (name := dotted(unwrap(c.receiver))) is not None))
    return Construction(call, target, models)
