"""A native crash (a segfault in an extension, a C++ `abort()`, a bus error) ends the
process with no Python code run: the run would stay `running` on disk and read as a
recorder killed, like a SIGKILL. `faulthandler`, enabled into a file of the run folder,
writes the signal and every thread's Python stack there as the process dies; the reader
then reports the run as crashed with them (store/reader.py, `RunReader.meta`).

Left as it is when the script's user already turned faulthandler on (PYTHONFAULTHANDLER,
`-X faulthandler`): their report goes to stderr as they asked. Forks (DataLoader workers)
drop it: a worker's crash is its parent's exception, not the run's end.
"""

from __future__ import annotations

import faulthandler
import os
from pathlib import Path
from typing import Callable, TextIO

from tvis_tui.store.layout import FATAL_FILE

_report: TextIO | None = None
"""The file faulthandler writes to while this module holds it."""


def _forked_child() -> None:
    if _report is not None:
        faulthandler.disable()


os.register_at_fork(after_in_child=_forked_child)


def report_fatal_signals(run: Path) -> Callable[[], None]:
    """Write a fatal signal's report into `run`'s FATAL_FILE; returns the undo, which
    removes the file (the run is closed by then, and says how it ended itself)."""
    global _report
    if faulthandler.is_enabled():
        return lambda: None
    try:
        _report = open(run / FATAL_FILE, "w", encoding="utf-8")
    except OSError:  # the run will say "stopped" after a native crash, as before
        return lambda: None
    faulthandler.enable(_report, all_threads=True)

    def undo() -> None:
        global _report
        if _report is None:
            return
        # Before the file closes: faulthandler writes to its descriptor number, which
        # the next file opened would take.
        faulthandler.disable()
        _report.close()
        _report = None
        (run / FATAL_FILE).unlink(missing_ok=True)
    return undo
