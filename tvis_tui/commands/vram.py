"""`tvis vram SCRIPT --gpu NAME`: will the training script fit, and what saves memory."""

from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
from typing import TYPE_CHECKING

from tvis_tui.errors import TvisError

if TYPE_CHECKING:  # the estimator loads on demand: `tvis --help` stays fast
    from pathlib import Path

    from tvis_tui.vram.estimate import Estimate

DTYPES = ("float32", "bfloat16", "float16", "amp-bf16", "amp-fp16")
DEFAULT_GPU = "a100-80gb"
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmbt]?)\s*$", re.IGNORECASE)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.usage = ("tvis vram SCRIPT [--gpu NAME | --gpu-memory SIZE] [--batch-size N] "
                    "[--seq-len N] [--dtype D] [--optimizer NAME] [--params N] [--trace] "
                    "[--format text|json] [--script-args \"ARGS\"]")
    parser.add_argument("script", help="the training script")
    parser.add_argument("--gpu", default=None, help=f"GPU to check against (default {DEFAULT_GPU}; "
                        "`tvis gpus` lists them)")
    parser.add_argument("--gpu-memory", default=None, metavar="SIZE",
                        help="usable memory of a GPU not in the list, e.g. 48GiB")
    parser.add_argument("--batch-size", type=int, default=None, metavar="N")
    parser.add_argument("--seq-len", type=int, default=None, metavar="N")
    parser.add_argument("--dtype", choices=DTYPES, default=None,
                        help="parameter dtype, or amp-* for autocast mixed precision")
    parser.add_argument("--optimizer", default=None, metavar="NAME",
                        help="sgd, sgd-momentum, adam, adamw, adamw8bit, adafactor, lion, ...")
    parser.add_argument("--params", default=None, metavar="N",
                        help="parameter count instead of the model's, e.g. 7B or 125M")
    parser.add_argument("--trace", action="store_true",
                        help="run the script on fake tensors with CPU kernels (needs torch, no GPU) "
                        "and measure its tensors instead of estimating them")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--script-args", default="", metavar='"ARGS"',
                        help="the script's arguments, as one quoted string: what its argparse "
                        "parse_args() returns in the estimate, and its command line when traced")


def parse_count(text: str) -> int:
    match = _COUNT.match(text)
    if not match:
        raise TvisError(f"--params {text!r}: write a count like 125M, 7B or 1.3e9")
    scale = {"": 1, "k": 10 ** 3, "m": 10 ** 6, "b": 10 ** 9, "t": 10 ** 12}[match.group(2).lower()]
    return int(float(match.group(1)) * scale)


def _optimizer(name: str) -> str:
    from tvis_tui.vram.memory import OPTIMIZER_STATE

    key = name.lower().replace("_", "")
    key = key if key in OPTIMIZER_STATE else key.replace("-", "")
    if key not in OPTIMIZER_STATE:
        raise TvisError(f"--optimizer {name!r}: unknown; one of {', '.join(OPTIMIZER_STATE)}")
    return key


LARGEST_SIZE = 2**31 - 1
"""Past int32, no loader or sequence is real and the arithmetic leaves float range."""


def _positive(name: str, value: int | None) -> None:
    if value is not None and not 1 <= value <= LARGEST_SIZE:
        shown = f"{value:,}" if len(str(value)) <= 30 else f"a {len(str(abs(value)))}-digit number"
        raise TvisError(f"{name} {shown}: must be from 1 to {LARGEST_SIZE:,}")


OVERRIDES = ("batch_size", "seq_len", "dtype", "optimizer", "params")
"""Flags that change what the static reader assumes; a traced run cannot take them."""


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tvis_tui.vram.facts import Settings
    from tvis_tui.vram.gpus import custom_gpu, find_gpu, parse_size

    if args.gpu and args.gpu_memory:
        raise TvisError("give --gpu or --gpu-memory, not both")
    named = DEFAULT_GPU if args.gpu is None else args.gpu  # `--gpu ""` is no GPU's name
    gpu = custom_gpu(parse_size(args.gpu_memory)) if args.gpu_memory else find_gpu(named)
    _positive("--batch-size", args.batch_size)
    _positive("--seq-len", args.seq_len)
    if args.trace:
        _no_overrides(args)
    path = Path(args.script)
    if not path.exists():
        broken = " (a symbolic link to nothing, or a loop of them)" if path.is_symlink() else ""
        raise TvisError(f"{path}: no such file{broken}")
    if path.is_dir():
        raise TvisError(f"{path}: is a folder, not a training script")
    settings = Settings(batch_size=args.batch_size, seq_len=args.seq_len, dtype=args.dtype,
                        optimizer=_optimizer(args.optimizer) if args.optimizer else None,
                        params=parse_count(args.params) if args.params else None,
                        script_args=tuple(_script_args(args)), bf16=gpu.bf16)
    return _report(path, settings, gpu, args)


def _script_args(args: argparse.Namespace) -> list[str]:
    try:
        return shlex.split(args.script_args)
    except ValueError as exc:  # an unclosed quote
        raise TvisError(f"--script-args {args.script_args!r}: {exc}") from None


def _no_overrides(args: argparse.Namespace) -> None:
    """The trace runs the script as written: refusing an override is more honest than
    tracing the script's own batch and printing it beside figures computed with the flag."""
    given = [f"--{name.replace('_', '-')}" for name in OVERRIDES if getattr(args, name) is not None]
    if given:
        raise TvisError(f"--trace runs the script as written, so {' and '.join(given)} "
                        f"{'does' if len(given) == 1 else 'do'} not apply to it; give the script's "
                        "own arguments with --script-args, or drop --trace for the static estimate")


def _require_model(static: Estimate, path: Path) -> None:
    """Without a model or --params there is nothing to estimate: a verdict would be the CUDA
    context alone."""
    from tvis_tui.vram.estimate import MODEL_NOT_FOLLOWED

    reason = static.facts.no_model
    if reason is None or static.settings.params is not None:
        return
    also = ", or --trace to run it" if reason == MODEL_NOT_FOLLOWED else ""
    raise TvisError(f"{path}: {reason}, so there is nothing to estimate; give --params N "
                    f"(e.g. --params 125M) to estimate from a parameter count{also}")


def _report(path, settings, gpu, args: argparse.Namespace) -> int:
    from tvis_tui.vram.estimate import estimate
    from tvis_tui.vram.suggest import suggest
    from tvis_tui.vram.verdict import Verdict

    static = estimate(path, settings)
    shown = static
    if args.trace:
        from tvis_tui.vram.trace import torch_available, traced_estimate

        if not torch_available():
            raise TvisError("--trace needs torch installed; the static estimate does not")
        shown = traced_estimate(path, list(settings.script_args), static)
    else:
        _require_model(static, path)
    verdict = Verdict(gpu, shown.peak_bytes)
    suggestions = suggest(static, gpu.usable_bytes, bf16=gpu.bf16, shown=shown)
    if args.trace and suggestions:
        from tvis_tui.vram.trace import SAVINGS_NOTE

        shown.notes.append(SAVINGS_NOTE)
    if args.format == "json":
        from tvis_tui.vram.render import as_json

        print(json.dumps(as_json(shown, verdict, suggestions), indent=2))
        return 0
    from rich.console import Console

    from tvis_tui.vram.render import report

    console = Console() if sys.stdout.isatty() else Console(width=120)
    title = f"{path} on {gpu.name}" + (" (traced)" if args.trace else " (static estimate)")
    console.print(report(shown, verdict, suggestions, title))
    return 0
