"""TV022: model.eval() inside a training loop with no model.train() back."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import kinds, training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.project import FileModel, FunctionRef, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.symbols import parameters
from tvis_tui.check.syntax import text, unwrap


class EvalWithoutTrain(Rule):
    """The model is switched to eval mode inside the training loop and never switched back.

    What it does:
        Finds `model.eval()` (or `model.train(False)`) that runs inside a loop that trains
        (directly, or in an evaluation function called from it) when nothing in that loop
        calls `.train()` again, and `model` is a model whose parameters an optimizer is
        built over.
    Why is this bad:
        From the first evaluation on, every later training step runs with dropout off and
        batch-norm using (and no longer updating) its running statistics. Training keeps
        going without an error, but regularisation is gone and the model converges to
        something worse than the same script with `model.train()` at the top of the epoch.
    Example:
        for epoch in range(epochs):
            for x, y in train_loader:
                train_step(model, x, y)
            model.eval()
            validate(model)
    Use instead:
        for epoch in range(epochs):
            model.train()
            for x, y in train_loader:
                train_step(model, x, y)
            model.eval()
            validate(model)
    Known limits:
        Any `.train()` call reachable from the loop counts as switching back, whatever
        object it is on. Models that are not optimised (a frozen teacher kept in eval mode
        on purpose) are not reported; nor is a model whose optimizer cannot be found in the
        checked files.
    """

    id = "TV022"
    title = "eval() in the training loop with no train() back"
    severity = Severity.ERROR
    category = Category.CONVERGENCE
    fix = "call model.train() at the start of every epoch (or after evaluating)"

    def check(self, ctx: Context) -> Iterator[Finding]:
        switches = [c for c in ctx.calls_named("eval") if not c.args and not c.kwargs] + \
                   [c for c in ctx.calls_named("train") if _switches_off(c)]
        for switch in switches:
            if switch.method is None or not _is_optimised(ctx.project, ctx.file,
                                                         switch.receiver):
                continue
            for repeat in ctx.repeats(switch.node):
                loop = repeat.loop
                if loop is None or not training.loop_trains(ctx.project, repeat.file, loop):
                    continue
                if not training.reaches(ctx.project, repeat.file, loop.body, _restores_train):
                    line = loop.node.start_point[0] + 1
                    yield ctx.finding(switch.node, f"`{ctx.text(switch.node)}` runs inside "
                                      f"the training loop at {_where(repeat.file, ctx.file)}"
                                      f"line {line} and nothing calls .train() again: later "
                                      "steps train in eval mode")
                    break


def _where(loop_file: FileModel, here: FileModel) -> str:
    return "" if loop_file is here else f"{loop_file.path} "


def _switches_off(call: Call) -> bool:
    """`model.train(False)` / `model.train(mode=False)`."""
    value = call.arg(0, "mode")
    return call.method == "train" and value is not None and text(value) == "False"


def _restores_train(project: Project, fm: FileModel, node: Node) -> bool:
    for call in fm.index.calls_in(node):
        if call.method == "train" and call.receiver is not None and not _switches_off(call):
            return True
    return False


def _is_optimised(project: Project, fm: FileModel, receiver: Node | None) -> bool:
    """Whether an optimizer in the checked files is built over `receiver.parameters()`:
    the same name, or what the name was made from (`self.model = model.to(device)`), or
    the argument passed for it when it is a parameter."""
    names = _optimised_names(project)
    return any(alias in names for alias in _aliases(project, fm, receiver, 0))


def _aliases(project: Project, fm: FileModel, node: Node | None, depth: int) -> set[str]:
    node = unwrap(node)
    if node is None or depth > 4:
        return set()
    if node.type == "call":
        call = fm.index.call_at(node)
        if call is None or call.method not in kinds.SELF_RETURNING_METHODS:
            return set()
        return _aliases(project, fm, call.receiver, depth + 1)
    found = {text(node)}
    value = fm.symbols.value_of(node) if node.type in ("identifier", "attribute") else None
    if value is not None:
        found |= _aliases(project, fm, value, depth + 1)
    for cfm, arg in _arguments_for_name(project, fm, node):
        found |= _aliases(project, cfm, arg, depth + 1)
    return found


def _optimised_names(project: Project) -> set[str]:
    """Texts of `X` in `X.parameters()` handed to an optimizer constructor, plus the
    arguments passed for `X` when it is a function parameter."""
    key = ("optimised_names", id(project))
    if key in project.memo:
        return project.memo[key]
    names: set[str] = set()
    for fm in project.files:
        for call in fm.index.calls_by_name.get("parameters", []) + \
                fm.index.calls_by_name.get("named_parameters", []):
            if call.receiver is None or not _inside_optimizer(fm, call.node):
                continue
            names.add(text(unwrap(call.receiver)))
            names.update(text(unwrap(arg)) for _, arg in _arguments_for_name(
                project, fm, call.receiver))
    project.memo[key] = names
    return names


def _inside_optimizer(fm: FileModel, node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type not in ("function_definition", "module"):
        if parent.type == "call":
            qual = fm.symbols.qualname(parent.child_by_field_name("function"))
            if qual is not None and kinds.is_optimizer_class(qual):
                return True
        parent = parent.parent
    return False


def _arguments_for_name(project: Project, fm: FileModel, node: Node) -> list:
    node = unwrap(node)
    if node is None or node.type != "identifier" or not fm.symbols.is_parameter(node):
        return []
    function = fm.index.function_of(node)
    for position, (name, _, _) in enumerate(parameters(function)):
        if name == text(node):
            return project.arguments_for(FunctionRef(fm, function), position, name)
    return []
