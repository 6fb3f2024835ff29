"""Per-file names: import aliases, qualified names of expressions, and assignment tracking.

`qualname(node)` turns `nn.CrossEntropyLoss` into `torch.nn.CrossEntropyLoss` after
`from torch import nn` (or after `nn = torch.nn`); `value_of(name)` follows a name to the one
expression assigned to it.
"""

from __future__ import annotations

from tree_sitter import Node

from tvis_tui.check.index import FileIndex, Region
from tvis_tui.check.kinds import ALIASED_LIBRARIES, star_origin
from tvis_tui.check.syntax import dotted, text, unwrap

_UNKNOWN = None  # an assignment whose value cannot be followed (tuple target, loop variable)
_PATTERNS = ("pattern_list", "tuple_pattern", "list_pattern", "tuple", "list")
_STARRED = ("list_splat", "list_splat_pattern")


class Symbols:
    """Import aliases and assignments of one file."""

    def __init__(self, index: FileIndex, module: str = "__main__") -> None:
        self.index = index
        self.module = module
        self.imports: dict[str, str] = {}
        self.star_modules: list[str] = []
        """Modules imported with `from M import *`, in file order."""
        self.bindings: dict[tuple[Region, str], list[tuple[Node, Node | None]]] = {}
        self._params: dict[int, set[str]] = {}
        self._qualnames: dict[int, str | None] = {}
        self._top_names: set[str] | None = None
        self._candidates: set[str] | None = None
        self.unpacked: dict[int, tuple[Node, int]] = {}
        """Target node id -> (value, position) for `a, b = value` (followed by type_of)."""
        for node in index.import_nodes:
            self._add_import(node)
        for node in index.assignments:
            self._add_assignment(node)
        for node in index.aug_assignments:
            self._bind(node.child_by_field_name("left"), _UNKNOWN)
        for loop in index.loops:
            if loop.kind == "for":
                self._bind(loop.node.child_by_field_name("left"), _UNKNOWN)
        for block in index.withs:  # `with autocast() as ctx:` binds ctx to an unknown value
            for item in block.node.child(1).named_children if block.node.child(1) else ():
                value = item.child_by_field_name("value")
                if value is not None and value.type == "as_pattern":
                    alias = value.child_by_field_name("alias")
                    self._bind(alias.named_children[0] if alias and alias.named_children
                               else None, _UNKNOWN)

    # -- imports ---------------------------------------------------------------------------
    def _add_import(self, node: Node) -> None:
        if node.type == "import_statement":
            for item in node.children_by_field_name("name"):
                if item.type == "aliased_import":
                    self.imports[text(item.child_by_field_name("alias"))] = text(
                        item.child_by_field_name("name"))
                else:
                    head = text(item).split(".", 1)[0]
                    self.imports[head] = head
            return
        module = text(node.child_by_field_name("module_name")).lstrip(".")
        if any(child.type == "wildcard_import" for child in node.children):
            self.star_modules.append(module)
        for item in node.children_by_field_name("name"):
            if item.type == "aliased_import":
                name = text(item.child_by_field_name("name"))
                alias = text(item.child_by_field_name("alias"))
            else:
                name = alias = text(item)
            self.imports[alias] = f"{module}.{name}" if module else name

    def qualname(self, node: Node | None) -> str | None:
        """`torch.nn.functional.softmax` for `F.softmax` after `import torch.nn.functional as F`.

        Names that are not imported resolve only when they are defined as a class or
        function in this file, to `<module>.Name` (`Net` in models/net.py ->
        `models.net.Net`), the same name an import of it elsewhere yields, or when they are
        an alias of a torch name (`nn = torch.nn`, see `_alias_origin`); else None.
        """
        if node is None:
            return None
        key = node.id
        if key not in self._qualnames:
            self._qualnames[key] = None  # ends alias cycles (`a = b`, `b = a`) as unknown
            self._qualnames[key] = self._qualname(node)
        return self._qualnames[key]

    def _qualname(self, node: Node) -> str | None:
        head = unwrap(node)
        while head is not None and head.type == "attribute":
            head = head.child_by_field_name("object")
        if head is None or head.type != "identifier":
            return None
        name = text(head)
        alias = star = None
        if name not in self.imports and not self._defined_here(name):
            alias = self._alias_origin(head)
            star = self._star_origin(head) if alias is None else None
            if alias is None and star is None:
                return None  # the common case (`self.fc`, `x.view`): answer before building
        chain = dotted(unwrap(node))
        if chain is None:
            return None
        head, _, rest = chain.partition(".")
        base = self.imports.get(head, alias)
        if base is not None:
            return f"{base}.{rest}" if rest else base
        if not rest and self._defined_here(head):
            return f"{self.module}.{head}"
        if star is not None:
            return f"{star}.{chain}"
        return None

    def _alias_origin(self, name: Node) -> str | None:
        """What `nn` stands for after `nn = torch.nn` (or `F = nn.functional`, `CE =
        nn.CrossEntropyLoss`): the one value assigned to the name in its scope, when that
        value is a plain dotted name of a followed library. A name assigned more than once,
        a loop variable or a parameter may hold something else, so it stays unknown."""
        if text(name) not in self._alias_candidates():
            return None  # the common case: `x = f()`, parameters, loop variables
        found = self.bindings_of(name)
        value = unwrap(found[0][1]) if found is not None and len(found) == 1 else None
        if value is None or value.type not in ("identifier", "attribute"):
            return None
        origin = self.qualname(value)
        return origin if origin is not None and \
            origin.split(".", 1)[0] in ALIASED_LIBRARIES else None

    def _alias_candidates(self) -> set[str]:
        """Names assigned somewhere from a bare name or attribute chain (`nn = torch.nn`)."""
        if self._candidates is None:
            self._candidates = {key for (_, key), pairs in self.bindings.items()
                             if any(value is not None and unwrap(value).type in
                                    ("identifier", "attribute") for _, value in pairs)}
        return self._candidates

    def _star_origin(self, name: Node) -> str | None:
        """The torch module a bare name comes from through `from torch.nn import *`; None
        when the file binds the name itself (an assignment or a parameter shadows it)."""
        if not self.star_modules or self.bindings_of(name) is not None or \
                self.is_parameter(name):
            return None
        return star_origin(text(name), self.star_modules)

    def qualname_of_name(self, name: str) -> str | None:
        """The qualified name a bare identifier resolves to (see `qualname`)."""
        if name in self.imports:
            return self.imports[name]
        return f"{self.module}.{name}" if self._defined_here(name) else None

    def _defined_here(self, name: str) -> bool:
        if self._top_names is None:
            index = self.index
            self._top_names = {r.name for r in index.classes} | {
                r.name for r in index.functions if r.parent is index.module}
        return name in self._top_names

    # -- assignments -----------------------------------------------------------------------
    def _add_assignment(self, node: Node) -> None:
        value = node.child_by_field_name("right")
        targets = [node.child_by_field_name("left")]
        while value is not None and value.type == "assignment":  # a = b = value
            targets.append(value.child_by_field_name("left"))
            value = value.child_by_field_name("right")
        for target in targets:
            self._bind(target, value)

    def _bind(self, target: Node | None, value: Node | None) -> None:
        target = unwrap(target)
        if target is None:
            return
        if target.type in _PATTERNS:
            elements = [e for e in target.named_children if e.type != "comment"]
            paired = _paired_values(elements, value)
            for position, element in enumerate(elements):
                if value is not None:
                    self.unpacked[element.id] = (value, position)
                self._bind(element, paired[position] if paired else _UNKNOWN)
            return
        key = self._key(target)
        if key is not None:
            self.bindings.setdefault((self._scope_for(target, key), key), []).append(
                (target, value))

    def _key(self, target: Node) -> str | None:
        if target.type == "identifier":
            return text(target)
        chain = dotted(target)
        return chain if chain is not None and chain.startswith("self.") else None

    def _scope_for(self, node: Node, key: str) -> Region:
        if key.startswith("self."):
            region = self.index.region_at(node)
            while region.kind not in ("class", "module"):
                region = region.parent
            return region
        return self.index.function_of(node)

    def bindings_of(self, node: Node | None) -> list[tuple[Node, Node | None]] | None:
        """(target, value) of every assignment to the name or `self.x` at `node`, in the
        scope the name lives in (its function, else the module; the class for `self.x`).
        Values are None where they cannot be followed (loop variables, tuple targets, `+=`).
        None when the name is never assigned in this file (a parameter, import, builtin)."""
        node = unwrap(node)
        key = self._key(node) if node is not None else None
        if key is None:
            return None
        scope = self._scope_for(node, key)
        if not key.startswith("self.") and scope.kind == "function":
            if key in self.parameter_names(scope):
                return None
            if (scope, key) not in self.bindings:
                scope = self.index.module
        return self.bindings.get((scope, key))

    def assigned_values(self, node: Node | None) -> list[Node | None] | None:
        found = self.bindings_of(node)
        return None if found is None else [value for _, value in found]

    def value_of(self, node: Node | None) -> Node | None:
        """The expression assigned to this name, when it is assigned exactly once."""
        found = self.bindings_of(node)
        return found[0][1] if found is not None and len(found) == 1 else None

    def parameter_names(self, function: Region) -> set[str]:
        key = id(function.node)
        if key not in self._params:
            self._params[key] = {name for name, _, _ in parameters(function)}
        return self._params[key]

    def is_parameter(self, node: Node) -> bool:
        """Whether identifier `node` names a parameter of its enclosing function."""
        scope = self.index.function_of(node)
        return scope.kind == "function" and text(node) in self.parameter_names(scope)


def parameters(function: Region) -> list[tuple[str, Node | None, Node | None]]:
    """(name, annotation, default) for each named parameter of a function region."""
    found = []
    params = function.node.child_by_field_name("parameters")
    for param in params.named_children if params is not None else ():
        if param.type == "identifier":
            found.append((text(param), None, None))
        elif param.type in ("typed_parameter", "typed_default_parameter", "default_parameter"):
            name = param.child_by_field_name("name") or param.named_children[0]
            if name.type != "identifier":
                continue
            found.append((text(name), param.child_by_field_name("type"),
                          param.child_by_field_name("value")))
    return found


def _paired_values(elements: list[Node], value: Node | None) -> list[Node] | None:
    """The values written out for each target of `a, b = [], 0` (so `a` is known to be a
    list, as with `a = []`); None when the value is not a literal tuple of the same length
    or either side is starred (`a, *rest = ...`)."""
    value = unwrap(value)
    if value is None or value.type not in ("expression_list", "tuple", "list"):
        return None
    items = [item for item in value.named_children if item.type != "comment"]
    if len(items) != len(elements) or any(n.type in _STARRED for n in items + elements):
        return None
    return items
