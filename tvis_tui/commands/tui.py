"""`tvis tui PATH`: browse a recorded run (or pick one from a folder of runs)."""

from __future__ import annotations

import argparse
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default="runs",
                        help="a run folder, or a folder of runs to pick from (default: runs)")
    parser.add_argument("--call", type=int, default=None, metavar="N",
                        help="open the run at call number N (PATH must be a run)")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.app import make_app

    if args.call is not None:
        _check_call(Path(args.path), args.call)
    make_app(args.path, start=args.call).run()
    return 0


def _check_call(path: Path, call: int) -> None:
    """--call needs one run: the picker would silently drop it, and "calls 1 to 0" reads
    as a range. Other paths and out-of-range numbers are left to make_app's errors."""
    from tvis_tui.errors import TvisError
    from tvis_tui.store import RunReader
    from tvis_tui.store.runs import is_run

    if path.is_dir() and not is_run(path):
        raise TvisError(f"--call {call}: {path} is a folder, not a run; give one run "
                        f"(tvis tui {path / '<run>'} --call {call})")
    if is_run(path):
        with RunReader(path) as reader:
            if reader.call_count() == 0:
                raise TvisError(f"--call {call}: {path} has no calls")
