"""TV020: distributed training whose training DataLoader has no DistributedSampler."""

from __future__ import annotations

import re
from typing import Iterator

from tvis_tui.check import loaders
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import unwrap

SAMPLER_OPTIONS = ("sampler", "batch_sampler")
RANK_WORDS = re.compile(r"rank|world_size|num_replicas|shard", re.IGNORECASE)


class DdpWithoutDistributedSampler(Rule):
    """Data-parallel training feeds every rank the whole dataset: no DistributedSampler.

    What it does:
        In code that runs distributed (wraps a model in `DistributedDataParallel`, calls
        `torch.distributed.init_process_group`, or reads torchrun's `LOCAL_RANK` /
        `WORLD_SIZE`), finds a DataLoader iterated by a training loop that is given no
        `sampler=` or `batch_sampler=`.
    Why is this bad:
        Without a DistributedSampler each of the N processes iterates the full dataset:
        an epoch costs N times the compute it should, and with `shuffle=False` every rank
        sees identical batches, so the extra GPUs add nothing but cost.
    Example:
        model = DistributedDataParallel(model, device_ids=[local_rank])
        loader = DataLoader(dataset, batch_size=64, shuffle=True)
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    Use instead:
        model = DistributedDataParallel(model, device_ids=[local_rank])
        sampler = DistributedSampler(dataset, shuffle=True)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for x, y in loader:
            optimizer.zero_grad()
            criterion(model(x), y).backward()
            optimizer.step()
    Known limits:
        Any `sampler=` / `batch_sampler=` counts as handled (a sampler passed by variable
        is trusted), and so do options passed through `**kwargs`. Loaders handed to
        Accelerate's `prepare()` or Fabric's `setup_dataloaders()` (which shard for you),
        iterable datasets (which shard themselves) and datasets built from the rank
        (`Shard(files, rank)`, sharded by hand) are not reported. Evaluation
        loaders are not reported.
    """

    id = "TV020"
    title = "distributed training DataLoader without DistributedSampler"
    severity = Severity.ERROR
    category = Category.WASTED_COMPUTE
    fix = "pass sampler=DistributedSampler(dataset) (and drop shuffle=True)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for use in loaders.training_loaders(ctx.project, ctx.file):
            call = use.call
            if not loaders.is_distributed(ctx.project, use):
                continue
            if call.has_splat or len(call.args) > 3 or _has_sampler(ctx, call):
                continue
            if loaders.is_prepared(ctx.project, ctx.file, call) or \
                    loaders.dataset_is_iterable(ctx.project, ctx.file, call) or \
                    _sharded_by_hand(ctx, call):
                continue
            yield ctx.finding(call.node, "every rank iterates the whole dataset: this "
                              "training DataLoader has no DistributedSampler")


def _has_sampler(ctx: Context, call: Call) -> bool:
    """Any `sampler=` / `batch_sampler=` other than None: trusted, even when unseen."""
    return any(unwrap(call.kwargs.get(option)) is not None and
               ctx.text(call.kwargs[option]) != "None" for option in SAMPLER_OPTIONS)


def _sharded_by_hand(ctx: Context, call: Call) -> bool:
    """The dataset is built from the rank (`Shard(files, rank, world_size)`,
    `data[rank::world]`): each process already reads its own part."""
    dataset = call.arg(0, "dataset")
    for expression in (dataset, ctx.resolve(dataset)):
        if expression is not None and RANK_WORDS.search(ctx.text(expression)):
            return True
    return False
