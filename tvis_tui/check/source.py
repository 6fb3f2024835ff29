"""Reading and parsing one Python file, and its `# tvis: ignore[...]` comments."""

from __future__ import annotations

import codecs
import re
import stat
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import tree_sitter
import tree_sitter_python

from tvis_tui.check.findings import FileProblem
from tvis_tui.compiles import compile_source

MAX_FILE_BYTES = 2_000_000
"""Files larger than this (bytes) are skipped: they are generated code, not training scripts,
and parsing them would dominate the run time of a check."""

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
"""PEP 263's coding declaration, the pattern Python's tokenizer uses."""

_IGNORE = re.compile(r"#\s*tvis:\s*(ignore-file|ignore)\b(?:\[([A-Za-z0-9_,\s]*)\])?")


@lru_cache(maxsize=1)
def language() -> tree_sitter.Language:
    return tree_sitter.Language(tree_sitter_python.language())


@lru_cache(maxsize=1)
def _parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(language())


@dataclass
class Suppressions:
    """Rule ids silenced per line (`None` in the set means every rule)."""

    by_line: dict[int, set[str | None]] = field(default_factory=dict)
    whole_file: set[str | None] = field(default_factory=set)

    def silences(self, rule: str, line: int) -> bool:
        for ids in (self.whole_file, self.by_line.get(line, ())):
            if None in ids or rule in ids:
                return True
        return False


@dataclass
class SourceFile:
    """A parsed file: its display path, text, lines, syntax tree and suppressions."""

    path: str
    text: bytes
    tree: tree_sitter.Tree
    suppressions: Suppressions

    @property
    def root(self) -> tree_sitter.Node:
        return self.tree.root_node

    def line_text(self, line: int) -> str:
        """The 1-based source line, without its newline."""
        lines = self._lines()
        return lines[line - 1] if 0 < line <= len(lines) else ""

    def _lines(self) -> list[str]:
        cached = self.__dict__.get("_line_cache")
        if cached is None:
            cached = self.text.decode("utf-8").splitlines()
            self.__dict__["_line_cache"] = cached
        return cached


def _suppressions(comments: list[tree_sitter.Node]) -> Suppressions:
    found = Suppressions()
    for node in comments:
        match = _IGNORE.search(node.text.decode("utf-8", "replace"))
        if not match:
            continue
        ids: set[str | None] = {None}
        if match.group(2) is not None:
            ids = {part.strip().upper() for part in match.group(2).split(",") if part.strip()}
        if match.group(1) == "ignore-file":
            found.whole_file |= ids
        else:
            found.by_line.setdefault(node.start_point[0] + 1, set()).update(ids)
    return found


def comments(root: tree_sitter.Node) -> list[tree_sitter.Node]:
    """Every comment node under `root`, in source order."""
    query = _comment_query()
    return tree_sitter.QueryCursor(query).captures(root).get("c", [])


@lru_cache(maxsize=1)
def _comment_query() -> tree_sitter.Query:
    return tree_sitter.Query(language(), "(comment) @c")


def _first_error(root: tree_sitter.Node) -> tree_sitter.Node | None:
    """The first ERROR or MISSING node, descending only into subtrees that contain one."""
    node = root
    while True:
        child = next((c for c in node.children if c.has_error), None)
        if child is None or child.is_error or child.is_missing:
            return child if child is not None else (node if node is not root else None)
        node = child


def _syntax_problem(data: bytes, display: str, root: tree_sitter.Node) -> FileProblem | None:
    """The file's syntax error as Python reports it (compiles.py); None when Python
    accepts the file, even where tree-sitter could not fully parse it (a gap in its
    grammar, such as `return *a, *b`): the file is then checked, minus the unparsed
    statement."""
    try:
        compile_source(data, display)
    except SyntaxError as exc:
        message = (exc.msg or "invalid syntax").split("\n", 1)[0]
        return FileProblem(display, f"syntax error: {message}; file not checked",
                           exc.lineno or 1, exc.offset or 1)
    except (ValueError, RecursionError, MemoryError):
        bad = _first_error(root)
        row, col = bad.start_point if bad is not None else (0, 0)
        return FileProblem(display, "syntax error; file not checked", row + 1, col + 1)
    return None


def load(path: Path, display: str) -> SourceFile | FileProblem:
    """Read and parse `path`, or say in one line why it cannot be checked."""
    try:
        info = path.stat()
        size = info.st_size
        if not stat.S_ISREG(info.st_mode):  # reading a FIFO would wait forever
            return FileProblem(display, f"skipped: not a regular file "
                                        f"({file_kind(info.st_mode)})", fails=False)
        if size > MAX_FILE_BYTES:
            return FileProblem(display, f"skipped: {size:,} bytes is larger than the "
                                        f"{MAX_FILE_BYTES:,}-byte limit for checked files",
                               fails=False)
        data = path.read_bytes()
    except OSError as exc:
        return FileProblem(display, f"cannot read: {exc.strerror or exc}")
    return parse(data, display)


def parse(data: bytes, display: str) -> SourceFile | FileProblem:
    """Parse source bytes; problems (cannot be decoded, syntax error) come back as a
    FileProblem."""
    try:
        utf8 = decode_source(data).encode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        declared = declared_encoding(data)
        name = f"{declared} as its coding declaration says" if declared else "UTF-8"
        return FileProblem(display, f"not {name} (byte {exc.start}); file not checked", line)
    except LookupError as exc:
        return FileProblem(display, f"{exc}; file not checked")
    tree = _parser().parse(utf8)
    # Python's parser too where tree-sitter found no error: its grammar still takes
    # Python 2's `print "x"`, an unexpected indent, `async = 5` (robustness sweep).
    problem = _syntax_problem(data, display, tree.root_node)
    if problem is not None:
        return problem
    return SourceFile(display, utf8, tree, _suppressions(comments(tree.root_node)))


def decode_source(data: bytes) -> str:
    """The text of a Python file as Python reads it: in the encoding its PEP 263 coding
    declaration names (`# -*- coding: latin-1 -*-` on line 1 or 2), else UTF-8.

    Raises UnicodeDecodeError for bytes the encoding cannot read, LookupError for a
    declared encoding Python does not know."""
    encoding = declared_encoding(data) or "utf-8"
    if data.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"  # Python drops the mark (and would refuse another encoding)
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise LookupError(f"unknown encoding {encoding!r} in its coding declaration") from None
    return data.decode(encoding)


def declared_encoding(data: bytes) -> str | None:
    """The encoding a PEP 263 declaration names; line 2 counts only after a comment or
    blank line 1, as in Python's own tokenizer."""
    for number, line in enumerate(data.split(b"\n", 2)[:2]):
        match = _CODING.match(line)
        if match:
            return match.group(1).decode("ascii")
        if number == 0 and line.strip() and not line.lstrip().startswith(b"#"):
            return None
    return None


def file_kind(mode: int) -> str:
    """What a path that is not a regular file is, in words."""
    kinds = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
             (stat.S_ISDIR, "a folder"))
    return next((name for test, name in kinds if test(mode)), "not a file")
