"""Recording overhead and timing truth on the bundled examples, plain vs under tvis.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_record.py [--steps 30] [--rounds 3]
        [--examples cnn,lm] [--breakdown] [--script-args '--batch-size 128']

For the bundled CNN (examples/image_classifier) and char LM (examples/char_lm), in one
process, alternating runs to spread machine noise:

- overhead ratio: median step time (interval between consecutive `Optimizer.step()`
  returns, taken by a hook of this script's own, identical in every run) under tvis over
  plain, with everything on (target <= 3x) and with `--capture summary --no-lines`
  (target <= 1.5x);
- stored bytes per step for each;
- timing truth: the step time, forward and backward tvis recorded (StepRecord wall_ns and
  phase_ns, tvis's own time taken out) against the same quantities timed in the plain run
  (top-level non-loss module calls and `torch.autograd.backward`, timed by this script's
  hooks): a ratio near 1 means tvis's overhead was excluded (target within 15%).

What is left in recorded/plain above 1 (2-core VM, Dec 2026): tvis's time in its hooks,
trace callbacks, backward node hooks and garbage collections is taken out, but not what
tvis does to the script's own code between hooks: torch's slow path for modules when global
hooks exist (~2 us per call), the few lines of each hook before its clock starts, caches
and branch predictors the hooks and tensor summaries evict, and the writer thread
competing for the GIL and the cores (it only runs LMDB's puts and commits, since Dec 2026:
encoding records there held the GIL when training ops wanted it back; sink.py). A model of 200 tiny Linear layers shows it per call:
plain 6.5 us, recorded 12-14 us (median).

The overhead ratios move by 5-10% between runs on this shared VM; tvis's own time per step
(hooks, trace callbacks and collections, measured by tvis itself, printed for each config)
moves much less and is the figure to compare changes by.

Tried and measured (Dec 2026), so not done: summarising on the writer thread from a copy
taken in the hook (summary mode 3.80x -> 4.95x: every torch op of either thread hands the
GIL over, and the training thread waits for each hand-over); summarising in a helper
process from a shared-memory ring (no better than in the hook: the copy to cold memory and
a pipe write per tensor cost what the summary did); one fused numba loop (min/max and the
zero count keep LLVM from vectorising it: 132 us per 131k values against numpy's 35 us in
four passes; only sum and sum of squares fuse, worth ~2 ms a CNN step for a 40 MB
dependency); a shorter GIL switch interval for the writer thread (0.5 ms instead of 5:
everything on 3.57/3.56/3.26x with the default, 3.54/3.46/3.42x with it, interleaved runs);
committing every 8 MiB instead of every MiB (fewer hand-overs of the GIL to the writer
thread: everything on 4.02x -> 3.86x, within this VM's noise, and a bigger transaction shows
up as training memory); pausing the line tracer in library code (a no-op `sys.settrace` costs the CNN's forward and
backward nothing measurable and its Adam step +0.23 ms of 0.94). The floor here is Python:
with summaries replaced by nothing, the bundled CNN still costs 2.0x in summary mode
(~8 ms of hook work a step, ~130 hook entries: each a few dozen us on this VM); and the
summaries alone, at numpy's per-pass floor, cost ~0.8 plain steps (90 tensors, a 131k-value
one ~75 us: min, max, sum, dot, zero count and a 4096-value histogram).

Why recorded/plain stays above 1 (Dec 2026): not the writer thread (`--sync-writer` leaves
it at 1.25-1.45), not glibc's allocator (MALLOC_TRIM_THRESHOLD_/MMAP_THRESHOLD_ raised:
no change); a standalone loop with no tvis at all shows it: running `summarize`, or any
busy Python, between the conv/bn/relu ops of one Block makes those ops themselves 10-20%
slower (6.1-6.3 -> 6.7-7.7 ms), the caches and branch predictors they find being colder.

The ratios depend on the step's size: tvis's work per call is mostly fixed, and the bundled
examples' steps are tiny (10-20 ms). `--script-args '--batch-size 128'` runs both examples
with four times the batch (Dec 2026, this VM, one round of 12 steps): cnn everything on 2.11x
(target met), summary 2.21x, summary without grads 1.58x, recorded/plain step 1.22 / 1.33 /
1.04; lm 2.92x / 2.63x / 2.66x, recorded/plain 1.71 / 1.60 / 1.73. A model whose calls each
do more work costs less again.

`--breakdown` adds one instrumented run of each example in summary mode: where tvis's own
time goes (summaries, following memory through backward on CPU, the rest of its hooks).
`--sync-writer` commits the store from the hooks instead of the writer thread (a
diagnostic: what the writer thread's work costs the script's own ops, outside any hook,
where tvis cannot count it as its overhead).
Steps after the first are compared (the first step pays for warm-up in both).
"""

