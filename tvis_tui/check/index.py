"""The per-file index: regions (functions, classes, loops, `with` blocks), calls, imports and
assignments, collected with one tree-sitter query so rules never walk the whole tree."""

from __future__ import annotations

from bisect import bisect_right
from functools import lru_cache

import tree_sitter
from tree_sitter import Node

from tvis_tui.check.source import SourceFile, language
from tvis_tui.check.syntax import dotted, text, unwrap

_QUERY = """
(call) @call
(for_statement) @for
(while_statement) @while
(with_statement) @with
(function_definition) @function
(class_definition) @class
(assignment) @assign
(augmented_assignment) @augassign
(import_statement) @import
(import_from_statement) @importfrom
(expression_statement) @statement
(list_comprehension) @comprehension
(generator_expression) @comprehension
(set_comprehension) @comprehension
(dictionary_comprehension) @comprehension
"""

LOOP_KINDS = ("for", "while")


@lru_cache(maxsize=1)
def _query() -> tree_sitter.Query:
    return tree_sitter.Query(language(), _QUERY)


class Region:
    """A block of code that matters to rules: module, class, function, for, while or with."""

    __slots__ = ("kind", "node", "parent", "start", "end", "name")

    def __init__(self, kind: str, node: Node, parent: "Region | None") -> None:
        self.kind = kind
        self.node = node
        self.parent = parent
        self.start = node.start_byte
        self.end = node.end_byte
        name = node.child_by_field_name("name") if kind in ("function", "class") else None
        self.name = text(name)

    def contains(self, node: Node) -> bool:
        return self.start <= node.start_byte and node.end_byte <= self.end

    def ancestors(self) -> "list[Region]":
        """This region and every enclosing one, innermost first."""
        chain: list[Region] = []
        region: Region | None = self
        while region is not None:
            chain.append(region)
            region = region.parent
        return chain

    @property
    def body(self) -> Node | None:
        return self.node.child_by_field_name("body")

    def __repr__(self) -> str:
        return f"Region({self.kind} {self.name} line {self.node.start_point[0] + 1})"


class Call:
    """One call expression, with its callee split into the parts rules ask about."""

    __slots__ = ("node", "func", "name", "method", "receiver", "region", "_args")

    def __init__(self, node: Node, region: Region) -> None:
        self.node = node
        self.region = region
        func = unwrap(node.child_by_field_name("function"))
        self.func = func
        self.receiver: Node | None = None
        if func is not None and func.type == "attribute":
            self.receiver = func.child_by_field_name("object")
            self.method: str | None = text(func.child_by_field_name("attribute"))
            self.name = self.method
        else:
            self.method = None
            self.name = text(func) if func is not None and func.type == "identifier" else ""
        self._args: tuple[list[Node], dict[str, Node], bool] | None = None

    def _split_args(self) -> tuple[list[Node], dict[str, Node], bool]:
        if self._args is None:
            positional: list[Node] = []
            keywords: dict[str, Node] = {}
            splat = False
            arguments = self.node.child_by_field_name("arguments")
            for arg in arguments.named_children if arguments is not None else ():
                if arg.type == "keyword_argument":
                    name = text(arg.child_by_field_name("name"))
                    keywords[name] = arg.child_by_field_name("value")
                elif arg.type in ("list_splat", "dictionary_splat"):
                    splat = True
                elif arg.type != "comment":
                    positional.append(arg)
            self._args = (positional, keywords, splat)
        return self._args

    @property
    def args(self) -> list[Node]:
        """Positional arguments (a generator argument counts as one)."""
        return self._split_args()[0]

    @property
    def kwargs(self) -> dict[str, Node]:
        return self._split_args()[1]

    @property
    def has_splat(self) -> bool:
        """`*args` or `**kwargs` present: options the rule cannot see may be passed."""
        return self._split_args()[2]

    def arg(self, position: int, keyword: str | None = None) -> Node | None:
        """The argument at `position` or passed as `keyword`, whichever is given."""
        if keyword is not None and keyword in self.kwargs:
            return self.kwargs[keyword]
        positional = self.args
        return positional[position] if position < len(positional) else None

    @property
    def line(self) -> int:
        return self.node.start_point[0] + 1

    def __repr__(self) -> str:
        return f"Call({text(self.func)} line {self.line})"


