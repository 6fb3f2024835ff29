"""The semantic layer rules share: the checked files together, their classes and the call
graph across them; types of values come from typeflow.py, training facts from training.py.

Everything here answers from what the code proves: a constructor call assigned once, a class
that subclasses nn.Module, an annotation, the argument passed at every call site. Names are
used only as a last resort for recognising `optimizer.step()` on an untyped parameter.
"""

from __future__ import annotations

from tree_sitter import Node

from tvis_tui.check.files import FileModel, FunctionRef, module_name
from tvis_tui.check.index import Call, Region
from tvis_tui.check.syntax import returns_of, text
from tvis_tui.check.typeflow import MAX_DEPTH, TypeFlow

__all__ = ["MAX_DEPTH", "FileModel", "FunctionRef", "Project", "module_name"]


class Project(TypeFlow):
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
