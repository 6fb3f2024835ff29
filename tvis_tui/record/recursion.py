"""Room under the recursion limit for tvis's own frames, unseen by the script.

Under tvis a script starts a few frames deeper than under python (tvis's entry, the
runner), and every hook and trace callback tvis runs at the script's deepest point needs
frames of its own. A script that recursed to within ~20 frames of the limit, fine under
python, then hit RecursionError under tvis: its `except RecursionError` fallback ran, and
training changed. While the script runs the real limit is HEADROOM above the one the
script sets and reads: sys.getrecursionlimit and sys.setrecursionlimit answer as python's
would. Left: recursion that goes on to the limit fails HEADROOM frames deeper.
"""

from __future__ import annotations

import contextlib
import operator
import sys
from typing import Iterator

HEADROOM = 100
"""Frames for tvis under the script (~7) and inside its deepest hook (~25), with room."""


@contextlib.contextmanager
def recursion_headroom() -> Iterator[None]:
    real_get, real_set = sys.getrecursionlimit, sys.setrecursionlimit

    def getrecursionlimit() -> int:
        """Return the current value of the recursion limit (as the script set it)."""
        return real_get() - HEADROOM

    def setrecursionlimit(limit: int, /) -> None:
        """Set the maximum depth of the Python interpreter stack to `limit`."""
        limit = operator.index(limit)  # python's TypeError for a float
        if limit < 1:
            raise ValueError("recursion limit must be greater or equal than 1")
        real_set(limit + HEADROOM)

    real_set(real_get() + HEADROOM)
    sys.getrecursionlimit, sys.setrecursionlimit = getrecursionlimit, setrecursionlimit
    try:
        yield
    finally:
        sys.getrecursionlimit, sys.setrecursionlimit = real_get, real_set
        real_set(max(real_get() - HEADROOM, 1))
