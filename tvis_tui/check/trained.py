"""Which models an optimizer trains, across the checked files: the `X` in
`Optimizer(X.parameters())`, followed through names, `self.x = x.to(device)` and the
arguments passed for a parameter (TV022)."""

from __future__ import annotations

from tree_sitter import Node

from tvis_tui.check import kinds
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
