"""`tvis export RUN [--format jsonl|json] [-o FILE]`: a run for scripts and CI."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, Callable, TextIO

from tvis_tui.errors import TvisError


SHOWN_DAMAGE = 5
"""Damaged records named on stderr; the export holds a "damaged" record for every one."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.epilog = ("Exit status: 0 when the whole run was written; 1 when damaged data or line "
                     "records were left out (each is named in the export and on stderr); 2 when "
                     "the run cannot be exported (a damaged call or step: with -o nothing is "
                     "written, on stdout what came before it).")
    parser.add_argument("run", help="a run folder")
    parser.add_argument("--format", choices=("jsonl", "json"), default="jsonl",
                        help="JSON lines (one object per line) or one JSON document")
    parser.add_argument("-o", "--output", help="write here instead of standard output")


def main(args: argparse.Namespace) -> int:
    from tvis_tui.export import export_json, export_jsonl
    from tvis_tui.store.codec import BadKey

    write = export_jsonl if args.format == "jsonl" else export_json
    try:
        return _export(args, write)
    except BadKey as exc:  # the codec does not know which run it read
        raise TvisError(f"{args.run}: {exc}") from None


def _export(args: argparse.Namespace, write: Callable[[Any, TextIO], list[str]]) -> int:
    from tvis_tui.store import RunReader

    damaged: list[str] = []
    with RunReader(args.run) as reader:
        if args.output is None:
            damaged = write(reader, sys.stdout)
            return _said(damaged)
        # Checked before open(): opening for writing truncates, and `-o RUN/data.mdb`
        # would destroy the recording being read.
        _refuse_output_inside_run(Path(args.output), reader.path)
        try:
            _write_whole(Path(args.output), lambda out: damaged.extend(write(reader, out)))
        except OSError as exc:  # a missing folder, no permission, a full disk
            raise TvisError(f"-o {args.output}: cannot write ({exc.strerror or exc})") from None
    return _said(damaged)


def _said(damaged: list[str]) -> int:
    """Warn of the records left out; the exit status that says whether any were."""
    for reason in damaged[:SHOWN_DAMAGE]:
        print(f"tvis: warning: {reason}: left out of the export", file=sys.stderr)
    if len(damaged) > SHOWN_DAMAGE:
        print(f"tvis: warning: {len(damaged) - SHOWN_DAMAGE} more damaged records left out "
              "(\"damaged\" records in the export)", file=sys.stderr)
    return 1 if damaged else 0


def _write_whole(output: Path, write: Callable[[TextIO], None]) -> None:
    """Write a file through a temporary one beside it, renamed over it once whole: a cut
    export would read as a whole one, and a failure leaves what was there before. A
    device or a pipe (`-o /dev/stdout`) is written as it is, and never removed."""
    target = output.resolve() if output.is_symlink() else output
    if target.exists() and not target.is_file():
        with open(target, "w", encoding="utf-8") as out:
            write(out)
        return
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        with open(partial, "x", encoding="utf-8") as out:
            write(out)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)


def _inside_a_run(folder: Path) -> bool:
    from tvis_tui.store.runs import is_run

    try:
        return is_run(folder)
    except OSError:
        return False


def _refuse_output_inside_run(output: Path, run: Path) -> None:
    """TvisError when `output` lies in the run folder being read or in another run's, or
    is a hard link to one of the read run's files (which resolves elsewhere)."""
    run_dir = run.resolve()
    if output.resolve().is_relative_to(run_dir):
        where = f"inside the run folder {run}"
    elif output.exists() and any(_same_file(output, f) for f in run_dir.iterdir()):
        where = f"the same file as one in the run folder {run}"
    elif _inside_a_run(output.resolve().parent):  # `-o runs/b/data.mdb` while exporting runs/a
        where = f"inside the run folder {output.resolve().parent}"
        raise TvisError(f"-o {output}: {where}; writing there would damage that run "
                        "(write the export elsewhere)")
    else:
        return
    raise TvisError(f"-o {output}: {where}; writing there would damage the run "
                    "(write the export elsewhere)")


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False
