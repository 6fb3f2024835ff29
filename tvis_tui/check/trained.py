"""Which models an optimizer trains, across the checked files: the `X` in
`Optimizer(X.parameters())`, followed through names, `self.x = x.to(device)` and the
arguments passed for a parameter (TV022); and which models are frozen, so their outputs
carry no graph (TV001) and evaluating them needs no no_grad (TV008)."""

from __future__ import annotations

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.index import Call
from tvis_tui.check.project import FileModel, FunctionRef, Project
from tvis_tui.check.symbols import parameters
from tvis_tui.check.syntax import text, unwrap


def is_trained(project: Project, fm: FileModel, receiver: Node | None) -> bool:
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


def is_frozen(project: Project, fm: FileModel, model: Node | None) -> bool:
    """Whether `model` is frozen in its file (`model.requires_grad_(False)`, or
    `p.requires_grad = False` for each `p` in `model.parameters()`) and stays frozen: no
    optimizer is built over it or a part of it, and no part of it is switched back on
    (`model.fc.requires_grad_(True)`). Its outputs then carry no graph of their own."""
    frozen, thawed = _grad_switches(project, fm)
    if not frozen:
        return False
    trained = _optimised_names(project) | thawed
    return any(alias in frozen and not any(n == alias or n.startswith((alias + ".", alias + "["))
                                           for n in trained)
               for alias in _aliases(project, fm, model, 0))


def freezes(fm: FileModel, call: Call) -> str | None:
    """The model `call` switches gradients off for, as text: `m` for
    `m.requires_grad_(False)`, or for `p.requires_grad_(False)` in
    `for p in m.parameters()`; None for any other call."""
    if call.method != "requires_grad_" or call.receiver is None:
        return None
    flag = call.arg(0, "requires_grad")
    return _switched_model(fm, call.receiver) if text(flag) == "False" else None


def _grad_switches(project: Project, fm: FileModel) -> tuple[set[str], set[str]]:
    """(models frozen, models or parts switched back on) in `fm`, as texts."""
    key = ("grad_switches", id(fm))
    if key not in project.memo:
        frozen: set[str] = set()
        thawed: set[str] = set()
        for call in fm.index.calls_by_name.get("requires_grad_", []):
            flag = call.arg(0, "requires_grad")
            model = _switched_model(fm, call.receiver) if call.method else None
            if model is not None:
                (frozen if text(flag) == "False" else thawed).add(model)
        for node in fm.index.assignments:
            target = node.child_by_field_name("left")
            value = node.child_by_field_name("right")
            if target is not None and target.type == "attribute" and \
                    text(target.child_by_field_name("attribute")) == "requires_grad":
                model = _switched_model(fm, target.child_by_field_name("object"))
                if model is not None:
                    (frozen if text(value) == "False" else thawed).add(model)
        project.memo[key] = (frozen, thawed)
    return project.memo[key]


def _switched_model(fm: FileModel, receiver: Node | None) -> str | None:
    """`m` for the receiver `m`, or for a loop variable `p` of `for p in m.parameters()`
    (`for name, p in m.named_parameters()`)."""
    receiver = unwrap(receiver)
    if receiver is None:
        return None
    loop = next((r for r in fm.index.loops_around(receiver) if r.kind == "for"
                 and text(receiver) in {text(n) for n in _loop_names(r.node)}), None)
    if loop is None:
        return text(receiver)
    iterable = unwrap(loop.node.child_by_field_name("right"))
    call = fm.index.call_at(iterable) if iterable is not None and iterable.type == "call" \
        else None
    if call is None or call.method not in ("parameters", "named_parameters"):
        return None
    return text(unwrap(call.receiver))


def _loop_names(loop: Node) -> list[Node]:
    left = loop.child_by_field_name("left")
    return [left] if left is not None and left.type == "identifier" else \
        [n for n in (left.named_children if left is not None else ()) if n.type == "identifier"]
