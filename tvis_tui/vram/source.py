"""Parsing a script with tree-sitter, and the few node helpers the estimator needs.

Kept local to the estimator on purpose: the checker's engine evolves on its own schedule.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Iterator

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Tree


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_python.language()))


def parse(source: bytes) -> Tree:
    return _parser().parse(source)


def read_tree(path: Path) -> Tree | None:
    """The parsed file, or None when it cannot be read (missing, a folder, not text)."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:4096]:
        return None
    return parse(data)


def text(node: Node | None) -> str:
    return "" if node is None else node.text.decode("utf-8", "replace")


def line(node: Node) -> int:
    """1-based line of a node."""
    return node.start_point[0] + 1


def named(node: Node) -> list[Node]:
    """Named children, without comments."""
    return [c for c in node.named_children if c.type != "comment"]


def walk(node: Node) -> Iterator[Node]:
    """Every node under `node`, in source order (pre-order)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(current.children))


def dotted(node: Node | None) -> str | None:
    """`torch.nn.Linear` for an attribute chain of plain names, else None."""
    if node is None:
        return None
    if node.type == "identifier":
        return text(node)
    if node.type == "attribute":
        base = dotted(node.child_by_field_name("object"))
        attr = node.child_by_field_name("attribute")
        return None if base is None or attr is None else f"{base}.{text(attr)}"
    return None


def call_name(node: Node) -> str | None:
    """The last name of a call's function: `step` for `opt.step()`."""
    fn = node.child_by_field_name("function")
    if fn is None:
        return None
    if fn.type == "attribute":
        return text(fn.child_by_field_name("attribute"))
    return text(fn) if fn.type == "identifier" else None


def contains_call(node: Node, names: set[str]) -> bool:
    """True when some call under `node` ends in one of `names` (`.backward()`, `.step()`)."""
    return any(n.type == "call" and call_name(n) in names for n in walk(node))
