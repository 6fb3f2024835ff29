"""tvis: a step-through debugger for PyTorch training that lives in the terminal.

The `tvis` command parses arguments and hands each subcommand to its module.

Each subcommand lives in `tvis_tui/commands/<name>.py` with two functions,
`configure(parser)` and `main(args) -> int`. Those modules import only argparse-level
code at import time so that `tvis check` or `tvis tui` never pays for `import torch`.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from typing import Sequence

from tvis_tui import __version__
from tvis_tui.errors import TvisError
from tvis_tui.interrupts import die_of

# name -> one-line help. The module is tvis_tui.commands.<name>.
COMMANDS: dict[str, str] = {
    "run": "run a training script and record its first steps",
    "ls": "list recorded runs",
    "export": "write a recorded run as JSON or JSON lines",
    "tui": "browse a recorded run in the terminal",
    "check": "find costly training bugs without running the script",
    "vram": "estimate whether a training script fits in GPU memory",
    "gpus": "list the GPUs that `tvis vram --gpu` knows",
}


def _command_module(name: str):
    return importlib.import_module(f"tvis_tui.commands.{name}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tvis", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"tvis {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_line in COMMANDS.items():
        module = _command_module(name)
        command_parser = sub.add_parser(name, help=help_line, description=help_line)
        module.configure(command_parser)
        command_parser.set_defaults(_main=module.main)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    _fill_closed_standard_fds()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    if args.command != "run":
        _writable_standard_streams()
        _replace_unencodable()
    try:
        code = int(args._main(args) or 0)
        if sys.stdout is not None and not sys.stdout.closed:  # a recorded script may close it
            sys.stdout.flush()  # here, where a full disk under `> FILE` can still be reported
        return code
    except TvisError as exc:
        print(f"tvis: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return _interrupted()
    except BrokenPipeError:
        # `tvis export run | head`: the reader went away; stop quietly like other tools.
        _drop_stdout()
        return 1
    except OSError as exc:
        if exc.errno not in _FULL:
            raise
        _drop_stdout()  # python's own flush at exit would fail again, with a traceback
        print(f"tvis: error: cannot write ({exc.strerror})", file=sys.stderr)
        return 1


def _fill_closed_standard_fds() -> None:
    """Put /dev/null on a standard descriptor the shell closed (`2>&-`): the next file
    opened would take its number, and tvis's reports to fd 2 would then be written into
    the run's data file (robustness sweep). sys.stderr stays as python made it (None)."""
    if os.name != "posix":
        return
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            opened = os.open(os.devnull, os.O_RDWR)  # the lowest free number: this one
            if opened != fd:
                os.dup2(opened, fd)
                os.close(opened)


def _writable_standard_streams() -> None:
    """python leaves sys.stdout/sys.stderr None when the shell closed them (`>&-`): tvis's
    output then goes nowhere, as a print's would, rather than into a traceback. Not for
    `tvis run`: the script finds them as python would have made them."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w"))


def _replace_unencodable() -> None:
    """Under an output encoding without some character tvis prints (PYTHONIOENCODING=ascii,
    and a table cut with "…"), that character prints as "?" rather than a traceback. Not
    for `tvis run`: the script's own prints must fail there as they would under python."""
    if sys.stdout is not None and getattr(sys.stdout, "errors", None) == "strict":
        sys.stdout.reconfigure(errors="replace")


_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Errors of a write to a full disk (`tvis export run > FILE`): a one-line error."""


def _drop_stdout() -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _interrupted() -> int:
    """End as python ends on an uncaught Ctrl-C: killed by SIGINT, so that a shell loop
    or a caller sees the interrupt (an exit status of 130 would read as a normal exit)."""
    if os.name == "posix":
        die_of(signal.SIGINT)
    return 130  # where a process cannot kill itself with a signal


if __name__ == "__main__":
    sys.exit(main())
