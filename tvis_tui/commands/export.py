"""`tvis export RUN [--format jsonl|json] [-o FILE]`: a run for scripts and CI."""

from __future__ import annotations

import argparse
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", help="a run folder")
    parser.add_argument("--format", choices=("jsonl", "json"), default="jsonl",
                        help="JSON lines (one object per line) or one JSON document")
    parser.add_argument("-o", "--output", help="write here instead of standard output")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.export import export_json, export_jsonl
    from tvis_tui.store import RunReader

    write = export_jsonl if args.format == "jsonl" else export_json
    with RunReader(args.run) as reader:
        if args.output is None:
            write(reader, sys.stdout)
        else:
            with open(args.output, "w", encoding="utf-8") as out:
                write(reader, out)
    return 0
