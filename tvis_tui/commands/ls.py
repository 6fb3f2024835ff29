"""`tvis ls [DIR]`: the runs in a folder, newest first."""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", nargs="?", default="runs",
                        help="a folder of runs, or one run (default: runs)")


def main(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from tvis_tui.store.listing import runs_table, unreadable_notes
    from tvis_tui.store.runs import find_runs

    runs = find_runs(args.directory)
    # Piped output (scripts, grep) gets whole rows rather than ellipsised columns.
    console = Console() if sys.stdout.isatty() else Console(width=1000)
    if not runs:
        # Text, not a str: the folder name is the user's, and `md[/x]` or `:x:` in a str
        # would be read as markup or an emoji code.
        console.print(Text(f"no runs in {args.directory}"))
        return 0
    console.print(runs_table(runs))
    for note in unreadable_notes(runs):
        console.print(note)
    return 0