from __future__ import annotations

import argparse
import os
import runpy
import shlex
import shutil
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402
import torch.optim.optimizer as optimizer_module  # noqa: E402
from torch.nn.modules.loss import _Loss  # noqa: E402

from tvis_tui.record import slots  # noqa: E402
from tvis_tui.record.options import CaptureOptions  # noqa: E402
from tvis_tui.record.recorder import Recorder  # noqa: E402
from tvis_tui.record.saved import BackwardMemory  # noqa: E402
from tvis_tui.record.runner import Options, Target, record  # noqa: E402
from tvis_tui.record.sink import MAX_HELD_BYTES, WriterThread  # noqa: E402
from tvis_tui.store import RunReader  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"cnn": ROOT / "examples/image_classifier/train.py",
            "lm": ROOT / "examples/char_lm/train.py"}
CONFIGS = {"everything on": (CaptureOptions(), 3.0),
           "summary, no lines": (CaptureOptions(capture="summary", lines=False), 1.5),
           "summary, no lines, no grads": (CaptureOptions(capture="summary", lines=False,
                                                          grads=False), 1.5)}
TRUTH_TOLERANCE = 0.15


@dataclass
class Timings:
    """Per-step seconds: whole step, forward (top-level non-loss modules), backward."""

    step: list[float] = field(default_factory=list)
    forward: list[float] = field(default_factory=list)
    backward: list[float] = field(default_factory=list)


