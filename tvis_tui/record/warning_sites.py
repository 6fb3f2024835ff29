"""Warnings about the line that called torch name the script's line, not tvis's wrapper.

torch warns about its caller (`F.mse_loss` warns with `stacklevel=2` that the target's
shape broadcasts); while tvis wraps `F.mse_loss`, that caller is a recorder frame, and the
script's own line, the one its author must fix, went unnamed. Python 3.11 has no
`skip_file_prefixes`, so while recording `warnings.warn` is wrapped: a warning whose
stacklevel lands on a recorder frame moves out to the first frame past them. A warning
about its own line (stacklevel 1) is left alone.
"""

from __future__ import annotations

import os
import sys
import warnings
from typing import Any, Callable

RECORDER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def install() -> Callable[[], None]:
    """Wrap `warnings.warn`; returns the undo."""
    original = warnings.warn

    def warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None,
             **kwargs: Any) -> None:
        original(message, category, _past_recorder(stacklevel) + 1, source, **kwargs)

    warn.__wrapped__ = original  # type: ignore[attr-defined]
    warnings.warn = warn

    def undo() -> None:
        if warnings.warn is warn:  # something wrapped it after us: leave theirs
            warnings.warn = original
    return undo


def _past_recorder(stacklevel: int) -> int:
    """`stacklevel`, counted from the caller of `warn`, grown past recorder frames."""
    if stacklevel < 2:
        return stacklevel
    frame = sys._getframe(2)  # the caller of warn()
    for _ in range(stacklevel - 1):
        if frame is None:
            return stacklevel
        frame = frame.f_back
    while frame is not None and frame.f_code.co_filename.startswith(RECORDER_DIR):
        frame = frame.f_back
        stacklevel += 1
    return stacklevel
