"""`Context`: the one object a rule's `check()` receives — the file, the project, and the
semantic questions rules ask, each a short method. See `tvis_tui/check/rules/__init__.py`."""

from __future__ import annotations

from typing import Iterable

from tree_sitter import Node

from tvis_tui.check import training
from tvis_tui.check.findings import Finding, Severity
from tvis_tui.check.graph import FUNCTIONAL_LOSSES
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.syntax import dotted, text, unwrap


BUILTINS = frozenset({"print", "len", "range", "enumerate", "zip", "isinstance", "super", "int",
                      "float", "str", "list", "dict", "tuple", "set", "min", "max", "sum",
                      "sorted", "getattr", "setattr", "hasattr", "open", "iter", "next", "type",
                      "abs", "round", "any", "all", "map", "filter", "repr", "format", "bool"})


class Context:
    """What one rule sees of one file (and, through `project`, of every checked file)."""

    def __init__(self, project: Project, file: FileModel, rule: type[Rule]) -> None:
        self.project = project
        self.file = file
        self.index = file.index
        self.symbols = file.symbols
        self.rule = rule

    # -- reporting -------------------------------------------------------------------------
    def finding(self, node: Node, message: str, fix: str | None = None,
                severity: Severity | None = None) -> Finding:
        """A finding of this rule spanning `node` (only its first line is underlined);
        `severity` overrides the rule's for this finding (a milder variant of the bug)."""
        (row, col), (end_row, end_col) = node.start_point, node.end_point
        return Finding(
            path=self.file.path, line=row + 1, column=col + 1,
            end_line=end_row + 1, end_column=end_col + 1, rule=self.rule.id,
            category=self.rule.category, severity=severity or self.rule.severity,
            message=message,
            fix=fix if fix is not None else self.rule.fix,
        )

    # -- syntax ----------------------------------------------------------------------------
    @staticmethod
    def text(node: Node | None) -> str:
        return text(node)

    @staticmethod
    def dotted(node: Node | None) -> str | None:
        """`a.b.c` for a chain of names (parentheses ignored), else None."""
        return dotted(unwrap(node))

    @property
    def calls(self) -> list[Call]:
        return self.index.calls

    def calls_named(self, *names: str) -> list[Call]:
        """Calls whose callee is the bare name or ends in the attribute (`x.step()` -> "step")."""
        if len(names) == 1:
            return self.index.calls_by_name.get(names[0], [])
        found = [c for n in names for c in self.index.calls_by_name.get(n, [])]
        return sorted(found, key=lambda c: c.node.start_byte)

    def call_at(self, node: Node | None) -> Call | None:
        """The Call for a `call` node (parentheses ignored), else None."""
        node = unwrap(node)
        return self.index.call_at(node) if node is not None and node.type == "call" else None

    def calls_in(self, node: Node) -> list[Call]:
        return self.index.calls_in(node)

    # -- names and types -------------------------------------------------------------------
    def qualname(self, node: Node | None) -> str | None:
        return self.symbols.qualname(node)

    def value_of(self, node: Node | None) -> Node | None:
        return self.symbols.value_of(node)

    def latest_binding(self, name: Node, at: Node) -> tuple[Node, Node | None] | None:
        """(target, value) of the last assignment to `name` before `at` in the function that
        holds `at` (value None when it cannot be followed); None when there is none."""
        function = self.index.function_of(at)
        earlier = [(target, value) for target, value in self.symbols.bindings_of(name) or ()
                   if target.start_byte < at.start_byte and function.contains(target)]
        return max(earlier, key=lambda pair: pair[0].start_byte) if earlier else None

    def resolve(self, node: Node | None) -> Node | None:
        """Follow names assigned exactly once to the expression they hold (`node` itself when
        it is not such a name)."""
        seen = 0
        node = unwrap(node)
        while node is not None and node.type in ("identifier", "attribute") and seen < 6:
            value = self.symbols.value_of(node)
            if value is None:
                break
            node, seen = unwrap(value), seen + 1
        return node

    def type_of(self, node: Node | None) -> str | None:
        return self.project.type_of(self.file, node)

    def is_optimizer(self, node: Node | None) -> bool:
        return self.project.is_optimizer(self.file, node)

    def is_model(self, node: Node | None) -> bool:
        return self.project.is_model(self.file, node)

    def loss_class(self, node: Node | None) -> str | None:
        return self.project.loss_class(self.file, node)

    def loss_calls(self) -> list[tuple[Call, str]]:
        """(call, loss qualname) for every call of a loss module or functional loss here."""
        key = ("loss_calls", id(self.file))
        if key not in self.project.memo:
            found = [(call, self.loss_of_call(call)) for call in self.index.calls]
            self.project.memo[key] = [(call, qual) for call, qual in found if qual]
        return self.project.memo[key]

    def loss_of_call(self, call: Call) -> str | None:
        """`torch.nn.CrossEntropyLoss` when `call` runs a loss module (`crit(out, y)`,
        `self.criterion(...)`), `torch.nn.functional.cross_entropy` for a functional loss."""
        key = ("loss_of_call", id(call))
        if key not in self.project.memo:
            self.project.memo[key] = self._loss_of_call(call)
        return self.project.memo[key]

    def _loss_of_call(self, call: Call) -> str | None:
        if call.func is None:
            return None
        qual = self.symbols.qualname(call.func)
        if qual is not None and qual.startswith("torch.nn.functional."):
            return qual if qual.rsplit(".", 1)[-1] in FUNCTIONAL_LOSSES and call.args else None
        if qual is not None and qual.startswith("torch."):
            return None
        # Loss modules are called as `crit(...)`, `self.crit(...)`, `Loss()(...)` or
        # `crit.forward(...)`; skipping other method calls keeps this cheap on big files.
        if call.method is not None and call.method != "forward" and \
                (call.receiver is None or call.receiver.type != "identifier"
                 or call.receiver.text != b"self"):
            return None
        # every loss module takes a prediction and a target: one-argument calls are layers
        if call.method is None and call.name in BUILTINS or \
                len(call.args) + len(call.kwargs) < 2 and not call.has_splat:
            return None
        target = call.receiver if call.method == "forward" else call.func
        return self.loss_class(target)

    def is_dataloader(self, node: Node | None) -> bool:
        return self.project.is_dataloader(self.file, node)

    # -- training structure ----------------------------------------------------------------
    def is_backward(self, call: Call) -> bool:
        return training.is_backward(self.project, self.file, call)

    def is_optimizer_step(self, call: Call) -> bool:
        return training.is_optimizer_step(self.project, self.file, call)

    def step_events(self) -> list[tuple[Call, Node | None]]:
        """(call, optimizer expression) for every optimizer step here, including calls of
        checked-file helpers that step (`self._optimizer_step()`), in source order."""
        return training.step_events(self.project, self.file)

    def is_zero_grad(self, call: Call) -> bool:
        return training.is_zero_grad(call)

    def grad_resets(self, node: Node) -> list[Node]:
        return training.grad_resets(self.file, node)

    def reaches(self, node: Node, direct: training.NodeTest) -> bool:
        """Whether running `node` does what `direct(project, file, node)` looks for, in
        `node` itself or in any checked-file function it calls (transitively)."""
        return training.reaches(self.project, self.file, node, direct)

    def runs_step(self, node: Node) -> bool:
        """An optimizer step inside `node` or in a function it calls."""
        return self.reaches(node, training.steps_directly)

    def runs_grad_reset(self, node: Node) -> bool:
        """A zero_grad / `p.grad = None` inside `node` or in a function it calls."""
        return self.reaches(node, training.resets_directly)

    def loops_around(self, node: Node) -> list[Region]:
        return self.index.loops_around(node)

    def loop_trains(self, loop: Region) -> bool:
        return training.loop_trains(self.project, self.file, loop)

    def training_loops(self) -> list[Region]:
        return training.training_loops(self.project, self.file)

    def repeats(self, node: Node) -> list[training.Repeat]:
        return training.repeats(self.project, self.file, node)

    def in_training_iteration(self, node: Node) -> bool:
        """Whether `node` runs once per training iteration: inside (or called from inside) a
        loop that trains, or in a Lightning `training_step`."""
        return any(r.loop is None or training.loop_trains(self.project, r.file, r.loop)
                   for r in self.repeats(node))

    def grad_disabled(self, node: Node) -> bool:
        return training.grad_disabled(self.project, self.file, node)

    def context_managers(self, node: Node) -> list[str]:
        """Qualified names of the `with` items and decorators around `node`, innermost first."""
        return [qual for qual, _ in training.context_managers(self.file, node)]

    def function_of(self, node: Node) -> Region:
        return self.index.function_of(node)

    def callers(self, function: Region) -> Iterable[tuple[FileModel, Call]]:
        return self.project.callers(training.FunctionRef(self.file, function))