class PlainClock:
    """Times steps, top-level forward calls and backward() with hooks of its own."""

    def __init__(self) -> None:
        self.t = Timings()
        self._depth = threading.local()
        self._fwd = self._bwd = 0.0
        self._last_step: float | None = None
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> "PlainClock":
        mod = torch.nn.modules.module
        self._undo += [h.remove for h in (
            optimizer_module.register_optimizer_step_post_hook(self._stepped),
            mod.register_module_forward_pre_hook(self._pre),
            mod.register_module_forward_hook(self._post, always_call=True))]
        original = torch.autograd.backward

        def backward(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self._bwd += time.perf_counter() - started
        torch.autograd.backward = backward
        self._undo.append(lambda: setattr(torch.autograd, "backward", original))
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._undo:
            self._undo.pop()()

    def _pre(self, module: Any, args: Any) -> None:
        depth = getattr(self._depth, "n", 0)
        self._depth.n = depth + 1
        if depth == 0 and not isinstance(module, _Loss):
            self._depth.started = time.perf_counter()

    def _post(self, module: Any, args: Any, result: Any) -> None:
        self._depth.n -= 1
        if self._depth.n == 0 and not isinstance(module, _Loss):
            self._fwd += time.perf_counter() - self._depth.started

    def _stepped(self, *_: Any) -> None:
        now = time.perf_counter()
        if self._last_step is not None:
            self.t.step.append(now - self._last_step)
            self.t.forward.append(self._fwd)
            self.t.backward.append(self._bwd)
        self._last_step, self._fwd, self._bwd = now, 0.0, 0.0


def step_intervals(run: Callable[[], None], at_step: Callable[[], None] = lambda: None) -> list[float]:
    stamps: list[float] = []

    def stamp(*_: Any) -> None:
        stamps.append(time.perf_counter())
        at_step()

    handle = optimizer_module.register_optimizer_step_post_hook(stamp)
    try:
        run()
    finally:
        handle.remove()
    return [b - a for a, b in zip(stamps, stamps[1:])]


class WriterBacklog:
    """Tensor values tvis holds for its writer thread at each step: a backlog that grows
    means the writer is slower than training (past sink.MAX_HELD_BYTES hooks wait for it,
    which a short benchmark does not reach)."""

    def __init__(self) -> None:
        self.held: list[int] = []
        self._writers: list[WriterThread] = []
        self._init = WriterThread.__init__

    def __enter__(self) -> "WriterBacklog":
        init, writers = self._init, self._writers

        def remembered(writer: WriterThread, *args: Any) -> None:
            init(writer, *args)
            writers.append(writer)
        WriterThread.__init__ = remembered  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        WriterThread.__init__ = self._init  # type: ignore[method-assign]

    def sample(self) -> None:
        if self._writers:
            self.held.append(self._writers[-1].held_bytes())

    def growth_per_step(self) -> float:
        """Bytes per step, from the second step to the last."""
        return (self.held[-1] - self.held[1]) / (len(self.held) - 2) if len(self.held) > 2 else 0.0


def run_plain(script: Path, argv: tuple[str, ...]) -> Timings:
    saved = sys.argv
    sys.argv = [str(script), *argv]
    try:
        with PlainClock() as clock:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved
    return clock.t


@dataclass
class Recorded:
    intervals: list[float]
    timings: Timings  # what tvis recorded, steps after the first
    bytes_per_step: float
    tvis_seconds: list[float]  # tvis's own time per step (hooks, trace callbacks, GCs)
    calls: list[int]  # calls recorded per step
    backlog_growth: float  # bytes per step the writer fell behind


def run_recorded(script: Path, argv: tuple[str, ...], out: str, capture: CaptureOptions) -> Recorded:
    target = Target(str(script), argv)
    with WriterBacklog() as backlog:
        intervals = step_intervals(
            lambda: record(target, Options(out_dir=out, name="bench", capture=capture)), backlog.sample)
    run = Path(out) / "bench"
    stored = sum(f.stat().st_blocks * 512 for f in run.iterdir())
    with RunReader(run) as reader:
        rec = [s for s in reader.steps() if s.complete]
    t = Timings([s.extra["wall_ns"] / 1e9 for s in rec[1:]],
                [s.phase_ns.get("forward", 0) / 1e9 for s in rec[1:]],
                [s.phase_ns.get("backward", 0) / 1e9 for s in rec[1:]])
    result = Recorded(intervals, t, stored / max(len(rec), 1),
                      [s.extra["tvis_overhead_ns"] / 1e9 for s in rec[1:]],
                      [s.last_seq - s.first_seq + 1 for s in rec[1:]], backlog.growth_per_step())
    # Gone, and the disk settled, before the next run: the kernel writing back this run's
    # pages (~450 MiB with everything on) would run during the next one, which then read
    # slower than everything-on on some runs (Dec 2026).
    shutil.rmtree(run)
    os.sync()
    return result


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3 if values else float("nan")


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def bench_example(name: str, script: Path, steps: int, extra: tuple[str, ...], rounds: int,
                  out: str) -> None:
    argv = ("--max-steps", str(steps), *extra)
    plain = Timings()
    recorded: dict[str, list[Recorded]] = {k: [] for k in CONFIGS}
    for i in range(rounds):
        t = run_plain(script, argv)
        plain.step += t.step[1:]
        plain.forward += t.forward[1:]
        plain.backward += t.backward[1:]
        for label, (capture, _) in CONFIGS.items():
            recorded[label].append(run_recorded(script, argv, os.path.join(out, f"{name}-{label}-{i}"), capture))
    base = median_ms(plain.step)
    lines = [f"{name} ({script.relative_to(ROOT)}{''.join(' ' + a for a in extra)}), "
             f"{rounds} x {steps} steps each way: "
             f"plain step {base:.2f} ms (forward {median_ms(plain.forward):.2f}, "
             f"backward {median_ms(plain.backward):.2f})"]
    for label, (_, target) in CONFIGS.items():
        runs = recorded[label]
        under = median_ms([x for r in runs for x in r.intervals[1:]])
        ratio = under / base
        mib = statistics.median(r.bytes_per_step for r in runs) / 2**20
        own = median_ms([x for r in runs for x in r.tvis_seconds])
        calls = statistics.median(c for r in runs for c in r.calls)
        lines.append(f"  {label:18s} overhead {ratio:5.2f}x (target <= {target}x: {verdict(ratio <= target)})"
                     f"   step {under:.2f} ms   stored {mib:.2f} MiB/step")
        lines.append(f"  {'':18s} tvis's own time {own:.2f} ms/step = {own / base:.2f} plain steps, "
                     f"{own / calls * 1e3:.0f} us per call ({calls:.0f} calls/step)")
        behind = statistics.median(r.backlog_growth for r in runs) / 2**20
        if behind > 0.1:  # the uncommitted buffer (<= 1 MiB) alone moves it less
            lines.append(f"  {'':18s} writer backlog +{behind:.2f} MiB/step: the writer is slower than "
                         f"training; past {MAX_HELD_BYTES >> 20} MiB hooks wait for it (longer runs "
                         f"than this one cost more)")
        truth = []
        for part in ("step", "forward", "backward"):
            mine = median_ms([x for r in runs for x in getattr(r.timings, part)])
            theirs = median_ms(getattr(plain, part))
            q = mine / theirs if theirs else float("nan")
            truth.append(f"{part} {mine:.2f}/{theirs:.2f} ms = {q:.2f} "
                         f"({verdict(abs(q - 1) <= TRUTH_TOLERANCE)})")
        lines.append(f"  {'':18s} recorded/plain (target within {TRUTH_TOLERANCE:.0%}): " + ", ".join(truth))
    sys.__stdout__.write("\n".join(lines) + "\n")
    sys.__stdout__.flush()


def breakdown(script: Path, steps: int, extra: tuple[str, ...], out: str) -> dict[str, float]:
    """Milliseconds per step of tvis's own work, by kind (one instrumented run, summary
    mode without lines: the mode whose target is furthest)."""
    spent = {"tensor summaries": 0, "backward memory (graph walk, node hooks)": 0, "other hook work": 0}
    undo: list[Callable[[], None]] = []

    def timed(owner: Any, name: str, kind: str) -> None:
        original = getattr(owner, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter_ns()
            try:
                return original(*args, **kwargs)
            finally:
                spent[kind] += time.perf_counter_ns() - started
        setattr(owner, name, wrapper)
        undo.append(lambda: setattr(owner, name, original))

    timed(slots, "summarize", "tensor summaries")
    timed(BackwardMemory, "begin", "backward memory (graph walk, node hooks)")
    timed(BackwardMemory, "_after_node", "backward memory (graph walk, node hooks)")
    timed(Recorder, "_guard", "other hook work")
    writer_cpu: list[float] = []
    original_drain = WriterThread._drain  # LMDB puts and commits

    def timed_drain(self):
        started = time.thread_time()
        try:
            original_drain(self)
        finally:
            writer_cpu.append(time.thread_time() - started)

    WriterThread._drain = timed_drain
    undo.append(lambda: setattr(WriterThread, "_drain", original_drain))
    try:
        run_recorded(script, ("--max-steps", str(steps), *extra), out,
                     CaptureOptions(capture="summary", lines=False))
    finally:
        for step in reversed(undo):
            step()
    # Guarded hook bodies contain the other two (node hooks run through the guard too).
    spent["other hook work"] -= spent["tensor summaries"] + spent["backward memory (graph walk, node hooks)"]
    result = {k: v / steps / 1e6 for k, v in spent.items()}
    result["writer thread CPU (LMDB)"] = sum(writer_cpu) / steps * 1e3
    return result


def write_synchronously() -> None:
    """Diagnostic: hooks commit to LMDB themselves (counted as tvis's overhead)."""
    init = WriterThread.__init__

    def committing_in_hooks(self: WriterThread, writer: Any) -> None:
        init(self, writer)
        writer.hand_commits_to(None)
    WriterThread.__init__ = committing_in_hooks  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternate plain and recorded runs this many times (noise)")
    parser.add_argument("--examples", default="cnn,lm", help="comma-separated: cnn, lm")
    parser.add_argument("--breakdown", action="store_true", help="where tvis's time goes")
    parser.add_argument("--script-args", default="", metavar="ARGS",
                        help="more arguments for each example, e.g. '--batch-size 128' (a bigger step)")
    parser.add_argument("--sync-writer", action="store_true",
                        help="diagnostic: write from the hooks, not the writer thread")
    args = parser.parse_args()
    extra = tuple(shlex.split(args.script_args))
    if args.sync_writer:
        write_synchronously()
    sys.__stdout__.write(f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, torch {torch.__version__}"
                         f"{', synchronous writes' if args.sync_writer else ''}\n")
    devnull = open(os.devnull, "w")
    with tempfile.TemporaryDirectory() as out:
        real_stdout, sys.stdout = sys.stdout, devnull
        real_stderr, sys.stderr = sys.stderr, devnull
        try:
            for name in args.examples.split(","):
                bench_example(name, EXAMPLES[name], args.steps, extra, args.rounds, out)
            for name in args.examples.split(",") if args.breakdown else ():
                where = breakdown(EXAMPLES[name], args.steps, extra, os.path.join(out, f"instrumented-{name}"))
                real_stdout.write(f"tvis's own time per {name} step (summary, no lines): " +
                                  ", ".join(f"{k} {v:.2f} ms" for k, v in where.items()) + "\n")
        finally:
            sys.stdout, sys.stderr = real_stdout, real_stderr
    return 0


if __name__ == "__main__":
    sys.exit(main())
