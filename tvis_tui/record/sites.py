"""Where calls come from: user files, call sites, def sites, and source snapshots.

A user file is one inside the script's folder tree that is not part of an installed
package, the standard library, torch, or tvis itself. The call site of a module call is
the innermost frame in a user file; its def site is where the class's `forward` is.
"""

from __future__ import annotations

import linecache
import os
import tokenize
import site
import sys
import sysconfig
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Callable

import torch

from tvis_tui.store.records import Site


class Sites:
    """Caches which files are user files and snapshots each one's source once."""

    def __init__(self, root: str, on_new_user_file: Callable[[str], None]) -> None:
        # The folder as given and as resolved: a file is the user's by either path, so a
        # symlink in the folder to a file elsewhere is theirs too.
        self._roots = tuple(dict.fromkeys((os.path.realpath(root), os.path.abspath(root))))
        paths = sysconfig.get_paths()
        self._excluded = tuple({
            os.path.realpath(p) + os.sep
            for p in (paths["stdlib"], paths["purelib"], paths["platlib"], site.getusersitepackages(),
                      os.path.dirname(torch.__file__), str(Path(__file__).resolve().parents[1]),
                      sys.prefix, sys.base_prefix)
        })
        self._user: dict[str, str | None] = {}
        self._on_new_user_file = on_new_user_file
        self._def_sites: dict[Any, Site | None] = {}

    def relative(self, path: str) -> str:
        """`path` relative to the script's folder (as file patterns match it)."""
        root = next((r for r in self._roots if self._inside(path, r)), self._roots[0])
        try:
            return os.path.relpath(path, root)
        except ValueError:  # another drive on Windows
            return path

    def user_path(self, filename: str) -> str | None:
        """The absolute path of `filename` if it is a user file, else None (cached)."""
        try:
            return self._user[filename]
        except KeyError:
            pass
        path: str | None = None
        if not filename.startswith("<"):
            real, given = os.path.realpath(filename), os.path.abspath(filename)
            inside = self._inside(real) or self._inside(given)
            if inside and not real.startswith(self._excluded) and os.path.isfile(real):
                path = given
        self._user[filename] = path
        if path is not None:
            self._on_new_user_file(path)
        return path

    def _inside(self, path: str, root: str | None = None) -> bool:
        roots = self._roots if root is None else (root,)
        return any(path == r or path.startswith(r + os.sep) for r in roots)

    def call_site(self, frame: FrameType | None) -> Site | None:
        """The innermost user-code line on the stack starting at `frame`."""
        user = self.user_frame(frame)
        return None if user is None else Site(self.user_path(user.f_code.co_filename), user.f_lineno)

    def user_frame(self, frame: FrameType | None) -> FrameType | None:
        """The innermost frame of user code on the stack starting at `frame`."""
        while frame is not None and self.user_path(frame.f_code.co_filename) is None:
            frame = frame.f_back
        return frame

    def def_site(self, cls: type, attr: str = "forward", fn: Any = None) -> Site | None:
        """Where `cls.attr` is defined (or the function `fn`, when given)."""
        key = fn if fn is not None else cls
        try:
            return self._def_sites[key]
        except KeyError:
            pass
        code = _code_of(fn if fn is not None else getattr(cls, attr, None))
        site = None
        if code is not None:
            self.user_path(code.co_filename)
            site = Site(os.path.abspath(code.co_filename), def_line(code))
        self._def_sites[key] = site
        return site

    def user_location(self, tb: Any) -> Site | None:
        """The innermost user-code line of a traceback (else its innermost line)."""
        last = None
        found = None
        while tb is not None:
            last = Site(os.path.abspath(tb.tb_frame.f_code.co_filename), tb.tb_lineno)
            if self.user_path(tb.tb_frame.f_code.co_filename) is not None:
                found = last
            tb = tb.tb_next
        return found or last


def def_line(code: CodeType) -> int:
    """The line of `code`'s `def`. A decorated function's code starts at its first
    decorator (`@staticmethod` two lines above), which is not where a reader looks."""
    first = code.co_firstlineno
    if not linecache.getline(code.co_filename, first).lstrip().startswith("@"):
        return first
    for line in range(first + 1, first + MAX_DECORATOR_LINES):
        text = linecache.getline(code.co_filename, line)
        if not text:  # past the end of the file
            break
        if text.lstrip().startswith(("def ", "async def ")):
            return line
    return first


MAX_DECORATOR_LINES = 64
"""Lines of decorators read at most to find the `def` beneath them."""


def _code_of(fn: Any) -> CodeType | None:
    fn = getattr(fn, "__func__", fn)
    while hasattr(fn, "__wrapped__"):
        fn = fn.__wrapped__
    return getattr(fn, "__code__", None)


def read_source(path: str) -> str | None:
    """A source file's text, decoded as python decodes it: by its coding line (PEP 263)
    or BOM, else UTF-8; a file that says neither rightly, with its bad bytes replaced."""
    try:
        with tokenize.open(path) as fh:
            return fh.read()
    except (SyntaxError, UnicodeDecodeError, LookupError):
        pass  # no valid coding line, or bytes its encoding cannot hold
    except OSError:
        return None
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None
