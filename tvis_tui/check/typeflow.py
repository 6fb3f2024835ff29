"""Types of values, as far as the code proves them: constructor calls, names assigned once,
factory functions' returns, tuple unpacking, annotations, and the arguments every call site
passes. `Project` (project.py) inherits these answers; rules reach them through `Context`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.files import FileModel, FunctionRef
from tvis_tui.check.symbols import parameters
from tvis_tui.check.syntax import text, unwrap

if TYPE_CHECKING:
    from tvis_tui.check.project import Project

MAX_DEPTH = 6
"""How many hops (assignments, call sites) a type or call-graph question follows."""


class TypeFlow:
    """The type questions of `Project`; relies on its call graph and class look-ups."""

    def type_of(self: "Project", fm: FileModel, node: Node | None, depth: int = 0) -> str | None:
        """The qualified class name of the value `node` evaluates to, when the code proves it:
        `nn.CrossEntropyLoss()` -> `torch.nn.CrossEntropyLoss`; a name assigned once follows
        its value; a parameter follows its annotation or the arguments at its call sites."""
        node = unwrap(node)
        if node is None or depth > MAX_DEPTH:
            return None
        if depth == 0:  # memoise whole answers only: deeper ones may be cut short by depth
            key = ("type_of", id(fm), node.id)
            if key not in self.memo:
                self.memo[key] = self._type_of(fm, node, 0)
            return self.memo[key]
        return self._type_of(fm, node, depth)

    def _type_of(self, fm: FileModel, node: Node, depth: int) -> str | None:
        if node.type == "call":
            return self._type_of_call(fm, node, depth)
        if node.type == "identifier" and text(node) == "self":
            cls = self.enclosing_class(fm, node)
            return f"{fm.module}.{cls.name}" if cls is not None else None
        if node.type == "subscript":
            return self._item_type(fm, node.child_by_field_name("value"), depth)
        if node.type not in ("identifier", "attribute"):
            return None
        bindings = fm.symbols.bindings_of(node)
        if bindings and len(bindings) == 1 and bindings[0][0].id in fm.symbols.unpacked:
            value, position = fm.symbols.unpacked[bindings[0][0].id]
            return self._element_type(fm, value, position, depth)
        values = [value for _, value in bindings] if bindings else None
        if values:
            # `model = model.to(device)` re-binds the same object: only the others count
            kept = [v for v in values if v is None or not _rebinds(fm, v, text(node))]
            if not kept or None in kept:
                return None
            return _unanimous(self.type_of(fm, v, depth + 1) for v in kept)
        if node.type == "identifier" and fm.symbols.is_parameter(node):
            return self._type_of_parameter(fm, node, depth)
        return None

    def _item_type(self, fm: FileModel, container: Node | None, depth: int) -> str | None:
        """`loaders["train"]` where `loaders = {"train": DataLoader(...), ...}` (here, or
        passed in as an argument): the type all items of the dict or list share."""
        found = self._written_out(fm, container, depth)
        if not found:
            return None
        types = []
        for cfm, literal in found:
            if literal.type == "dictionary":
                items = [pair.child_by_field_name("value") for pair in literal.named_children
                         if pair.type == "pair"]
            else:
                items = literal.named_children
            types += [self.type_of(cfm, item, depth + 1) for item in items] or [None]
        return _unanimous(types)

    def _written_out(self, fm: FileModel, node: Node | None,
                     depth: int) -> list[tuple[FileModel, Node]]:
        """The dict/list/tuple literals a name holds, following parameters to call sites."""
        node = unwrap(node)
        if node is None or depth > MAX_DEPTH:
            return []
        if node.type in ("dictionary", "list", "tuple"):
            return [(fm, node)]
        if node.type not in ("identifier", "attribute"):
            return []
        value = fm.symbols.value_of(node)
        if value is not None:
            return self._written_out(fm, value, depth + 1)
        if node.type != "identifier" or not fm.symbols.is_parameter(node) or self._building:
            return []
        function = fm.index.function_of(node)
        names = [name for name, _, _ in parameters(function)]
        position = names.index(text(node))
        found = []
        for cfm, arg in self.arguments_for(FunctionRef(fm, function), position, text(node)):
            literals = self._written_out(cfm, arg, depth + 1)
            if not literals:
                return []  # one call site passes something else: no common answer
            found += literals
        return found

    def _element_type(self, fm: FileModel, value: Node, position: int,
                      depth: int) -> str | None:
        """The type of element `position` of a tuple: written out, or returned by a project
        function (`train_loader, val_loader = build_loaders()`)."""
        value = unwrap(value)
        if value is None or depth > MAX_DEPTH:
            return None
        if value.type in ("tuple", "expression_list"):
            items = value.named_children
            if position < len(items) and not any(i.type == "list_splat" for i in items):
                return self.type_of(fm, items[position], depth + 1)
            return None
        call = fm.index.call_at(value) if value.type == "call" else None
        if call is None or call.func is None or call.func.type != "identifier":
            return None
        returned = [(ref.file, v) for ref in self._resolve_name(fm, call.name)
                    for v in self.returned(ref)]
        return _unanimous(self._element_type(rfm, v, position, depth + 1)
                          for rfm, v in returned) if returned else None

    def _type_of_call(self, fm: FileModel, node: Node, depth: int) -> str | None:
        call = fm.index.call_at(node)
        if call is None:
            return None
        if call.method in kinds.SELF_RETURNING_METHODS and call.receiver is not None:
            return self.type_of(fm, call.receiver, depth + 1)
        qual = fm.symbols.qualname(call.func)
        if qual == "torch.compile" and call.args:
            return self.type_of(fm, call.args[0], depth + 1)
        if call.func is not None and call.func.type == "identifier" and \
                self.project_class(qual, fm) is None:
            returned = [(ref.file, value) for ref in self._resolve_name(fm, call.name)
                        for value in self.returned(ref)]
            if returned:  # a factory function: the type of what it returns
                return _unanimous(self.type_of(rfm, expr, depth + 1) for rfm, expr in returned)
        return qual

    def _type_of_parameter(self, fm: FileModel, node: Node, depth: int) -> str | None:
        function = fm.index.function_of(node)
        name = text(node)
        params = parameters(function)
        for position, (pname, annotation, default) in enumerate(params):
            if pname != name:
                continue
            if annotation is not None:
                return fm.symbols.qualname(annotation.named_children[0]
                                           if annotation.named_children else annotation)
            if self._building:
                return None
            found = [self.type_of(cfm, arg, depth + 1)
                     for cfm, arg in self.arguments_for(FunctionRef(fm, function), position, pname)]
            if default is not None:
                found.append(self.type_of(fm, default, depth + 1))
            return _unanimous(found)
        return None

    def is_optimizer(self, fm: FileModel, node: Node | None) -> bool:
        qual = self.type_of(fm, node)
        if qual is None:
            return False
        if kinds.is_optimizer_class(qual) or qual in kinds.OPTIMIZER_BASES:
            return True  # a constructor call, or an annotation with the base class
        cls = self.project_class(qual, fm)
        return cls is not None and self.class_inherits(*cls, kinds.OPTIMIZER_BASES)

    def is_model(self, fm: FileModel, node: Node | None) -> bool:
        qual = self.type_of(fm, node)
        if qual is None:
            return False
        if qual in kinds.MODULE_BASES or kinds.is_torch_module_class(qual) or \
                kinds.is_model_factory(qual):
            return True
        cls = self.project_class(qual, fm)
        return cls is not None and self.class_inherits(*cls, kinds.MODULE_BASES)

    def loss_class(self, fm: FileModel, node: Node | None) -> str | None:
        """`torch.nn.CrossEntropyLoss` when `node` is (a name bound to) that loss module."""
        qual = self.type_of(fm, node)
        return qual if qual is not None and kinds.is_loss_class(qual) else None

    def is_dataloader(self, fm: FileModel, node: Node | None) -> bool:
        return self.type_of(fm, node) in kinds.DATALOADERS


def _unanimous(types) -> str | None:
    """The one type all answers agree on; None if they differ or any is unknown."""
    found = set(types)
    return found.pop() if len(found) == 1 else None


def _rebinds(fm: FileModel, value: Node, name: str) -> bool:
    """`name.to(device)`, `name.cuda()`, `torch.compile(name)`: the same object again."""
    value = unwrap(value)
    call = fm.index.call_at(value) if value is not None and value.type == "call" else None
    if call is None:
        return False
    if call.method in kinds.SELF_RETURNING_METHODS and call.receiver is not None:
        return text(unwrap(call.receiver)) == name
    return fm.symbols.qualname(call.func) == "torch.compile" and bool(call.args) and \
        text(call.args[0]) == name
