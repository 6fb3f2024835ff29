"""TV026: a training DataLoader that never shuffles."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check import loaders
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

ORDERING_OPTIONS = ("sampler", "batch_sampler")


class UnshuffledTrainingLoader(Rule):
    """The training data is visited in the same fixed order every epoch.

    What it does:
        Finds a DataLoader iterated by a training loop that has `shuffle=False` (or no
        `shuffle` at all, which means False) and no `sampler=` / `batch_sampler=`, over a
        dataset that is provably indexable (a `TensorDataset`, a tensor, a torchvision
        dataset, or a subclass of `Dataset` defined in the checked files).
    Why is this bad:
        Datasets are usually stored sorted (by class, by source, by length). Unshuffled,
        every batch holds correlated samples and the last batches of an epoch always pull
        the model the same way: SGD converges slower and to a worse minimum, and batch
        norm statistics are biased. Nothing errors; the accuracy is just lower.
    Example:
        train_loader = DataLoader(train_set, batch_size=64)
        for x, y in train_loader:
            train_step(x, y)
    Use instead:
        train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
        for x, y in train_loader:
            train_step(x, y)
    Known limits:
        Datasets of unknown type (a Hugging Face dataset, a list from another module) and
        iterable datasets (which cannot be shuffled by the loader) are not reported, nor
        are options passed through `**kwargs`, or distributed code (TV020 covers it).
        Time series that must keep their order should say so with
        `# tvis: ignore[TV026]`.
    """

    id = "TV026"
    title = "training DataLoader without shuffling"
    severity = Severity.WARNING
    category = Category.CONVERGENCE
    fix = "pass shuffle=True (or a sampler) to the training DataLoader"

    def check(self, ctx: Context) -> Iterator[Finding]:
        for use in loaders.training_loaders(ctx.project, ctx.file):
            call = use.call
            if loaders.is_distributed(ctx.project, use):
                continue
            if call.has_splat or len(call.args) > 2 or \
                    any(option in call.kwargs for option in ORDERING_OPTIONS):
                continue
            shuffle = call.kwargs.get("shuffle")
            if shuffle is not None and loaders.literal(ctx.file, shuffle) != "False":
                continue
            if loaders.dataset_is_map_style(ctx.project, ctx.file, call):
                yield ctx.finding(call.node, "this training DataLoader does not shuffle: "
                                  "every epoch sees the data in the same order")
