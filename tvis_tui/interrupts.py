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
twice. An exception a handler of the script's raised there (a SIGTERM handler's
`sys.exit()`) is raised again itself (`pass_on_lost_handler_exceptions`). Every other
exception goes to the hook that was there before.
"""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
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
    def taken(unraisable: Any) -> bool:
        signum = signal_of(unraisable.exc_type, unraisable.exc_value) if unraisable.exc_type is not None else None
        return signum is not None and _signal_main(signum)
    return _before_unraisable_hook(taken)


def _signal_main(signum: int) -> bool:
    """Have the main thread take `signum` as soon as it runs on; False where no thread
    can start to say so (interpreter shutdown)."""
    try:
        # Not threading.Thread: its start() waits for the thread, and the interrupt
        # would land in that wait.
        _thread.start_new_thread(_thread.interrupt_main, (signum,))
        return True
    except RuntimeError:
        return False


def _before_unraisable_hook(taken: Callable[[Any], bool]) -> Callable[[], None]:
    """Put `taken` before sys.unraisablehook: what it does not take (False) goes on to the
    hook that was there. Returns the undo."""
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not taken(unraisable):
            previous(unraisable)

    sys.unraisablehook = hook

    def undo() -> None:
        if sys.unraisablehook is hook:
            sys.unraisablehook = previous

    return undo


def pass_on_lost_handler_exceptions() -> Callable[[], None]:
    """A signal handler of the script's runs wherever the main thread is, tvis's callbacks
    included: its `sys.exit()` (a SIGTERM handler that saves and leaves) was lost there,
    and the script ran on. Such an exception is raised again in the main thread, the very
    one, as if the handler had raised it just after the callback: by a one-shot handler
    for its signal that puts the script's back first (the script's does not run twice).
    Install before the hooks for tvis's own signals, which come first. Returns the undo."""
    def taken(unraisable: Any) -> bool:
        exc = unraisable.exc_value
        signum = _raised_by_handler(exc) if exc is not None else None
        if signum is None or _thread.get_ident() != threading.main_thread().ident:
            return False
        handler = signal.getsignal(signum)

        def once(number: int, frame: Any) -> None:
            signal.signal(signum, handler)
            raise exc
        signal.signal(signum, once)
        if _signal_main(signum):
            return True
        signal.signal(signum, handler)
        return False
    return _before_unraisable_hook(taken)


def _raised_by_handler(exc: BaseException) -> int | None:
    """The signal whose Python handler is on `exc`'s traceback, if any."""
    codes = {}
    for signum in signal.valid_signals():
        try:
            handler = signal.getsignal(signum)
        except (ValueError, OSError):
            continue
        code = getattr(getattr(handler, "__func__", handler), "__code__", None)
        if code is not None:
            codes[code] = signum
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return codes[tb.tb_frame.f_code]
        tb = tb.tb_next
    return None


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
