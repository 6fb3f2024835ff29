"""Learning-rate schedulers: which values are schedulers, the optimizer each drives, and the
`step()` calls rules reason about (TV030, TV031)."""

from __future__ import annotations

from tree_sitter import Node

from tvis_tui.check.context import Context
from tvis_tui.check.index import Call
from tvis_tui.check.syntax import enclosing, unwrap

TORCH_SCHEDULERS = "torch.optim.lr_scheduler."


def scheduler_class(ctx: Context, node: Node | None) -> str | None:
    """`torch.optim.lr_scheduler.StepLR` when `node` is provably a scheduler (a torch one or
    a Hugging Face `get_*_schedule*` factory result), else None."""
    qual = ctx.type_of(node)
    if qual is None:
        return None
    if qual.startswith(TORCH_SCHEDULERS) and qual.rsplit(".", 1)[-1][:1].isupper():
        return qual
    last = qual.rsplit(".", 1)[-1]
    if qual.startswith("transformers.") and last.startswith("get_") and "schedule" in last:
        return qual
    return None


def scheduler_steps(ctx: Context) -> list[tuple[Call, str]]:
    """(`sched.step()` call, scheduler qualname) for every scheduler step in the file."""
    found = []
    for call in ctx.calls_named("step"):
        if call.method == "step" and call.receiver is not None:
            qual = scheduler_class(ctx, call.receiver)
            if qual is not None:
                found.append((call, qual))
    return found


def constructor(ctx: Context, scheduler: Node) -> Call | None:
    """The constructor call a scheduler name was built by (assigned once), else None."""
    return ctx.call_at(ctx.resolve(scheduler))


def driven_optimizer(ctx: Context, scheduler: Node) -> str | None:
    """The text of the optimizer a scheduler was built over (`optimizer` in
    `StepLR(optimizer, 30)`), else None."""
    built = constructor(ctx, scheduler)
    optimizer = built.arg(0, "optimizer") if built is not None else None
    return ctx.text(unwrap(optimizer)) if optimizer is not None else None


def is_conditional(node: Node, scope: Node) -> bool:
    """Whether `node` sits under an `if` (or a conditional expression) inside `scope`."""
    guard = enclosing(node, "if_statement", "conditional_expression", "else_clause",
                      "elif_clause")
    return guard is not None and scope.start_byte <= guard.start_byte and \
        guard.end_byte <= scope.end_byte
