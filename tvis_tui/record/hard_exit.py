"""`os._exit(N)`: the script ends its process at once, and the run is closed first.

Some scripts end that way on purpose (to skip a hanging teardown of workers or process
groups); nothing after the call runs, no `finally`, no atexit. Without this the run kept
only what the writer thread had committed, and said `stopped` with no steps when the
training had gone well (robustness sweep). The call is let through unchanged in processes
the script forked (DataLoader workers end with `os._exit` too: their run is the parent's).
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import Callable, NoReturn

from tvis_tui.record import forks


def close_run_first(finish: Callable[[int, FrameType | None], None]) -> Callable[[], None]:
    """Make `os._exit(status)` call `finish(status, caller's frame)` in this process
    before it exits; returns the undo."""
    real = os._exit
    recording = forks.generation()
    finished = False

    def _exit(status: int) -> NoReturn:
        nonlocal finished
        if forks.generation() == recording and not finished:
            finished = True
            try:
                finish(status, sys._getframe(1))
            except BaseException:  # the script asked to end now: it does, whatever tvis hit
                pass
        real(status)

    os._exit = _exit

    def undo() -> None:
        if os._exit is _exit:
            os._exit = real
    return undo
