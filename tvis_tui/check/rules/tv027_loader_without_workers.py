"""TV027: a CUDA training DataLoader that loads in the main process or without pinned memory."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import loaders
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.rule import Rule

IN_MEMORY = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.dataset.TensorDataset"})
"""Datasets whose items are already tensors in RAM: worker processes would only add IPC."""
IN_MEMORY_LITERALS = frozenset({"list", "list_comprehension", "tuple"})
WRAPPERS = frozenset({"torch.utils.data.Subset", "torch.utils.data.dataset.Subset"})


class LoaderWithoutWorkers(Rule):
    """The GPU waits for data: the training DataLoader has no workers or no pinned memory.

    What it does:
        When the checked code uses CUDA, finds a DataLoader iterated by a training loop
        with `num_workers` missing or 0, or `pin_memory` missing or False. Loaders over a
        `TensorDataset`, a tensor or a Python list (already in memory) are not reported.
    Why is this bad:
        With `num_workers=0`, reading, decoding and augmenting each batch happens in the
        training process between steps, and the GPU idles meanwhile. Without
        `pin_memory=True`, each batch is copied from pageable memory, which is slower and
        cannot overlap with compute (`.to(device, non_blocking=True)` needs pinned memory).
    Example:
        device = torch.device("cuda")
        loader = DataLoader(ImageFolder("train/"), batch_size=64, shuffle=True)
    Use instead:
        device = torch.device("cuda")
        loader = DataLoader(ImageFolder("train/"), batch_size=64, shuffle=True,
                            num_workers=8, pin_memory=True, persistent_workers=True)
    Known limits:
        Values that are not literals (`num_workers=args.workers`) count as set, and so do
        options passed through `**kwargs`. Whether the code uses CUDA is read from the
        text (`"cuda"`, `.cuda()`), so a device chosen only by a config file is missed.
        Info only: on a dataset that is cheap to load the gain is small.
    """

    id = "TV027"
    title = "CUDA training DataLoader without workers or pinned memory"
    severity = Severity.INFO
    category = Category.WASTED_COMPUTE
    fix = "pass num_workers=N (a few per GPU) and pin_memory=True"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for use in loaders.training_loaders(ctx.project, ctx.file):
            call = use.call
            if not loaders.uses_cuda(ctx.project, use):
                continue
            if call.has_splat or len(call.args) > 5 or _in_memory(ctx, call):
                continue
            missing = []
            workers = call.arg(5, "num_workers")
            if workers is None or loaders.literal(ctx.file, workers) == "0":
                missing.append("num_workers=0")
            pin = call.kwargs.get("pin_memory")
            if pin is None or loaders.literal(ctx.file, pin) == "False":
                missing.append("no pin_memory")
            if missing:
                yield ctx.finding(call.node, f"training DataLoader with {' and '.join(missing)}"
                                  " feeding a CUDA device: the GPU waits for data")


def _in_memory(ctx: Context, call: Call) -> bool:
    """A TensorDataset or a Python list of samples (or a Subset of one): loading is a
    memory read."""
    return _in_memory_dataset(ctx, call.arg(0, "dataset"), 0)


def _in_memory_dataset(ctx: Context, dataset: Node | None, depth: int) -> bool:
    if dataset is None or depth > 3:
        return True
    kind = ctx.type_of(dataset)
    if kind in IN_MEMORY or loaders.is_tensor_factory(kind):
        return True
    value = ctx.resolve(dataset)
    if kind in WRAPPERS and value is not None and value.type == "call":
        inner = ctx.call_at(value)
        return inner is not None and _in_memory_dataset(ctx, inner.arg(0, "dataset"), depth + 1)
    return value is not None and value.type in IN_MEMORY_LITERALS
