"""`tvis tui PATH`: browse a recorded run (or pick one from a folder of runs)."""

from __future__ import annotations

import argparse
import sys

from tvis_tui.errors import TvisError
from tvis_tui.widgets.picture import ENV, METHODS


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default="runs",
                        help="a run folder, or a folder of runs to pick from (default: runs)")
    parser.add_argument("--call", type=int, default=None, metavar="N",
                        help="open the run at call number N (PATH must be a run)")
    parser.add_argument("--images", choices=METHODS, default=None,
                        help="how to draw images: auto asks the terminal (sixel, kitty's "
                             f"protocol, else half blocks); default: ${ENV} or auto")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.app import make_app
    from tvis_tui.widgets.picture import checked_method, choose, default_method

    app = make_app(args.path, start=args.call)
    method = checked_method(args.images or default_method())
    _need_a_terminal()
    choose(method)  # asks the terminal: before Textual owns it
    app.run()
    if app.damage is not None:  # a run opened on its own found damaged while shown
        raise TvisError(app.damage)
    return app.return_code or 0  # 1 when the app failed (Textual printed why)


def _need_a_terminal() -> None:
    """Textual reads keys from stdin, sizes the screen by stdout and draws on stderr: with
    any of them not a terminal (`ssh host tvis tui` without -t, cron, a pipe) it would hang,
    fail in termios or draw at the wrong size."""
    streams = {"stdin": sys.stdin, "stdout": sys.stdout, "stderr": sys.stderr}
    missing = [name for name, stream in streams.items() if stream is None or not stream.isatty()]
    if missing:
        named = " and ".join([", ".join(missing[:-1]), missing[-1]] if len(missing) > 1 else missing)
        raise TvisError(f"tvis tui needs a terminal, and its {named} {'is' if len(missing) == 1 else 'are'} "
                        "not one (over ssh: ssh -t; to read a run in a script: tvis export)")