class FileIndex:
    """Everything rules look up in one file, built once per file."""

    def __init__(self, source: SourceFile) -> None:
        self.source = source
        self.path = source.path
        captures = tree_sitter.QueryCursor(_query()).captures(source.root)
        self.module = Region("module", source.root, None)
        self.regions = self._build_regions(captures)
        self._starts = [r.start for r in self.regions]
        self.functions = [r for r in self.regions if r.kind == "function"]
        self.classes = [r for r in self.regions if r.kind == "class"]
        self.loops = [r for r in self.regions if r.kind in LOOP_KINDS]
        self.withs = [r for r in self.regions if r.kind == "with"]
        self.calls = [Call(n, self.region_at(n)) for n in captures.get("call", [])]
        self.calls.sort(key=lambda c: c.node.start_byte)
        self._call_starts = [c.node.start_byte for c in self.calls]
        self.calls_by_name: dict[str, list[Call]] = {}
        for call in self.calls:
            self.calls_by_name.setdefault(call.name, []).append(call)
        self.assignments = captures.get("assign", [])
        self.aug_assignments = captures.get("augassign", [])
        self.statements = captures.get("statement", [])
        self.import_nodes = captures.get("import", []) + captures.get("importfrom", [])
        self.comprehensions = captures.get("comprehension", [])
        """Comprehensions and generator expressions: loops that are expressions."""

    def _build_regions(self, captures: dict[str, list[Node]]) -> list[Region]:
        tagged = [(node, kind) for kind in ("for", "while", "with", "function", "class")
                  for node in captures.get(kind, [])]
        tagged.sort(key=lambda pair: (pair[0].start_byte, -pair[0].end_byte))
        regions: list[Region] = []
        stack = [self.module]
        for node, kind in tagged:
            while not stack[-1].contains(node):
                stack.pop()
            region = Region(kind, node, stack[-1])
            regions.append(region)
            stack.append(region)
        return regions

    def region_at(self, node: Node) -> Region:
        """The innermost region containing `node` (a region's own node maps to its parent)."""
        i = bisect_right(self._starts, node.start_byte) - 1
        region = self.regions[i] if i >= 0 else self.module
        while region.parent is not None and not (
            region.contains(node) and region.node != node
        ):
            region = region.parent
        return region

    def calls_in(self, node: Node) -> list[Call]:
        """Every call inside `node` (nested functions included), in source order."""
        lo = bisect_right(self._call_starts, node.start_byte - 1)
        hi = bisect_right(self._call_starts, node.end_byte - 1)
        return [c for c in self.calls[lo:hi] if c.node.end_byte <= node.end_byte]

    def call_at(self, node: Node) -> Call | None:
        """The Call record for a `call` node."""
        i = bisect_right(self._call_starts, node.start_byte) - 1
        while i >= 0 and self.calls[i].node.start_byte == node.start_byte:
            if self.calls[i].node == node:
                return self.calls[i]
            i -= 1
        return None

    def function_of(self, node: Node) -> Region:
        """The innermost function (or the module) whose body holds `node`."""
        region = self.region_at(node)
        while region.kind not in ("function", "module"):
            region = region.parent
        return region

    def loops_around(self, node: Node) -> list[Region]:
        """Loops enclosing `node` inside its own function, innermost first."""
        loops: list[Region] = []
        for region in self.region_at(node).ancestors():
            if region.kind in ("function", "class", "module"):
                break
            if region.kind in LOOP_KINDS:
                loops.append(region)
        return loops

    def dotted(self, node: Node | None) -> str | None:
        return dotted(unwrap(node))
