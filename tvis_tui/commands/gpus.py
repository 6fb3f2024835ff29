"""`tvis gpus`: the GPUs `tvis vram --gpu` knows and the memory a process can use on each."""

from __future__ import annotations

import argparse
import json
import sys


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="a table (default) or a JSON list")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.vram.gpus import GPUS

    if args.format == "json":
        rows = [{"key": g.key, "name": g.name, "memory_gib": g.memory_gib,
                 "usable_bytes": g.usable_bytes, "kind": g.kind, "aliases": list(g.aliases)}
                for g in GPUS]
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console

    from tvis_tui.vram.render import gpus_table

    console = Console() if sys.stdout.isatty() else Console(width=200)
    console.print(gpus_table())
    return 0
