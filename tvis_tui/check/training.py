"""Training-loop facts: what is a backward/step/zero_grad, which loops train, what runs
repeatedly, and where gradients are disabled — within a file and through the call graph."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.index import Call, Region
from tvis_tui.check.project import MAX_DEPTH, FileModel, FunctionRef, Project
from tvis_tui.check.syntax import dotted, text, unwrap

BACKWARD_METHODS = frozenset({"backward", "manual_backward"})
LIGHTNING_STEP_HOOKS = frozenset({"training_step"})


def is_backward(project: Project, fm: FileModel, call: Call) -> bool:
    """`loss.backward()`, `scaler.scale(loss).backward()`, `accelerator.backward(loss)`,
    `self.manual_backward(loss)`, `torch.autograd.backward(loss)`."""
    if call.method in BACKWARD_METHODS:
        return True
    return call.name == "backward" and fm.symbols.qualname(call.func) == "torch.autograd.backward"


def is_optimizer_step(project: Project, fm: FileModel, call: Call) -> bool:
    """`opt.step()` on a proven optimizer, `scaler.step(opt)`, or — when the receiver's type
    cannot be known (an untyped parameter) — a receiver named like an optimizer."""
    if call.method != "step" or call.receiver is None:
        return False
    receiver_type = project.type_of(fm, call.receiver)
    if receiver_type is not None:
        if receiver_type.endswith("GradScaler"):
            return True
        return project.is_optimizer(fm, call.receiver)
    name = dotted(unwrap(call.receiver))
    return name is not None and bool(kinds.OPTIMIZER_NAME.search(name.rsplit(".", 1)[-1].lower()))


def is_zero_grad(call: Call) -> bool:
    """`optimizer.zero_grad()`, `model.zero_grad(set_to_none=True)`, `p.grad.zero_()`."""
    if call.method == "zero_grad":
        return True
    if call.method in ("zero_", "detach_") and call.receiver is not None:
        chain = dotted(unwrap(call.receiver)) or ""
        return chain.endswith(".grad") or chain.endswith(".grad.data")
    return False


def grad_resets(fm: FileModel, node: Node) -> list[Node]:
    """`zero_grad` calls and `p.grad = None` assignments inside `node`, in source order."""
    found = [c.node for c in fm.index.calls_in(node) if is_zero_grad(c)]
    start, end = node.start_byte, node.end_byte
    for assign in fm.index.assignments:
        if start <= assign.start_byte and assign.end_byte <= end:
            left = assign.child_by_field_name("left")
            if left is not None and left.type == "attribute" and \
                    text(left.child_by_field_name("attribute")) == "grad":
                found.append(assign)
    return sorted(found, key=lambda n: n.start_byte)


NodeTest = Callable[[Project, FileModel, Node], bool]


def reaches(project: Project, fm: FileModel, node: Node, direct: NodeTest,
            depth: int = 0) -> bool:
    """Whether running `node` does what `direct` looks for, in `node` itself or in a
    checked-file function it calls (transitively, memoised per test and function)."""
    if direct(project, fm, node):
        return True
    if depth >= MAX_DEPTH:
        return False
    for call in fm.index.calls_in(node):
        if call.name in project.functions or call.name in project.classes:
            for ref in project.callees(fm, call):
                if _function_reaches(project, ref, direct, depth + 1):
                    return True
    return False


def _function_reaches(project: Project, ref: FunctionRef, direct: NodeTest, depth: int) -> bool:
    key = (direct, id(ref.region.node))
    if key not in project.memo:
        project.memo[key] = False  # recursion guard
        project.memo[key] = reaches(project, ref.file, ref.region.node, direct, depth)
    return project.memo[key]


def trains_directly(project: Project, fm: FileModel, node: Node) -> bool:
    return any(is_backward(project, fm, c) or is_optimizer_step(project, fm, c)
               for c in fm.index.calls_in(node))


def steps_directly(project: Project, fm: FileModel, node: Node) -> bool:
    return any(is_optimizer_step(project, fm, c) for c in fm.index.calls_in(node))


def resets_directly(project: Project, fm: FileModel, node: Node) -> bool:
    return bool(grad_resets(fm, node))


def loop_trains(project: Project, fm: FileModel, loop: Region) -> bool:
    """Whether a loop's body runs backward() or an optimizer step (through calls too)."""
    body = loop.body
    return body is not None and reaches(project, fm, body, trains_directly)


