"""Syntax colour for one source snapshot, computed per line on demand with tree-sitter.

The file is parsed once; each drawn line queries only its own byte range, so stepping
through a 10,000-line file costs what the visible window costs.
"""

from __future__ import annotations

from functools import lru_cache

from rich.text import Text

CAPTURE_STYLES = {
    "keyword": "magenta",
    "string": "green",
    "comment": "dim",
    "number": "cyan",
    "constant.builtin": "cyan",
    "function": "yellow",
    "function.builtin": "yellow",
    "function.method": "yellow",
    "constructor": "yellow",
    "type": "cyan",
    "escape": "bold green",
}


@lru_cache(maxsize=1)
def _python() -> tuple[object, object]:
    import tree_sitter
    import tree_sitter_python

    language = tree_sitter.Language(tree_sitter_python.language())
    return tree_sitter.Parser(language), tree_sitter.Query(language, tree_sitter_python.HIGHLIGHTS_QUERY)


class Highlighter:
    """Rich `Text` for each line of `text`; Python files are coloured, others plain."""

    def __init__(self, text: str, path: str) -> None:
        self.lines = text.splitlines()
        self._data = text.encode()
        self._starts = [0]
        for line in self._data.split(b"\n"):
            self._starts.append(self._starts[-1] + len(line) + 1)
        self._tree = None
        if path.endswith(".py"):
            parser, _ = _python()
            self._tree = parser.parse(self._data)  # type: ignore[attr-defined]
        self.line = lru_cache(maxsize=512)(self._line)  # type: ignore[method-assign]

    def _line(self, index: int) -> Text:
        """Line `index` (0-based), coloured."""
        raw = self._data[self._starts[index] : self._starts[index + 1]].rstrip(b"\r\n")
        text = Text(raw.decode(errors="replace"), no_wrap=True)
        if self._tree is None or not raw:
            return text
        import tree_sitter

        start = self._starts[index]
        cursor = tree_sitter.QueryCursor(_python()[1])
        cursor.set_byte_range(start, start + len(raw))
        for name, nodes in cursor.captures(self._tree.root_node).items():  # type: ignore[attr-defined]
            style = CAPTURE_STYLES.get(name)
            if style is None:
                continue
            for node in nodes:
                lo, hi = max(node.start_byte, start) - start, min(node.end_byte, start + len(raw)) - start
                # Byte offsets become character offsets via the decoded prefix.
                a, b = len(raw[:lo].decode(errors="replace")), len(raw[:hi].decode(errors="replace"))
                if a < b:
                    text.stylize(style, a, b)
        return text
