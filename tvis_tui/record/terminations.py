"""SIGTERM and SIGHUP end a recorded script as Ctrl-C does, and then the process as python's.

A scheduler's time limit (Slurm, `timeout`), `docker stop`, a pod's eviction and a dropped
SSH session send them, and python's default is to die at once: the run then lost what was
not yet committed (the last step's line shapes, how it ended). While tvis runs a script, a
signal whose handler is still python's default raises `Terminated` in the main thread
instead: the script unwinds as from a Ctrl-C, tvis closes the run (stopped, by that
signal), and `die_of` then ends the process by the same signal, so a caller sees what it
would have seen. A signal the script handles, or that is ignored (`nohup`), is left alone;
a forked DataLoader worker dies of it at once, as under python.
"""

from __future__ import annotations

import signal
from typing import Any, Callable

from tvis_tui.interrupts import die_of, pass_on_lost
from tvis_tui.record import forks

SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class Terminated(BaseException):
    """The script was sent `signum`; a BaseException, as KeyboardInterrupt is, so that the
    script's `except Exception` does not swallow it."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"terminated by {self.name}")


def end_on_termination() -> Callable[[], None]:
    """Install the handlers (main thread only); returns the undo."""
    generation = forks.generation()
    previous: dict[int, Any] = {}

    def handler(signum: int, frame: Any) -> None:
        if forks.generation() != generation:  # a forked worker: python's default
            die_of(signum)
        raise Terminated(signum)

    for signum in SIGNALS:
        if signal.getsignal(signum) is signal.SIG_DFL:
            previous[signum] = signal.signal(signum, handler)
    undo_lost = _pass_on_lost_terminations()

    def undo() -> None:
        undo_lost()
        for signum, old in previous.items():
            if signal.getsignal(signum) is handler:
                signal.signal(signum, old)

    return undo


def _pass_on_lost_terminations() -> Callable[[], None]:
    """A `Terminated` raised inside a callback whose exceptions python drops (a weakref or
    garbage-collector callback of tvis's) is raised again in the main thread, as a Ctrl-C
    is (interrupts.py): else the script would run on past the signal."""
    return pass_on_lost(lambda exc_type, exc: exc.signum if isinstance(exc, Terminated) else None)
