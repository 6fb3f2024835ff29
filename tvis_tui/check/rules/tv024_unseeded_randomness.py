"""TV024: a training script that draws random numbers but never seeds a generator."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check import kinds, loaders
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.training import training_loops

PY_RANDOM = frozenset({"random", "shuffle", "choice", "choices", "randint", "sample",
                       "uniform", "gauss", "randrange", "normalvariate"})
NUMPY_RANDOM_SAFE = frozenset({"seed", "default_rng", "RandomState", "Generator",
                               "get_state", "set_state", "SeedSequence", "PCG64"})


class UnseededRandomness(Rule):
    """The script uses random numbers but never seeds them: no two runs are alike.

    What it does:
        In a file that trains (a loop runs backward() or an optimizer step) or that a
        training file imports, finds the first source of randomness
        (`DataLoader(shuffle=True)`, `random_split`, `random.*`, `np.random.*`,
        torchvision `Random*` transforms) when no seed is set anywhere in the checked
        files: no call whose name contains `seed` (`torch.manual_seed`, `random.seed`,
        `np.random.seed`, `seed_everything`, `set_seed`, `Generator().manual_seed`) and
        no `seed=` option, in the file, the files it imports, or the files importing it
        (a seed in another script checked beside it seeds nothing here).
    Why is this bad:
        Without a seed every run shuffles, initialises and augments differently, so a
        change cannot be told apart from noise, a diverging run cannot be replayed, and a
        result in a paper or a bug report cannot be reproduced.
    Example:
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        model = Net()
    Use instead:
        torch.manual_seed(0)
        random.seed(0)
        np.random.seed(0)
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
        model = Net()
    Known limits:
        Any seeding call among those files silences the rule, even one that
        does not cover every generator used; a seed read from a config by a library the
        rule cannot see is missed. Weight initialisation and `torch.rand*` calls (synthetic
        data, GAN noise) are not counted as uses of randomness: the data order and
        augmentation are what make unseeded runs hard to compare.
    """

    id = "TV024"
    title = "unseeded randomness in a training script"
    severity = Severity.INFO
    category = Category.REPRODUCIBILITY
    fix = "seed every generator once at start-up: torch.manual_seed(s); random.seed(s); " \
          "np.random.seed(s)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        if not _in_training_code(ctx.project, ctx.file) or _seeded(ctx.project, ctx.file):
            return
        for call in ctx.calls:
            source = _random_source(ctx, call)
            if source is not None:
                yield ctx.finding(call.node, f"{source} is random and nothing seeds it: "
                                  "runs cannot be reproduced")
                return


def _trains(project: Project, fm: FileModel) -> bool:
    key = ("trains", id(fm))
    if key not in project.memo:
        project.memo[key] = bool(training_loops(project, fm))
    return project.memo[key]


def _in_training_code(project: Project, fm: FileModel) -> bool:
    """The file runs a training loop, or a checked file that does imports it (a dataset
    module with random augmentation); a stand-alone data-preparation script does not."""
    if _trains(project, fm):
        return True
    key = ("imported_by_training", id(project))
    if key not in project.memo:
        project.memo[key] = {id(imported) for other in project.files if _trains(project, other)
                             for imported in project.imported_files(other)}
    return id(fm) in project.memo[key]


def _seeded(project: Project, fm: FileModel) -> bool:
    """A seed runs with `fm`: in it, a file it imports, or a file that imports it (a
    training script seeding before it builds a dataset module's augmentation) or one of
    theirs; not one in another script checked beside it (`tvis check examples/`)."""
    key = ("seeded", id(fm))
    if key not in project.memo:
        importers = _importers(project).get(id(fm), [])
        together = [fm, *project.imported_files(fm), *importers,
                    *(f for other in importers for f in project.imported_files(other))]
        project.memo[key] = any(_file_seeds(f) for f in together)
    return project.memo[key]


def _importers(project: Project) -> dict[int, list[FileModel]]:
    """For each checked file (by id), the checked files that import it."""
    key = ("importers", id(project))
    if key not in project.memo:
        found: dict[int, list[FileModel]] = {}
        for other in project.files:
            for imported in project.imported_files(other):
                found.setdefault(id(imported), []).append(other)
        project.memo[key] = found
    return project.memo[key]


def _file_seeds(fm: FileModel) -> bool:
    """A seeding call (`manual_seed`, `seed_everything`, ...), a `seed=` option anywhere, or
    a seeded `default_rng(0)`."""
    if any("seed" in name.lower() for name in fm.index.calls_by_name) or \
            any("seed" in call.kwargs for call in fm.index.calls):
        return True
    return any("seed" in call.kwargs or call.args
               for call in fm.index.calls_by_name.get("default_rng", []))


def _random_source(ctx: Context, call: Call) -> str | None:
    """A description of the randomness `call` draws, or None."""
    if "seed" in call.kwargs or "generator" in call.kwargs:
        return None
    qual = ctx.qualname(call.func)
    if qual is None:
        return None
    module, _, name = qual.rpartition(".")
    if qual in kinds.DATALOADERS:
        shuffle = call.kwargs.get("shuffle")
        return "`DataLoader(shuffle=True)`" if shuffle is not None and \
            loaders.literal(ctx.file, shuffle) == "True" else None
    if name == "random_split" and module.startswith("torch.utils.data"):
        return "`random_split`"
    if module == "random" and name in PY_RANDOM:
        return f"`random.{name}`"
    if module == "numpy.random" and name not in NUMPY_RANDOM_SAFE:
        return f"`np.random.{name}`"
    if module.startswith("torchvision.transforms") and name.startswith("Random"):
        return f"`{name}`"
    return None
