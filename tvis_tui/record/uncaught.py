"""A script's uncaught exception, shown and described as python would have: its traceback
without tvis's frames (through the script's own `sys.excepthook`), on a stderr that may be
closed or a pipe whose reader is gone, and the one line that names it."""

from __future__ import annotations

import io
import os
import sys
import traceback
import types
from typing import Any

from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.tvis_frames import OWN_WORK, is_runpy_file, is_tvis_file


def usable_stderr() -> None:
    """A script may close or drop sys.stderr before it ends: tvis still reports on fd 2
    (where python would print nothing), and the crash still goes into the run."""
    if sys.stderr is None or getattr(sys.stderr, "closed", False):
        try:
            sys.stderr = open(2, "w", closefd=False, errors="backslashreplace")
        except OSError:
            sys.stderr = open(os.devnull, "w")


def show_uncaught(exc: BaseException) -> str:
    """Print `exc` as python prints an uncaught exception (through the script's own
    `sys.excepthook` if it set one); returns the traceback text."""
    usable_stderr()
    text = shown_as_python_would(exc)
    if sys.excepthook is sys.__excepthook__:
        say(text, end="")
        return text
    try:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    except Exception:  # python says the hook failed, then prints the exception itself
        say(f"Error in sys.excepthook:\n{text}", end="")
    return text


def say(text: str, end: str = "\n") -> None:
    """Write to stderr, if anything reads it: a pipe whose reader is gone (`2>&1 | head`,
    `| tee` killed by the same Ctrl-C) or a closed stderr must not keep a crash out of
    the run, nor turn it into a traceback of tvis's (robustness sweep)."""
    try:
        sys.stderr.write(text + end)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def shown_as_python_would(exc: BaseException) -> str:
    """The traceback python prints for `exc`, its causes and contexts included, without
    tvis's frames (the script has ended: its exceptions' tracebacks are rewritten)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        chained = pending.pop()
        if chained is None or id(chained) in seen:
            continue
        seen.add(id(chained))
        chained.__traceback__ = _user_traceback(chained.__traceback__)
        if isinstance(chained.__context__, StopRecording):  # tvis's own, at --steps: not the script's
            chained.__context__ = None
        pending += [chained.__cause__, chained.__context__, *getattr(chained, "exceptions", ())]
    return _displayed(exc)


def _displayed(exc: BaseException) -> str:
    """What the interpreter's own display of `exc` writes: python 3.11's traceback module
    leaves out its "Did you mean: 'optimizer'?" hints (3.12's gives them, and the
    interpreter's may colour its text there)."""
    if sys.version_info < (3, 12):
        shown, stderr = io.StringIO(), sys.stderr
        sys.stderr = shown
        try:
            sys.__excepthook__(type(exc), exc, exc.__traceback__)
        finally:
            sys.stderr = stderr
        if shown.getvalue():
            return shown.getvalue()
    return "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))


def _user_traceback(tb: Any) -> Any:
    """`tb` less tvis's frames, as `python script.py` shows it: the runpy and tvis frames
    above the script, and tvis's wrappers between the script and torch (a loss function,
    backward, the DataLoader's `__next__`, `warnings.warn` under `-W error`), and whatever
    tvis's own work called (tvis_frames.own_work)."""
    kept = []
    while tb is not None and tb.tb_frame.f_code not in OWN_WORK:  # none of what tvis's hooks ran
        name = tb.tb_frame.f_code.co_filename
        if not (is_tvis_file(name) or not kept and is_runpy_file(name)):  # runpy: above the script
            kept.append(tb)
        tb = tb.tb_next
    shown = None  # no frame of the script ran (a syntax error): python shows none
    for tb in reversed(kept):
        shown = types.TracebackType(shown, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    return shown


def exception_text(exc: BaseException) -> str:
    """str(exc), or what python prints when the exception's __str__ itself raises."""
    try:
        return str(exc)
    except Exception:
        return "<exception str() failed>"


def worker_cause(lines: list[str]) -> str | None:
    """A DataLoader worker's exception, re-raised by torch as "Caught E in DataLoader worker
    process N." followed by the worker's traceback: its own last line says what happened."""
    if not lines or not lines[0].startswith("Caught ") or "Original Traceback" not in "".join(lines[1:2]):
        return None
    cause = next((line.strip() for line in reversed(lines) if line.strip()), "")
    where = lines[0].removeprefix("Caught ").split(" in ", 1)[-1].rstrip(".")
    return f"{cause} (in {where})"
