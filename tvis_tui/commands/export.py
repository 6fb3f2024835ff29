"""`tvis export RUN [--format jsonl|json] [-o FILE]`: a run for scripts and CI."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tvis_tui.errors import TvisError


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
            return 0
        # Checked before open(): opening for writing truncates, and `-o RUN/data.mdb`
        # would destroy the recording being read.
        _refuse_output_inside_run(Path(args.output), reader.path)
        opened = False
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                opened = True
                write(reader, out)
        except OSError as exc:  # a missing folder, no permission, a full disk
            if opened:  # a cut export would read as a whole one
                Path(args.output).unlink(missing_ok=True)
            raise TvisError(f"-o {args.output}: cannot write ({exc.strerror or exc})") from None
    return 0


def _refuse_output_inside_run(output: Path, run: Path) -> None:
    """TvisError when `output` lies in the run folder being read, or is a hard link to
    one of its files (which resolves elsewhere)."""
    run_dir = run.resolve()
    if output.resolve().is_relative_to(run_dir):
        where = f"inside the run folder {run}"
    elif output.exists() and any(_same_file(output, f) for f in run_dir.iterdir()):
        where = f"the same file as one in the run folder {run}"
    else:
        return
    raise TvisError(f"-o {output}: {where}; writing there would damage the run "
                    "(write the export elsewhere)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False
