"""`os._exit(N)`: the script ends its process at once, and the run is closed first.

Some scripts end that way on purpose (to skip a hanging teardown of workers or process
groups); nothing after the call runs, no `finally`, no atexit. Without this the run kept
only what the writer thread had committed, and said `stopped` with no steps when the
training had gone well (robustness sweep). The call is let through unchanged in processes
the script forked (DataLoader workers end with `os._exit` too: their run is the parent's).

The run is closed in a thread of its own, waited for at most CLOSE_WAIT_S: `os._exit` may
be called from a signal handler that interrupted one of tvis's hooks holding a lock the
close needs, or from a watchdog thread; either way the process ends as it asked.
"""

from __future__ import annotations

import operator
import os
import sys
import threading
from types import FrameType
from typing import Callable, NoReturn

from tvis_tui.record import forks

CLOSE_WAIT_S = 30.0
"""How long the process waits for its run to close before it exits regardless."""


def close_run_first(finish: Callable[[int, FrameType | None], None]) -> Callable[[], None]:
    """Make `os._exit(status)` call `finish(status, caller's frame)` in this process
    before it exits; returns the undo."""
    real = os._exit
    recording = forks.generation()
    finished = False

    def _exit(status: int) -> NoReturn:
        nonlocal finished
        status = operator.index(status)  # a TypeError as under python, before tvis acts
        if forks.generation() == recording and not finished:
            finished = True
            closing = threading.Thread(target=_quietly, args=(finish, status, sys._getframe(1)),
                                       name="tvis-close-at-exit", daemon=True)
            closing.start()
            closing.join(CLOSE_WAIT_S)
        real(status)

    os._exit = _exit

    def undo() -> None:
        if os._exit is _exit:
            os._exit = real
    return undo


def _quietly(finish: Callable[[int, FrameType | None], None], status: int,
             frame: FrameType | None) -> None:
    try:
        finish(status, frame)
    except BaseException:  # the script asked to end now: it does, whatever tvis hit
        pass
