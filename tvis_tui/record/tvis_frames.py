"""tvis's own code in a stack or a traceback, which a script's user should never see.

tvis wraps functions the script calls (loss functions, backward(), the DataLoader) and
runs the script from its own frames; what tvis shows of a crash or a warning leaves those
frames out, as `python script.py` would have none of them.
"""

from __future__ import annotations

import os
import re
import runpy
from types import CodeType
from typing import Any, Callable, TypeVar

TVIS_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
"""The folder of the tvis_tui package: a file under it is tvis's."""


def is_tvis_file(name: str) -> bool:
    """Whether a code object's file name is tvis's."""
    return name.startswith(TVIS_DIR)


def is_runpy_file(name: str) -> bool:
    """Whether a code object's file name is runpy's (`python -m` runs through it)."""
    return name == runpy.__file__ or name.endswith("<frozen runpy>")


OWN_WORK: set[CodeType] = set()
"""Code where tvis's own work begins (a hook's body, a trace callback)."""

Function = TypeVar("Function", bound=Callable[..., Any])


def own_work(function: Function) -> Function:
    """Mark `function` as where tvis's own work begins: whatever it calls (msgpack, numpy,
    torch ops on tvis's behalf) is tvis's too, and a traceback leaving through it (a Ctrl-C
    that landed there) shows none of it, as python would have shown the script's line."""
    OWN_WORK.add(function.__code__)
    return function


_ENTRY = re.compile(r'^  File "(?P<file>[^"]*)", line \d+, in ')


def without_tvis_frames(text: str) -> str:
    """A formatted traceback (`traceback.format_exception`'s text, as a DataLoader worker
    sends its error to the main process) less the entries of tvis's files: each entry's
    `File` line and the source and caret lines indented under it."""
    kept: list[str] = []
    skipping = False
    for line in text.splitlines(keepends=True):
        entry = _ENTRY.match(line)
        if entry is not None:
            skipping = is_tvis_file(entry["file"])
        elif not line.startswith("    "):
            skipping = False
        if not skipping:
            kept.append(line)
    return "".join(kept)
