"""A Ctrl-C that lands in a callback whose exceptions Python only prints still stops the script."""

from __future__ import annotations

import gc
import signal
import sys
import time
import weakref

import pytest

from tvis_tui.interrupts import pass_on_lost_interrupts


class _Thing:
    pass


def _interrupted_in_a_weakref_callback(wait: float = 0.5) -> None:
    """Drop an object whose weakref callback is hit by Ctrl-C, then wait a moment (where
    the main thread takes a pending signal)."""
    thing = _Thing()

    def on_death(_: object) -> None:
        raise KeyboardInterrupt

    ref = weakref.ref(thing, on_death)
    assert ref() is thing
    del thing
    _a_moment(wait)


def _a_moment(seconds: float = 0.5) -> None:
    for _ in range(int(seconds * 100)):
        time.sleep(0.01)


RAISED_WITHIN = 10.0
"""Seconds allowed for the thread that passes the interrupt on to start and run: on a
loaded machine (the tests of two workers, 2 cores) half a second was not always enough."""


def test_without_the_hook_python_prints_the_interrupt_and_goes_on(capsys, monkeypatch):
    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # not pytest's
    _interrupted_in_a_weakref_callback()  # no KeyboardInterrupt: it was lost
    assert "KeyboardInterrupt" in capsys.readouterr().err


def test_an_interrupt_in_a_weakref_callback_is_raised_again_in_the_main_thread(capsys):
    undo = pass_on_lost_interrupts()
    try:
        with pytest.raises(KeyboardInterrupt):
            _interrupted_in_a_weakref_callback(RAISED_WITHIN)
    finally:
        undo()
    assert "Exception ignored" not in capsys.readouterr().err


def test_an_interrupt_in_a_gc_callback_is_raised_again():
    def on_gc(phase: str, info: dict) -> None:
        if phase == "start":
            raise KeyboardInterrupt

    undo = pass_on_lost_interrupts()
    gc.callbacks.append(on_gc)
    try:
        with pytest.raises(KeyboardInterrupt):
            gc.collect()
            _a_moment(RAISED_WITHIN)
    finally:
        gc.callbacks.remove(on_gc)
        undo()


def test_other_exceptions_go_to_the_previous_hook_and_undo_restores_it(monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u.exc_type))
    previous = sys.unraisablehook
    undo = pass_on_lost_interrupts()
    thing = _Thing()
    ref = weakref.ref(thing, lambda _: 1 / 0)
    assert ref() is thing
    del thing
    undo()
    assert seen == [ZeroDivisionError]
    assert sys.unraisablehook is previous


def test_a_sigterm_that_landed_in_a_callback_is_raised_again_in_the_main_thread(capsys):
    # tvis run turns SIGTERM into Terminated (record/terminations.py): lost in a weakref
    # callback, the script would have run on past its scheduler's time limit.
    from tvis_tui.record.terminations import Terminated, end_on_termination

    undo = end_on_termination()
    thing = _Thing()

    def on_death(_: object) -> None:
        raise Terminated(signal.SIGTERM)

    try:
        with pytest.raises(Terminated) as raised:
            ref = weakref.ref(thing, on_death)
            assert ref() is thing
            del thing
            _a_moment(RAISED_WITHIN)
    finally:
        undo()
    assert raised.value.name == "SIGTERM" and "Exception ignored" not in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # undone


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals")
def test_a_scripts_signal_handler_that_exits_inside_a_callback_exits_once(capsys):
    """A SIGTERM handler that saves and calls sys.exit(), run by python inside a weakref
    callback of tvis's: its SystemExit was printed as ignored and the script trained on
    (a fresh clone's test run). It is raised again, the same exception, and the handler
    does not run twice."""
    from tvis_tui.interrupts import pass_on_lost_handler_exceptions

    ran = []

    def save_and_leave(signum: int, frame: object) -> None:
        ran.append(signum)
        sys.exit(3)

    old = signal.signal(signal.SIGUSR1, save_and_leave)
    undo = pass_on_lost_handler_exceptions()
    try:
        thing = _Thing()
        ref = weakref.ref(thing, lambda _: save_and_leave(signal.SIGUSR1, None))  # as if it landed there
        assert ref() is thing
        with pytest.raises(SystemExit) as caught:
            del thing
            _a_moment(RAISED_WITHIN)
        assert caught.value.code == 3 and ran == [signal.SIGUSR1]
        assert signal.getsignal(signal.SIGUSR1) is save_and_leave  # the script's, put back
    finally:
        undo()
        signal.signal(signal.SIGUSR1, old)
    assert "Exception ignored" not in capsys.readouterr().err
