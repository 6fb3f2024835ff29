"""`tvis run`: run a training script unmodified and record its first steps."""

from __future__ import annotations

import argparse

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
                                 "or class name matches (fnmatch; repeatable)")
        parser.add_argument(f"--{verb}-files", action="append", default=[], metavar="PATTERN",
                            help=f"record {what} user functions and lines of files whose path "
                                 "relative to the script's folder matches (repeatable)")
    parser.add_argument("-m", dest="module", action="store_true",
                        help="run a module, as `python -m MODULE` does")
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="SCRIPT [ARGS...]",
                        help="the script and its arguments; everything from here on is the script's")


def main(args: argparse.Namespace) -> int:
    if not args.target:
        raise TvisError("tvis run needs a script (or -m MODULE) to run")
    if args.steps is not None and args.steps < 1:
        raise TvisError(f"--steps {args.steps}: must be 1 or more")
    if args.max_tensor_bytes < 0:
        raise TvisError(f"--max-tensor-bytes {args.max_tensor_bytes}: must be 0 or more")
    from tvis_tui.record.runner import Options, Target, record

    name, *rest = args.target
    target = Target(name, tuple(rest), module=args.module)
    options = Options(out_dir=args.out, name=args.name, steps=args.steps,
                      max_tensor_bytes=args.max_tensor_bytes, capture=CaptureOptions(
                          capture=args.capture, lines=args.lines, grads=args.grads,
                          include_modules=tuple(args.include_modules),
                          exclude_modules=tuple(args.exclude_modules),
                          include_files=tuple(args.include_files),
                          exclude_files=tuple(args.exclude_files)))
    return record(target, options)
