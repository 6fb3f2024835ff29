"""The semantic layer rules share: types of values, the call graph across the checked files,
training-loop detection and gradient-mode context.

Everything here answers from what the code proves: a constructor call assigned once, a class
that subclasses nn.Module, an annotation, the argument passed at every call site. Names are
used only as a last resort for recognising `optimizer.step()` on an untyped parameter.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node

from tvis_tui.check import kinds
from tvis_tui.check.index import Call, FileIndex, Region
from tvis_tui.check.source import SourceFile
from tvis_tui.check.symbols import Symbols, parameters
from tvis_tui.check.syntax import returns_of, text, unwrap

MAX_DEPTH = 6
"""How many hops (assignments, call sites) a type or call-graph question follows."""



class FileModel:
    """One checked file: its source, index and symbols."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.path = source.path
        self.index = FileIndex(source)
        self.module = module_name(source.path)
        self.symbols = Symbols(self.index, self.module)
        self.package = self.module.rpartition(".")[0]

    def provides(self, module: str) -> bool:
        """Whether `import module` may mean this file: `models` or `pkg.models` for
        pkg/models.py (the checked paths do not say where the import root is)."""
        return self.module == module or self.module.endswith("." + module) or \
            module.endswith("." + self.module)


def module_name(path: str) -> str:
    """`pkg.models` for pkg/models.py, `pkg` for pkg/__init__.py (from the display path)."""
    parts = [p for p in path.replace("\\", "/").removesuffix(".py").split("/")
             if p not in ("", ".", "..")]
    if len(parts) > 1 and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts) or "__main__"


@dataclass(frozen=True)
class FunctionRef:
    """A function (or method) defined in one of the checked files."""

    file: FileModel
    region: Region

    @property
    def is_method(self) -> bool:
        return self.region.parent is not None and self.region.parent.kind == "class"


