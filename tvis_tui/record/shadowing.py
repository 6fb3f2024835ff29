"""The script's folder shadows modules as it does under plain python.

Python puts the script's folder first on sys.path, so a `statistics.py` there is what the
script's `import statistics` gets. Under tvis, torch._dynamo (imported with the recorder)
has loaded the standard library's `statistics`, `decimal`, `fractions` and more before the
script runs, and an import finds those in sys.modules: the script got the wrong module
and failed. Here those loaded after python's startup are set aside while the script runs
(their importers keep their references), and put back after it.
"""

from __future__ import annotations

import contextlib
import os
import sys
from types import ModuleType
from typing import Iterator

from tvis_tui import PYTHON_MODULES


@contextlib.contextmanager
def folder_first(folder: str) -> Iterator[None]:
    """While the script runs: the modules that `folder` holds a module of the same name
    as are out of sys.modules (with their submodules), unless python loads them itself."""
    aside = _set_aside(_shadowed(folder))
    try:
        yield
    finally:
        sys.modules.update(aside)


def _shadowed(folder: str) -> set[str]:
    """Top-level module names loaded since python's startup that `folder` has a module or
    a package (with __init__.py) of: a folder without one is a namespace portion, which
    an installed module of its name wins over."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return set()
    names = {e[:-3] for e in entries if e.endswith(".py")}
    names |= {e for e in entries if os.path.isfile(os.path.join(folder, e, "__init__.py"))}
    return {n for n in names if n in sys.modules and n not in PYTHON_MODULES}


def _set_aside(names: set[str]) -> dict[str, ModuleType]:
    if not names:
        return {}
    keys = [k for k in sys.modules if k.partition(".")[0] in names]
    return {k: sys.modules.pop(k) for k in keys}
