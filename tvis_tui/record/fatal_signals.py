"""A native crash (a segfault in an extension, a C++ `abort()`, a bus error) ends the
process with no Python code run: the run would stay `running` on disk and read as a
recorder killed, like a SIGKILL. `faulthandler`, writing into a file of the run folder,
writes the signal and every thread's Python stack there as the process dies; the reader
then reports the run as crashed with them (store/reader.py, `RunReader.meta`).

faulthandler writes to a descriptor number, so tvis keeps one descriptor for it for the
life of the process and only ever points it elsewhere (`os.dup2`): at a run's start to its
file, at its end, and in a fork (a DataLoader worker: its crash is its parent's exception,
not the run's end), to /dev/null. It never closes it and never turns faulthandler off:
a handler the script installed meanwhile (torchelastic's `@record` does) stays as it is.
Left as it is when the user turned faulthandler on before tvis started (PYTHONFAULTHANDLER,
`-X faulthandler`): their report goes to stderr as they asked.
"""

from __future__ import annotations

import faulthandler
import os
import threading
from pathlib import Path
from typing import Callable, TextIO

from tvis_tui.store.layout import FATAL_FILE

_channel: TextIO | None = None
"""The file object faulthandler was given: its descriptor is the one pointed at each run's
file. Kept open, and referenced here, for the life of the process."""


def _point(fd: int) -> None:
    assert _channel is not None
    os.dup2(fd, _channel.fileno())


def _to_nowhere() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        _point(devnull)
    finally:
        os.close(devnull)


def _forked_child() -> None:
    if _channel is not None:
        _to_nowhere()


os.register_at_fork(after_in_child=_forked_child)


def report_fatal_signals(run: Path) -> Callable[[], None]:
    """Write a fatal signal's report into `run`'s FATAL_FILE; returns the undo, which
    points the report nowhere and removes the file (the run is closed by then, and says
    how it ended itself). Safe to call from two threads (an `os._exit` closing the run)."""
    global _channel
    if faulthandler.is_enabled() and _channel is None:
        return lambda: None  # the user's own, from before the run
    try:
        fd = os.open(run / FATAL_FILE, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError:  # the run will say "stopped" after a native crash, as before
        return lambda: None
    try:
        if _channel is None:
            _channel = os.fdopen(os.dup(fd), "w")
        else:
            _point(fd)
    finally:
        os.close(fd)
    # Again on a second run in one process (tests): a handler the script of the first
    # installed is not told apart from tvis's own.
    faulthandler.enable(_channel, all_threads=True)
    lock, done = threading.Lock(), []

    def undo() -> None:
        with lock:
            if done:
                return
            done.append(True)
            _to_nowhere()
            (run / FATAL_FILE).unlink(missing_ok=True)
    return undo
