"""Parsing a script with tree-sitter, and the few node helpers the estimator needs.

Kept local to the estimator on purpose: the checker's engine evolves on its own schedule.
"""

from __future__ import annotations

import io
import tokenize
from functools import lru_cache
from pathlib import Path
from typing import Iterator

import tree_sitter_python
from tree_sitter import Language, Node, Parser, Tree

from tvis_tui.compiles import compile_source
from tvis_tui.errors import TvisError


@lru_cache(maxsize=1)
def _parser() -> Parser:
    return Parser(Language(tree_sitter_python.language()))


def parse(source: bytes) -> Tree:
    return _parser().parse(source)


class UnreadableScript(TvisError):
    """The script cannot be read as Python source: no estimate can come from it."""


def read_script(path: Path) -> Tree:
    """The parsed script, or UnreadableScript saying in one line why there is none: not a
    regular file, not text, not in its declared encoding, or a syntax error Python reports."""
    if not path.is_file():
        raise UnreadableScript(f"{path}: not a regular file")  # a FIFO would block the read
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UnreadableScript(f"{path}: cannot read: {exc.strerror or exc}") from None
    tree = parse(_decode(path, data).encode("utf-8"))
    _raise_syntax_error(path, data)  # where tree-sitter found none too: Python 2's `print "x"`
    return tree


def read_tree(path: Path) -> Tree | None:
    """A sibling module the script imports, parsed as far as it goes; None when it cannot
    be read (the names taken from it are then unknown, and the script is still estimated)."""
    try:
        data = path.read_bytes()
        return parse(_decode(path, data).encode("utf-8"))
    except (OSError, UnreadableScript):
        return None


def line_span(path: Path, line: int) -> tuple[int, int]:
    """The 1-based columns where line `line`'s code starts and ends (end exclusive), for a
    caret under it; (1, 2) where the line cannot be read."""
    try:
        # Python's own line breaks: str.splitlines also breaks at form feeds and \x85.
        text = _decode(path, path.read_bytes()).replace("\r\n", "\n").replace("\r", "\n").split("\n")[line - 1]
    except (OSError, UnreadableScript, IndexError):
        return 1, 2
    code = text.rstrip()
    start = len(code) - len(code.lstrip()) + 1
    return start, max(start + 1, len(code) + 1)


def _decode(path: Path, data: bytes) -> str:
    """Source text the way Python decodes it: a BOM or `# -*- coding: ... -*-` line, else UTF-8."""
    if b"\0" in data:
        raise UnreadableScript(f"{path}: not a Python script (it contains NUL bytes)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        if not str(exc.msg).startswith("invalid or missing encoding"):
            # An unknown codec in the coding line, or one its BOM contradicts.
            raise UnreadableScript(f"{path}: cannot tell its encoding ({exc.msg})") from None
        encoding = "utf-8"  # its first lines are not UTF-8 and declare nothing: say where
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line_no = data.count(b"\n", 0, exc.start) + 1
        raise UnreadableScript(f"{path}: not {encoding} text (byte 0x{data[exc.start]:02x} "
                               f"on line {line_no}); save it as UTF-8 or declare its encoding "
                               "in a `# -*- coding: ... -*-` line") from None


def _raise_syntax_error(path: Path, data: bytes) -> None:
    """Python's own message for a file it cannot parse; nothing when Python accepts it,
    even where tree-sitter could not fully parse it (a gap in its grammar): the script is
    then read without the statement tree-sitter missed (compiles.py)."""
    try:
        compile_source(data, str(path))
    except SyntaxError as exc:
        message = (exc.msg or "invalid syntax").split("\n", 1)[0]
        raise UnreadableScript(f"{path}: syntax error on line {exc.lineno or 1}: {message}") from None
    except (ValueError, RecursionError, MemoryError):
        return


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
