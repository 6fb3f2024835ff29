"""A Ctrl-C stops the script wherever it lands, tvis's callbacks included.

Python runs weakref callbacks and garbage-collector callbacks where an exception has
nowhere to go: it hands it to `sys.unraisablehook`, which prints "Exception ignored in
..." and carries on. tvis runs such callbacks all the time (record/live_tensors.py on each
seen tensor's death, record/timing.py on each collection, vram/tracker.py on each freed
storage), so a Ctrl-C may land in one: its KeyboardInterrupt was printed and lost, and
the script ran on. While tvis runs a script, a KeyboardInterrupt that reaches the hook is
raised again in the main thread, as if the key had been pressed just after:
`_thread.interrupt_main` from a new thread, so that the main thread takes it once the
hook has returned (called from the hook itself it would be raised inside the hook, and
lost again). Only under Python's own SIGINT handler: a handler of the script's would run
twice. Every other exception goes to the hook that was there before.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
from typing import Any, Callable


def pass_on_lost_interrupts() -> Callable[[], None]:
    """Install the hook; returns the undo."""
    def lost_interrupt(exc_type: type[BaseException], exc: BaseException | None) -> int | None:
        if issubclass(exc_type, KeyboardInterrupt) and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            return signal.SIGINT
        return None
    return pass_on_lost(lost_interrupt)


def pass_on_lost(signal_of: Callable[[type[BaseException], BaseException | None], int | None]
                 ) -> Callable[[], None]:
    """Raise again in the main thread each exception lost in a callback for which
    `signal_of` names a signal: that signal, as if it had arrived just after, so its
    handler runs again where the exception has somewhere to go. Returns the undo."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        signum = signal_of(unraisable.exc_type, unraisable.exc_value) if unraisable.exc_type is not None else None
        if signum is not None:
            try:
                # Not threading.Thread: its start() waits for the thread, and the
                # interrupt would land in that wait.
                _thread.start_new_thread(_thread.interrupt_main, (signum,))
                return
            except RuntimeError:  # no new threads at interpreter shutdown
                pass
        previous(unraisable)

    sys.unraisablehook = hook

    def undo() -> None:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous

    return undo


def die_of(signum: int) -> None:
    """End the process by `signum` with its default action, as python would have ended
    (an uncaught Ctrl-C, a SIGTERM), its output flushed first."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