class Project:
    """All checked files together; answers cross-file questions with memoised look-ups."""

    def __init__(self, files: list[FileModel]) -> None:
        self.files = files
        self.classes: dict[str, list[tuple[FileModel, Region]]] = {}
        self.functions: dict[str, list[FunctionRef]] = {}
        self._by_owner: dict[tuple[int, str], list[FunctionRef]] = {}
        """Functions by (id of their class region, or of their file for plain ones), name."""
        for fm in files:
            for region in fm.index.classes:
                self.classes.setdefault(region.name, []).append((fm, region))
            for region in fm.index.functions:
                ref = FunctionRef(fm, region)
                self.functions.setdefault(region.name, []).append(ref)
                owner = (id(region.parent), region.name) if ref.is_method else (id(fm), region.name)
                self._by_owner.setdefault(owner, []).append(ref)
        self.memo: dict = {}
        """Answers of the analyses in training.py, keyed by (question, node id)."""
        self._callers: dict[int, list[tuple[FileModel, Call]]] | None = None
        self._building = False
        self._by_tail: dict[str, list[FileModel]] | None = None
        self._passed: dict[int, list[tuple[FileModel, Call]]] = {}
        self._subclass: dict[tuple[int, frozenset], bool] = {}

    def imported_files(self, fm: FileModel) -> list[FileModel]:
        """The checked files that `fm` imports (any module named in its imports, or a
        package above one), memoised: rules ask this per loader, loop or call."""
        key = ("imported_files", id(fm))
        if key not in self.memo:
            if self._by_tail is None:
                self._by_tail = {}
                for other in self.files:
                    parts = other.module.split(".")
                    for i in range(len(parts)):
                        self._by_tail.setdefault(".".join(parts[i:]), []).append(other)
            found: list[FileModel] = []
            for qual in fm.symbols.imports.values():
                parts = qual.split(".")
                for n in range(1, len(parts) + 1):
                    # files whose module ends with this prefix, or is a tail of it (provides)
                    candidates = list(self._by_tail.get(".".join(parts[:n]), ()))
                    for i in range(1, n):
                        candidates += [other for other in self._by_tail.get(
                            ".".join(parts[i:n]), ()) if other.module == ".".join(parts[i:n])]
                    for other in candidates:
                        if other is not fm and other not in found:
                            found.append(other)
            self.memo[key] = found
        return self.memo[key]

    # -- classes and types -----------------------------------------------------------------
    def project_class(self, qualname: str | None,
                      near: FileModel | None = None) -> tuple[FileModel, Region] | None:
        """The class a qualified name refers to, when it is defined in the checked files
        (in `near` first when several files could match)."""
        if not qualname:
            return None
        module, _, name = qualname.rpartition(".")
        found = [(fm, region) for fm, region in self.classes.get(name, ())
                 if module and fm.provides(module)]
        exact = [pair for pair in found if pair[0].module == module or pair[0] is near]
        # `from models import Net` with several models.py checked: the one beside the importer
        beside = [pair for pair in found
                  if near is not None and pair[0].package == near.package]
        return (exact or beside or found or [None])[0]

    def class_inherits(self, fm: FileModel, region: Region, bases: frozenset[str],
                       depth: int = 0) -> bool:
        """Whether a project class subclasses one of `bases` (qualified names), transitively."""
        key = (id(region.node), bases)
        if key in self._subclass:
            return self._subclass[key]
        self._subclass[key] = False  # guards against cyclic bases
        result = False
        supers = region.node.child_by_field_name("superclasses")
        for base in supers.named_children if supers is not None and depth < MAX_DEPTH else ():
            qual = fm.symbols.qualname(base)
            if qual in bases:
                result = True
                break
            parent = self.project_class(qual, fm)
            if parent is not None and self.class_inherits(*parent, bases, depth + 1):
                result = True
                break
        self._subclass[key] = result
        return result

    def enclosing_class(self, fm: FileModel, node: Node) -> Region | None:
        for region in fm.index.region_at(node).ancestors():
            if region.kind == "class":
                return region
        return None

    def type_of(self, fm: FileModel, node: Node | None, depth: int = 0) -> str | None:
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

    # -- call graph ------------------------------------------------------------------------
    def callees(self, fm: FileModel, call: Call) -> list[FunctionRef]:
        """The checked-file functions a call may run: `f()`, `self.m()`, `obj.m()` on an
        object of a project class, and `Cls()` (its `__init__`)."""
        func = call.func
        if func is None:
            return []
        if func.type == "identifier":
            return self._resolve_name(fm, call.name)
        if call.method is None or call.receiver is None:
            return []
        receiver_type = self.type_of(fm, call.receiver)
        cls = self.project_class(receiver_type, fm)
        if cls is None:
            return []
        return self._methods(cls[0], cls[1], call.method)

    def _resolve_name(self, fm: FileModel, name: str) -> list[FunctionRef]:
        qual = fm.symbols.qualname_of_name(name)
        cls = self.project_class(qual, fm)
        if cls is not None:
            return self._methods(cls[0], cls[1], "__init__")
        module = qual.rpartition(".")[0] if qual and "." in qual else None
        if module is None or module == fm.module:
            return list(self._by_owner.get((id(fm), name), ()))
        found = [ref for ref in self.functions.get(name, ())
                 if not ref.is_method and ref.file.provides(module)]
        beside = [ref for ref in found if ref.file.package == fm.package]
        return beside or found

    def _methods(self, fm: FileModel, cls: Region, name: str, depth: int = 0) -> list[FunctionRef]:
        found = list(self._by_owner.get((id(cls), name), ()))
        if found or depth >= MAX_DEPTH:
            return found
        supers = cls.node.child_by_field_name("superclasses")
        for base in supers.named_children if supers is not None else ():
            parent = self.project_class(fm.symbols.qualname(base), fm)
            if parent is not None:
                found += self._methods(parent[0], parent[1], name, depth + 1)
        return found

    def returned(self, ref: FunctionRef) -> list[Node]:
        """The expressions a function returns (`return x` statements with a value)."""
        key = ("returned", id(ref.region.node))
        if key not in self.memo:
            self.memo[key] = [ret.named_children[0] for ret in returns_of(ref.region.node)
                              if ret.named_children]
        return self.memo[key]

    def callers(self, ref: FunctionRef) -> list[tuple[FileModel, Call]]:
        """Every call in the checked files that resolves to `ref`."""
        if self._callers is None:
            # While the map is built, parameter types answer from annotations only: following
            # call sites here would re-enter this half-built map and recurse without bound.
            self._callers, self._building = {}, True
            try:
                for fm in self.files:
                    for call in fm.index.calls:
                        if call.name in self.functions or call.name in self.classes:
                            for target in self.callees(fm, call):
                                self._callers.setdefault(id(target.region.node), []).append(
                                    (fm, call))
                        self._note_callbacks(fm, call)
            finally:
                self._building = False
                for key in [k for k in self.memo if isinstance(k, tuple) and k[0] == "type_of"]:
                    del self.memo[key]
        return self._callers.get(id(ref.region.node), [])

    def _note_callbacks(self, fm: FileModel, call: Call) -> None:
        """`optimizer.step(closure)`: a function passed by name is run by the call."""
        for arg in [*call.args, *call.kwargs.values()]:
            if arg is not None and arg.type == "identifier" and text(arg) in self.functions:
                for target in self._resolve_name(fm, text(arg)):
                    self._passed.setdefault(id(target.region.node), []).append((fm, call))

    def invokers(self, ref: FunctionRef) -> list[tuple[FileModel, Call]]:
        """The calls that run `ref`: its callers, and calls it is passed to as a callback."""
        direct = self.callers(ref)
        return direct + self._passed.get(id(ref.region.node), [])

    def arguments_for(self, ref: FunctionRef, position: int,
                      name: str) -> list[tuple[FileModel, Node]]:
        """The argument expressions passed for one parameter at every call site."""
        offset = 1 if ref.is_method else 0
        found = []
        for cfm, call in self.callers(ref):
            if call.has_splat:
                continue
            arg = call.arg(position - offset, name) if position >= offset else None
            if arg is not None:
                found.append((cfm, arg))
        return found


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
