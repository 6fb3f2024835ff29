"""`tvis tui PATH`: browse a recorded run (or pick one from a folder of runs)."""

from __future__ import annotations

import argparse


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", nargs="?", default="runs",
                        help="a run folder, or a folder of runs to pick from (default: runs)")
    parser.add_argument("--call", type=int, default=None, metavar="N",
                        help="open the run at call number N (PATH must be a run)")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.app import make_app

    make_app(args.path, start=args.call).run()
    return 0

