"""`tvis ls [DIR]`: the runs in a folder, newest first."""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", default="runs",
                        help="a folder of runs, or one run (default: runs)")


def main(args: argparse.Namespace) -> int:
    from rich.console import Console

    from tvis_tui.store.listing import runs_table
    from tvis_tui.store.runs import find_runs

    runs = find_runs(args.directory)
    # Piped output (scripts, grep) gets whole rows rather than ellipsised columns.
    console = Console() if sys.stdout.isatty() else Console(width=1000)
    if not runs:
        console.print(f"no runs in {args.directory}")
        return 0
    console.print(runs_table(runs))
    return 0
