"""TV022: model.eval() inside a training loop with no model.train() back."""

from __future__ import annotations

from typing import Iterator

from tree_sitter import Node

from tvis_tui.check import trained, training
from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.index import Call
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import text


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
            if switch.method is None or not trained.is_trained(ctx.project, ctx.file,
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
