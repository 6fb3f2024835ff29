"""TV029: `torch.cuda.empty_cache()` or `gc.collect()` on every training step."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check import training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

HOUSEKEEPING = frozenset({"torch.cuda.empty_cache", "torch.cuda.memory.empty_cache",
                          "gc.collect"})


class EmptyCacheEveryStep(Rule):
    """The allocator cache is flushed (or the garbage collector run) on every step.

    What it does:
        Finds `torch.cuda.empty_cache()` or `gc.collect()` that runs unconditionally on
        every step of the per-step training loop (a loop that trains and holds no other
        training loop), directly or in a function the loop calls.
    Why is this bad:
        `empty_cache()` synchronises the device and hands every cached block back to the
        driver, so the next step must `cudaMalloc` all of its memory again: steps get
        markedly slower, and it frees no memory that your tensors could not already
        reuse. `gc.collect()` walks every Python object, tens of milliseconds per step in
        a large program. Neither fixes a real leak (keep fewer references instead).
    Example:
        for x, y in loader:
            train_step(x, y)
            torch.cuda.empty_cache()
    Use instead:
        for x, y in loader:
            train_step(x, y)
        torch.cuda.empty_cache()  # once, e.g. before evaluation, if at all
    Known limits:
        Calls under an `if` (every N steps, after an out-of-memory error) or in an
        `except` block, at the call or at any call site on the way, are not reported.
    """

    id = "TV029"
    title = "empty_cache() / gc.collect() on every training step"
    severity = Severity.WARNING
    category = Category.WASTED_COMPUTE
    fix = "remove it from the step loop (call it every N steps or once per epoch if needed)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("empty_cache", "collect"):
            if ctx.qualname(call.func) not in HOUSEKEEPING:
                continue
            if training.runs_every_step(ctx.project, ctx.file, call.node):
                yield ctx.finding(call.node, f"`{ctx.text(call.node)}` runs on every "
                                  "training step")