def training_loops(project: Project, fm: FileModel) -> list[Region]:
    return [loop for loop in fm.index.loops if loop_trains(project, fm, loop)]


def is_step_loop(project: Project, fm: FileModel, loop: Region) -> bool:
    """Whether `loop` is a per-step loop: it trains, and no loop inside it (in its body or
    in a function it calls) trains too — so an epoch loop is not one."""
    return loop_trains(project, fm, loop) and not reaches(
        project, fm, loop.body, _holds_training_loop)


def _holds_training_loop(project: Project, fm: FileModel, node: Node) -> bool:
    return any(node.start_byte <= inner.start and inner.end <= node.end_byte and
               loop_trains(project, fm, inner) for inner in fm.index.loops)


GATES = frozenset({"if_statement", "elif_clause", "else_clause", "conditional_expression",
                   "try_statement", "except_clause", "boolean_operator", "lambda"})
"""Syntax that makes the code inside it run only sometimes (every N steps, on error)."""


def gated(node: Node, stop: Node) -> bool:
    """Whether an `if`, `try`/`except`, `and`/`or` or lambda lies between `node` and `stop`."""
    current = node.parent
    while current is not None and current != stop:
        if current.type in GATES:
            return True
        current = current.parent
    return False


def runs_every_step(project: Project, fm: FileModel, node: Node, depth: int = 0) -> bool:
    """Whether `node` runs unconditionally on every training step: in a per-step loop with
    no `if`/`try` between, or in a function called that way (from any call site)."""
    loops = fm.index.loops_around(node)
    if loops:
        return is_step_loop(project, fm, loops[0]) and not gated(node, loops[0].node)
    function = fm.index.function_of(node)
    if function.kind != "function" or depth >= MAX_DEPTH or gated(node, function.node):
        return False
    return any(runs_every_step(project, cfm, call.node, depth + 1)
               for cfm, call in project.callers(FunctionRef(fm, function)))


@dataclass(frozen=True)
class Repeat:
    """Why a node runs many times: `loop` in `file`, or a framework hook (loop is None)."""

    file: FileModel
    loop: Region | None
    hook: str = ""


def repeats(project: Project, fm: FileModel, node: Node, depth: int = 0) -> list[Repeat]:
    """What runs `node` over and over: the loops around it in its own function, else the loops
    around the calls of its function (transitively), else a Lightning `training_step` hook."""
    own = fm.index.loops_around(node)
    if own:
        return [Repeat(fm, loop) for loop in own]
    function = fm.index.function_of(node)
    if function.kind != "function" or depth >= MAX_DEPTH:
        return []
    if function.name in LIGHTNING_STEP_HOOKS and is_lightning_method(project, fm, function):
        return [Repeat(fm, None, function.name)]
    found: list[Repeat] = []
    for cfm, call in project.invokers(FunctionRef(fm, function)):
        found += repeats(project, cfm, call.node, depth + 1)
    return found


def is_lightning_method(project: Project, fm: FileModel, function: Region) -> bool:
    cls = function.parent
    return cls is not None and cls.kind == "class" and \
        project.class_inherits(fm, cls, kinds.LIGHTNING_BASES)


def context_managers(fm: FileModel, node: Node) -> list[tuple[str, Call]]:
    """(qualified name, call) of each `with` item and decorator around `node`, innermost first,
    across enclosing functions of the same file."""
    found: list[tuple[str, Call]] = []
    for region in fm.index.region_at(node).ancestors():
        if region.kind == "with":
            clause = region.node.child(1)
            calls = fm.index.calls_in(clause) if clause is not None else []
        elif region.kind == "function":
            calls = [c for d in _decorators(region) for c in fm.index.calls_in(d)]
            calls += [_BareDecorator(d) for d in _decorators(region) if d.type != "call"]
        else:
            continue
        for call in calls:
            qual = fm.symbols.qualname(call.func)
            if qual is not None:
                found.append((qual, call))
    return found


class _BareDecorator:
    """`@torch.no_grad` written without parentheses, shaped like a Call for qualname look-up."""

    def __init__(self, node: Node) -> None:
        self.func = node
        self.node = node
        self.args: list[Node] = []


