"""Data-loading facts the data-pipeline rules share: which DataLoader constructors feed a
training loop (within a file and across files), whether the project runs distributed or on
CUDA, and what an option passed to a constructor provably is."""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import MAX_DEPTH, FileModel, FunctionRef, Project
from tvis_tui.check.symbols import parameters
from tvis_tui.check.syntax import returns_of, text, unwrap
from tvis_tui.check.training import loop_trains

ITERATION_WRAPPERS = frozenset({"enumerate", "tqdm", "iter", "zip"})
DISTRIBUTED_CALLS = frozenset({"torch.distributed.init_process_group",
                               "torch.nn.parallel.DistributedDataParallel",
                               "torch.nn.parallel.distributed.DistributedDataParallel",
                               "torch.distributed.fsdp.FullyShardedDataParallel"})
TORCHRUN_VARIABLES = (b'"LOCAL_RANK"', b"'LOCAL_RANK'", b'"WORLD_SIZE"', b"'WORLD_SIZE'")
PREPARING_METHODS = frozenset({"prepare", "setup_dataloaders", "prepare_data_loader"})
"""Accelerate / Fabric calls that replace a loader's sampler for distributed training."""


@dataclass(frozen=True)
class LoaderUse:
    """A DataLoader constructor `call` in `file`, iterated by the training `loop` in
    `loop_file`."""

    file: FileModel
    call: Call
    loop_file: FileModel
    loop: Region


def training_loaders(project: Project, fm: FileModel) -> list[LoaderUse]:
    """DataLoader constructor calls in `fm` whose loader a training loop iterates
    (`for x, y in loader`, `enumerate(loader)`, `tqdm(loader)`, `next(iter(loader))`; the
    loader may be a name, an attribute, a factory's return value, or a parameter fed the
    loader at every call site, in any checked file)."""
    key = ("training_loaders", id(project))
    if key not in project.memo:
        found: dict[int, list[LoaderUse]] = {}
        for lfm in project.files:
            for loop in lfm.index.loops:
                if not loop_trains(project, lfm, loop):
                    continue
                for cfm, call in _loop_sources(project, lfm, loop):
                    found.setdefault(id(cfm), []).append(LoaderUse(cfm, call, lfm, loop))
        project.memo[key] = found
    seen: set[int] = set()
    unique = []
    for use in project.memo[key].get(id(fm), []):
        if id(use.call) not in seen:
            seen.add(id(use.call))
            unique.append(use)
    return unique


def _loop_sources(project: Project, fm: FileModel,
                  loop: Region) -> list[tuple[FileModel, Call]]:
    """Loaders a loop draws from: `for batch in loader`, or `batch = next(it)` in its body
    where `it = iter(loader)` (re-created on StopIteration, so every value counts)."""
    found = []
    if loop.kind == "for":
        found += _constructors(project, fm, loop.node.child_by_field_name("right"), 0)
    for call in fm.index.calls_by_name.get("next", []):
        if call.method is None and call.args and loop.contains(call.node) and \
                fm.index.loops_around(call.node)[:1] == [loop]:
            found += [pair for value in fm.symbols.assigned_values(call.args[0]) or [call.args[0]]
                      for pair in _constructors(project, fm, value, 0)]
    return found


def _constructors(project: Project, fm: FileModel, node: Node | None,
                  depth: int) -> list[tuple[FileModel, Call]]:
    node = unwrap(node)
    if node is None or depth > MAX_DEPTH:
        return []
    if node.type == "call":
        call = fm.index.call_at(node)
        if call is None:
            return []
        if fm.symbols.qualname(call.func) in kinds.DATALOADERS:
            return [(fm, call)]
        if call.name in ITERATION_WRAPPERS and call.args:
            return _constructors(project, fm, call.args[0], depth + 1)
        return [found for ref in project.callees(fm, call)
                for ret in returns_of(ref.region.node) if ret.named_children
                for found in _constructors(project, ref.file, ret.named_children[0], depth + 1)]
    if node.type not in ("identifier", "attribute"):
        return []
    value = fm.symbols.value_of(node)
    if value is not None:
        return _constructors(project, fm, value, depth + 1)
    if node.type == "identifier" and fm.symbols.is_parameter(node):
        function = fm.index.function_of(node)
        ref = FunctionRef(fm, function)
        for position, (name, _, _) in enumerate(parameters(function)):
            if name == text(node):
                return [found for cfm, arg in project.arguments_for(ref, position, name)
                        for found in _constructors(project, cfm, arg, depth + 1)]
    return []


def is_distributed(project: Project, use: LoaderUse) -> bool:
    """Whether the code around a loader runs data-parallel: the loader's file, its training
    loop's file, or a checked file either imports wraps a model in DistributedDataParallel /
    FSDP, calls `init_process_group`, or reads torchrun's variables."""
    return any(_memo(project, "distributed", fm, _file_is_distributed)
               for fm in _related(project, use))


def _file_is_distributed(fm: FileModel) -> bool:
    if any(variable in fm.source.text for variable in TORCHRUN_VARIABLES):
        return True
    return any(fm.symbols.qualname(call.func) in DISTRIBUTED_CALLS
               for name in ("init_process_group", "DistributedDataParallel", "DDP",
                            "FullyShardedDataParallel", "FSDP")
               for call in fm.index.calls_by_name.get(name, []))


