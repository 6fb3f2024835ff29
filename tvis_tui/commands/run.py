"""`tvis run`: run a training script unmodified and record its first steps."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tvis_tui.errors import TvisError
from tvis_tui.record.options import CAPTURE_MODES, CaptureOptions


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("tvis run [--steps N] [--out DIR] [--name NAME] [--max-tensor-bytes B] "
                    "[--capture values|summary] [--no-lines] [--no-grads] [--include-modules P] "
                    "[--exclude-modules P] [--include-files P] [--exclude-files P] "
                    "(SCRIPT | -m MODULE) [ARGS...]")
    parser.add_argument("--steps", type=int, default=None, metavar="N",
                        help="stop the script after N training steps (default: record until it ends)")
    parser.add_argument("--out", default="runs", metavar="DIR",
                        help="folder that receives the run folder (default: runs)")
    parser.add_argument("--name", default=None, metavar="NAME",
                        help="name of the run folder (default: <date>-<time>-<script>)")
    parser.add_argument("--max-tensor-bytes", type=int, default=1 << 20, metavar="B",
                        help="store full values of tensors up to B bytes (default: 1048576)")
    parser.add_argument("--capture", choices=CAPTURE_MODES, default="values",
                        help="values: statistics, histograms and values under the cap (default); "
                             "summary: statistics and histograms only")
    parser.add_argument("--no-lines", dest="lines", action="store_false",
                        help="do not record the tensors each line of user code created")
    parser.add_argument("--no-grads", dest="grads", action="store_false",
                        help="do not record the gradient of each module output")
    for verb, what in (("include", "only"), ("exclude", "not")):
        parser.add_argument(f"--{verb}-modules", action="append", default=[], metavar="PATTERN",
                            help=f"record {what} modules whose qualified name, an ancestor's name "
                                 "(the model's own name too) or class name matches (fnmatch; repeatable)")
        parser.add_argument(f"--{verb}-files", action="append", default=[], metavar="PATTERN",
                            help=f"record {what} user functions and lines of files whose path "
                                 "relative to the script's folder matches (repeatable)")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run a module, as `python -m MODULE` does")
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                        help="the script and its arguments; everything from here on is the script's")


MAX_STEPS = 2**32 - 1
MAX_TENSOR_BYTES = 2**62
"""Bounds the store can hold (its integers are at most 64 bits) and far past any real use."""


def main(args: argparse.Namespace) -> int:
    target = args.target[1:] if args.target[:1] == ["--"] else args.target  # `run -- train.py`
    if not target:
        raise TvisError("tvis run needs a script (or -m MODULE) to run")
    if args.steps is not None and not 1 <= args.steps <= MAX_STEPS:
        raise TvisError(f"--steps {args.steps}: must be from 1 to {MAX_STEPS}")
    if not 0 <= args.max_tensor_bytes <= MAX_TENSOR_BYTES:
        raise TvisError(f"--max-tensor-bytes {args.max_tensor_bytes}: must be from 0 to 2**62")
    _check_name(args.name)
    _check_out(args.out)
    from tvis_tui.record.runner import Options, Target, record

    name, *rest = target
    target = Target(name, tuple(rest), module=args.module)
    options = Options(out_dir=args.out, name=args.name, steps=args.steps,
                      max_tensor_bytes=args.max_tensor_bytes, capture=CaptureOptions(
                          capture=args.capture, lines=args.lines, grads=args.grads,
                          include_modules=tuple(args.include_modules),
                          exclude_modules=tuple(args.exclude_modules),
                          include_files=tuple(args.include_files),
                          exclude_files=tuple(args.exclude_files)))
    return record(target, options)


def _check_name(name: str | None) -> None:
    """A run's name is one folder inside --out: `tvis ls OUT` must find it there."""
    if name is not None and (not name or name in (".", "..") or "/" in name or os.sep in name):
        raise TvisError(f"--name {name!r}: must be a plain folder name (no '/'; use --out for the folder)")
    if name is not None and not name.isprintable():  # a newline would cut `tvis ls`'s table row
        raise TvisError(f"--name {name!r}: must be printable (no newline, tab or control character)")


def _check_out(out: str) -> None:
    """Runs go beside each other; one inside another run's folder would be listed by nobody."""
    from tvis_tui.store.runs import is_run

    if not out:  # not "the current folder": that is `--out .`
        raise TvisError("--out '': give a folder (--out . for the current one)")
    try:
        inside_a_run = is_run(Path(out))
    except OSError:  # cannot be looked into: making the run's folder there says why
        return
    if inside_a_run:
        raise TvisError(f"--out {out}: is a run folder; give the folder that holds runs")
