"""TV023: GPU-to-host synchronisations repeated inside the training step loop."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.graph import carries_graph
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import FileModel
from tvis_tui.check.rule import Rule
from tvis_tui.check.source import comments
from tvis_tui.check.syntax import text

SYNC_METHODS = frozenset({"item", "tolist", "cpu", "numpy"})
CONVERTERS = frozenset({"print", "float", "int", "bool"})
MODULE_METHODS = frozenset({"parameters", "named_parameters", "state_dict", "modules",
                            "children", "buffers", "eval", "train"})
DEVICE_WORDS = (b"cuda", b"device", b"gpu", b"mps", b"xla", b"accelerat")
"""Words (lower-cased) whose absence from every checked file means the script runs on the
CPU, where reading a tensor is not a GPU sync."""
AUTO_DEVICE_LIBRARIES = ("pytorch_lightning", "lightning", "transformers", "accelerate",
                         "deepspeed")
"""Libraries that move the model to a GPU without the script naming a device."""
REPEATING = frozenset({"for_statement", "while_statement", "list_comprehension",
                       "generator_expression", "set_comprehension", "dictionary_comprehension"})


class HostSyncInStep(Rule):
    """The training step waits for the GPU again and again: repeated host syncs.

    What it does:
        In the innermost training loop (the per-step loop), finds calls that copy a tensor
        to the host (`.item()`, `.tolist()`, `.cpu()`, `.numpy()`, and `print(t)`,
        `float(t)` on a model or loss output) that run inside a loop or comprehension
        nested in the step, so the step syncs once per parameter, sample or class.
    Why is this bad:
        Each sync stalls the CPU until the GPU has finished all queued work, so the next
        kernels cannot be queued ahead; a sync per parameter or per sample turns the step
        into a sequence of small stalls and can halve GPU utilisation.
    Example:
        for x, y in loader:
            loss = criterion(model(x), y)
            loss.backward()
            for name, p in model.named_parameters():
                grad_norms[name] = p.grad.norm().item()
            optimizer.step()
    Use instead:
        for step, (x, y) in enumerate(loader):
            loss = criterion(model(x), y)
            loss.backward()
            if step % 100 == 0:
                norms = torch.stack([p.grad.norm() for p in model.parameters()])
                print(norms.tolist())
            optimizer.step()
    Known limits:
        Syncs once per step (reading the loss for logging) are tolerated, and a nested
        loop under an `if` is treated as periodic logging. Syncs in functions called from
        the loop, and hidden ones (`if tensor:`, `torch.nonzero`) are not seen. Low
        severity: the cost depends on how much GPU work each sync waits for. Scripts
        that show no device anywhere in the checked files (no `cuda`, `device`, `.to(...)`,
        Lightning or Hugging Face) run on the CPU and are not reported.
    """

    id = "TV023"
    title = "host sync repeated in the training step"
    severity = Severity.INFO
    category = Category.WASTED_COMPUTE
    fix = "keep values on the GPU (accumulate tensors) and read them every N steps"

    def check(self, ctx: Context) -> Iterator[Finding]:
        if not _may_use_gpu(ctx):  # on the CPU `.item()` is a plain read, not a sync
            return
        for sync in _syncs(ctx):
            loops = ctx.loops_around(sync)
            step = _step_loop(ctx, loops)
            if step is None:
                continue
            inner = _repeat_inside(sync, step)
            if inner is not None and not training.gated(inner, step.node):
                yield ctx.finding(sync, f"`{ctx.text(sync)}` syncs with the GPU once per "
                                  "element of a loop inside every training step")


def _may_use_gpu(ctx: Context) -> bool:
    """Whether any checked file shows a device at all: the words `cuda`, `device`, `gpu`,
    `mps`, `xla` or `accelerator`, a `.to(x)` with a non-torch argument, or a library
    that picks the GPU by itself (Lightning, Hugging Face, Accelerate, DeepSpeed)."""
    key = ("tv023_may_use_gpu",)
    if key not in ctx.project.memo:
        ctx.project.memo[key] = any(_file_may_use_gpu(fm) for fm in ctx.project.files)
    return ctx.project.memo[key]


def _file_may_use_gpu(fm: FileModel) -> bool:
    text_bytes, kept, start = fm.source.text, [], 0
    for comment in comments(fm.source.root):  # "# TODO: try on GPU" is not a device
        kept.append(text_bytes[start:comment.start_byte])
        start = comment.end_byte
    lowered = b"".join(kept + [text_bytes[start:]]).lower()
    if any(word in lowered for word in DEVICE_WORDS):
        return True
    if any(module.startswith(AUTO_DEVICE_LIBRARIES) for module in fm.symbols.imports.values()):
        return True
    return any(call.method == "to" and call.args and not text(call.args[0]).startswith("torch.")
               for call in fm.index.calls_by_name.get("to", []))


def _syncs(ctx: Context) -> Iterator[Node]:
    for call in ctx.calls_named(*SYNC_METHODS):
        if call.method is not None and not call.args and not _inner_of_chain(call) \
                and not (call.method == "cpu" and _module_move(ctx, call)):
            yield call.node
    for call in ctx.calls_named(*CONVERTERS):
        if call.method is None and call.args and ctx.loops_around(call.node) and \
                any(carries_graph(ctx, arg, call.node) for arg in call.args):
            yield call.node


def _module_move(ctx: Context, call: Call) -> bool:
    """`model.cpu()`, or `m.cpu().parameters()`: a module moved, not a tensor read."""
    parent = call.node.parent
    after = parent.child_by_field_name("attribute") if parent is not None and \
        parent.type == "attribute" else None
    return ctx.is_model(call.receiver) or (after is not None and
                                           after.text.decode() in MODULE_METHODS)


def _inner_of_chain(call: Call) -> bool:
    """`x.cpu()` in `x.cpu().numpy()`: only the outermost sync of a chain is reported."""
    parent = call.node.parent
    grand = parent.parent if parent is not None else None
    return parent is not None and parent.type == "attribute" and grand is not None and \
        grand.type == "call" and \
        (parent.child_by_field_name("attribute").text.decode() in SYNC_METHODS)


def _step_loop(ctx: Context, loops: list[Region]) -> Region | None:
    """The innermost loop around the sync that trains, if it is a per-step loop."""
    for loop in loops:
        if ctx.loop_trains(loop):
            return loop if training.is_step_loop(ctx.project, ctx.file, loop) else None
    return None


def _repeat_inside(node: Node, step: Region) -> Node | None:
    """The outermost loop or comprehension between `node` and the step loop, if any."""
    found = None
    current = node.parent
    while current is not None and current != step.node:
        if current.type in REPEATING:
            found = current
        current = current.parent
    return found
