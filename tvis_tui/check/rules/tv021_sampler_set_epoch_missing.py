"""TV021: a shuffling DistributedSampler whose set_epoch() is never called."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check import loaders, training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap

DISTRIBUTED_SAMPLERS = frozenset({"torch.utils.data.DistributedSampler",
                                  "torch.utils.data.distributed.DistributedSampler"})


class SamplerSetEpochMissing(Rule):
    """A DistributedSampler shuffles the same way every epoch: set_epoch() is never called.

    What it does:
        Finds a `DistributedSampler` (shuffling, the default) that feeds a DataLoader
        iterated by a training loop which itself runs many times (an epoch loop), when no
        `set_epoch()` call appears anywhere in the checked files.
    Why is this bad:
        The sampler seeds its shuffle with `seed + epoch`. Without `set_epoch(epoch)` the
        epoch stays 0, so every epoch visits the data in exactly the same order: the
        shuffle is done once and the model sees the same batch sequence each epoch, which
        hurts generalisation silently.
    Example:
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            for x, y in loader:
                train_step(x, y)
    Use instead:
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                train_step(x, y)
    Known limits:
        Any `set_epoch()` call in the checked files silences the rule (it may be on
        `loader.sampler`, or in a helper). Samplers built with `shuffle=False`, passed
        through `**kwargs`, or loaders handed to Accelerate's `prepare()` (which sets the
        epoch itself) are not reported. A single pass over the data is not reported.
    """

    id = "TV021"
    title = "DistributedSampler without set_epoch()"
    severity = Severity.WARNING
    category = Category.CONVERGENCE
    fix = "call sampler.set_epoch(epoch) at the start of every epoch"

    def check(self, ctx: Context) -> Iterator[Finding]:
        samplers = [call for name in ("DistributedSampler",) for call in ctx.calls_named(name)
                    if ctx.qualname(call.func) in DISTRIBUTED_SAMPLERS]
        if not samplers or any(fm.index.calls_by_name.get("set_epoch")
                               for fm in ctx.project.files):
            return
        for sampler in samplers:
            shuffle = sampler.kwargs.get("shuffle")
            if sampler.has_splat or len(sampler.args) > 3 or \
                    (shuffle is not None and loaders.literal(ctx.file, shuffle) != "True"):
                continue
            if _feeds_epoch_loop(ctx, sampler):
                yield ctx.finding(sampler.node, "this DistributedSampler never gets "
                                  "set_epoch(): every epoch uses the same shuffle order")


def _feeds_epoch_loop(ctx: Context, sampler: Call) -> bool:
    """Whether a training DataLoader takes `sampler` and its loop runs many times."""
    for use in loaders.training_loaders(ctx.project, ctx.file):
        given = unwrap(use.call.kwargs.get("sampler"))
        if given is None:
            continue
        if given != sampler.node and unwrap(ctx.value_of(given)) != sampler.node:
            continue
        if loaders.is_prepared(ctx.project, ctx.file, use.call):
            continue
        if training.repeats(ctx.project, use.loop_file, use.loop.node):
            return True
    return False