def _decorators(function: Region) -> list[Node]:
    parent = function.node.parent
    if parent is None or parent.type != "decorated_definition":
        return []
    return [d.named_children[0] for d in parent.named_children
            if d.type == "decorator" and d.named_children]


def grad_disabled(project: Project, fm: FileModel, node: Node, depth: int = 0) -> bool:
    """Whether autograd is off at `node`: inside `with torch.no_grad()` / `inference_mode()` /
    `set_grad_enabled(False)`, a function decorated with one, or a function every caller of
    which runs with gradients disabled. The innermost context decides: `enable_grad()` or
    `set_grad_enabled(True)` inside a `no_grad()` turns autograd back on."""
    for qual, call in context_managers(fm, node):
        if qual in kinds.NO_GRAD_CONTEXTS:
            mode = call.args[0] if call.args else None
            if mode is None or text(mode) != "False":  # `inference_mode(False)` is a no-op
                return True
            continue
        if qual in kinds.GRAD_ENABLING_CONTEXTS:
            return False
        if qual == "torch.set_grad_enabled" and call.args:
            if text(call.args[0]) in ("False", "True"):
                return text(call.args[0]) == "False"
    switched = _switched_before(fm, node)
    if switched is not None:
        return not switched
    function = fm.index.function_of(node)
    if function.kind != "function" or depth >= MAX_DEPTH:
        return False
    callers = project.invokers(FunctionRef(fm, function))
    return bool(callers) and all(grad_disabled(project, cfm, call.node, depth + 1)
                                 for cfm, call in callers)


def _switched_before(fm: FileModel, node: Node) -> bool | None:
    """The mode the last `torch.set_grad_enabled(True/False)` statement before `node` in
    its own function (or at module level) left autograd in; None where none did, or where
    the last one sits in a branch `node` is not in (an `if` arm, an early return): there
    the mode depends on the path taken."""
    function = fm.index.function_of(node)
    mode = None
    for call in fm.index.calls_by_name.get("set_grad_enabled", []):
        if call.node.start_byte >= node.start_byte:
            break  # calls are in source order
        if _switch_statement(fm, call) and call.node.end_byte <= node.start_byte and \
                fm.index.function_of(call.node) is function:
            block = call.node.parent.parent
            around = block is not None and block.start_byte <= node.start_byte <= block.end_byte
            mode = text(call.args[0]) == "True" if around else None
    return mode


def _switch_statement(fm: FileModel, call: Call) -> bool:
    """`torch.set_grad_enabled(True)` or `(False)` written as a statement of its own."""
    return call.node.parent is not None and call.node.parent.type == "expression_statement" and \
        bool(call.args) and text(call.args[0]) in ("False", "True") and \
        fm.symbols.qualname(call.func) == "torch.set_grad_enabled"


def step_events(project: Project, fm: FileModel) -> list[tuple[Call, Node | None]]:
    """(call, optimizer expression) for each optimizer step in `fm`, and for each call of a
    checked-file helper that steps without running backward() itself
    (`self._optimizer_step()`), in source order."""
    key = ("step_events", id(fm))
    if key not in project.memo:
        events = []
        for call in fm.index.calls:
            if call.method == "step" and is_optimizer_step(project, fm, call):
                events.append((call, call.args[0] if call.args else call.receiver))
            elif call.name in project.functions:
                for ref in project.callees(fm, call):
                    optimizer = _helper_steps(project, ref)
                    if optimizer is not None:
                        events.append((call, optimizer))
        project.memo[key] = events
    return project.memo[key]


def _helper_steps(project: Project, ref: FunctionRef) -> Node | None:
    """The optimizer a helper steps, when it runs exactly one step and no backward()."""
    key = ("helper_steps", id(ref.region.node))
    if key not in project.memo:
        calls = ref.file.index.calls_in(ref.region.node)
        steps = [c for c in calls
                 if c.method == "step" and is_optimizer_step(project, ref.file, c)]
        alone = len(steps) == 1 and not any(c.method in BACKWARD_METHODS for c in calls)
        project.memo[key] = None if not alone else (
            steps[0].args[0] if steps[0].args else steps[0].receiver)
    return project.memo[key]