def uses_cuda(project: Project, use: LoaderUse) -> bool:
    """Whether the code around a loader (as in `is_distributed`) moves work to a CUDA
    device (`.cuda()`, `torch.device("cuda")`, `.to("cuda")`)."""
    return any(_memo(project, "cuda", fm, _file_uses_cuda) for fm in _related(project, use))


def _file_uses_cuda(fm: FileModel) -> bool:
    return b'"cuda' in fm.source.text or b"'cuda" in fm.source.text or \
        bool(fm.index.calls_by_name.get("cuda"))


def _memo(project: Project, question: str, fm: FileModel, answer) -> bool:
    key = (question, id(fm))
    if key not in project.memo:
        project.memo[key] = answer(fm)
    return project.memo[key]


def _related(project: Project, use: LoaderUse) -> list[FileModel]:
    """The loader's file, its loop's file, and the checked files those two import."""
    found = [use.file, use.loop_file]
    for fm in (use.file, use.loop_file):
        found += [other for other in project.imported_files(fm) if other not in found]
    return found


def is_prepared(project: Project, fm: FileModel, call: Call) -> bool:
    """Whether the loader built by `call` is handed to Accelerate / Fabric (`prepare`,
    `setup_dataloaders`), which install their own distributed sampler."""
    target = bound_name(call)
    for method in PREPARING_METHODS:
        for other in fm.index.calls_by_name.get(method, []):
            if other.node.start_byte <= call.node.start_byte < other.node.end_byte:
                return True
            if target is not None and any(text(unwrap(arg)) == target for arg in other.args):
                return True
    return False


def bound_name(call: Call) -> str | None:
    """`loader` for `loader = DataLoader(...)` (also `self.loader = ...`), else None."""
    parent = call.node.parent
    if parent is not None and parent.type == "assignment" and \
            parent.child_by_field_name("right") == call.node:
        return text(parent.child_by_field_name("left"))
    return None


def literal(fm: FileModel, node: Node | None) -> str | None:
    """The source text of a literal option (`True`, `0`), following a name assigned once;
    None when the value is not a literal the code proves."""
    node = unwrap(node)
    if node is not None and node.type in ("identifier", "attribute"):
        node = unwrap(fm.symbols.value_of(node))
    if node is not None and node.type in ("true", "false", "none", "integer"):
        return text(node)
    return None


ITERABLE_DATASETS = frozenset({"torch.utils.data.IterableDataset",
                               "torch.utils.data.dataset.IterableDataset",
                               "datasets.IterableDataset"})


def dataset_is_iterable(project: Project, fm: FileModel, call: Call) -> bool:
    """Whether the loader's dataset is (or may be) an IterableDataset, which shards and
    orders itself: a subclass of one, or a `load_dataset(..., streaming=True)`."""
    dataset = unwrap(call.arg(0, "dataset"))
    if dataset is None:
        return True
    made = unwrap(fm.symbols.value_of(dataset)) if dataset.type != "call" else dataset
    call_made = fm.index.call_at(made) if made is not None and made.type == "call" else None
    if call_made is not None and "streaming" in call_made.kwargs:
        return True
    qual = project.type_of(fm, dataset)
    if qual in ITERABLE_DATASETS:
        return True
    cls = project.project_class(qual)
    return cls is not None and project.class_inherits(*cls, ITERABLE_DATASETS)


MAP_DATASETS = frozenset({"torch.utils.data.TensorDataset", "torch.utils.data.Subset",
                          "torch.utils.data.ConcatDataset",
                          "torch.utils.data.dataset.TensorDataset"})
DATASET_BASES = frozenset({"torch.utils.data.Dataset", "torch.utils.data.dataset.Dataset"})


def dataset_is_map_style(project: Project, fm: FileModel, call: Call) -> bool:
    """Whether the loader's dataset is provably map-style (indexable, so shuffling is a
    choice): a TensorDataset / Subset, a tensor, a torchvision dataset, or a project
    subclass of `Dataset` that is not an IterableDataset."""
    dataset = unwrap(call.arg(0, "dataset"))
    qual = project.type_of(fm, dataset) if dataset is not None else None
    if qual is None:
        return False
    if qual in MAP_DATASETS or qual.startswith("torchvision.datasets.") or \
            is_tensor_factory(qual):
        return True
    cls = project.project_class(qual)
    return cls is not None and project.class_inherits(*cls, DATASET_BASES) and \
        not project.class_inherits(*cls, ITERABLE_DATASETS)


TENSOR_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "randn", "rand", "randint",
                              "zeros", "ones", "empty", "full", "arange", "stack", "cat"})


def is_tensor_factory(qual: str | None) -> bool:
    """`torch.randn`, `torch.tensor`, ...: a tensor used directly as a dataset (indexable,
    already in memory)."""
    return qual is not None and qual.startswith("torch.") and qual.count(".") == 1 and \
        qual[6:] in TENSOR_FACTORIES
