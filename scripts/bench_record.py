"""Recording overhead on the bundled CNN: plain vs under tvis, side by side in one process.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_record.py [--steps 30] [--rounds 3]

Step time is the interval between consecutive `Optimizer.step()` returns, taken by a hook
of this script's own (registered before tvis's, identical in both runs); plain and
recorded runs alternate to spread machine noise. Prints the median step time of each,
their ratio (target <= 3x), bytes stored per step, the recorded step's phases, and where
tvis's own time goes (from one extra, instrumented run).

Where the time goes (2-core VM, Dec 2026): about 2/3 of tvis's main-thread time is tensor
summaries (4 passes over each unique tensor: aminmax, sum, dot, count_nonzero, plus a
binned sample), the rest hook bookkeeping (names, sites, records). Storing values under
the 1 MiB cap is ~8 MiB per step for this CNN; the writer thread spends more CPU than the
main thread copying it into LMDB, which overlaps with training only when a core is free.
"""

from __future__ import annotations

import argparse
import os
import runpy
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch.optim.optimizer as optimizer_module  # noqa: E402

from tvis_tui.record import slots  # noqa: E402
from tvis_tui.record.recorder import Recorder  # noqa: E402
from tvis_tui.record.runner import Options, Target, record  # noqa: E402
from tvis_tui.record.sink import WriterThread  # noqa: E402
from tvis_tui.store import RunReader  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "image_classifier" / "train.py"


def step_times(run) -> list[float]:
    """Run `run()` and return the seconds between consecutive optimizer steps."""
    stamps: list[float] = []
    handle = optimizer_module.register_optimizer_step_post_hook(
        lambda *_: stamps.append(time.perf_counter()))
    try:
        run()
    finally:
        handle.remove()
    return [b - a for a, b in zip(stamps, stamps[1:])]


def plain(steps: int) -> list[float]:
    def run() -> None:
        saved = sys.argv
        sys.argv = [str(EXAMPLE), "--max-steps", str(steps)]
        try:
            runpy.run_path(str(EXAMPLE), run_name="__main__")
        finally:
            sys.argv = saved
    return step_times(run)


def recorded(steps: int, out: str) -> list[float]:
    """Step times under `tvis run` (in this process, through the same entry point)."""
    target = Target(str(EXAMPLE), ("--max-steps", str(steps)))
    return step_times(lambda: record(target, Options(out_dir=out, name="bench")))


def breakdown(steps: int, out: str) -> dict[str, float]:
    """Milliseconds per step of tvis's own work, by kind, from one extra instrumented run."""
    spent = {"tensor summaries": 0, "other hook work": 0}
    original_summarize, original_guard = slots.summarize, Recorder._guard

    def timed_summarize(*args):
        started = time.perf_counter_ns()
        try:
            return original_summarize(*args)
        finally:
            spent["tensor summaries"] += time.perf_counter_ns() - started

    def timed_guard(self, body, *args):
        started = time.perf_counter_ns()
        try:
            return original_guard(self, body, *args)
        finally:
            spent["other hook work"] += time.perf_counter_ns() - started

    writer_cpu: list[float] = []
    original_drain = WriterThread._drain

    def timed_drain(self):
        started = time.thread_time()
        try:
            original_drain(self)
        finally:
            writer_cpu.append(time.thread_time() - started)

    slots.summarize, Recorder._guard, WriterThread._drain = timed_summarize, timed_guard, timed_drain
    try:
        recorded(steps, out)
    finally:
        slots.summarize, Recorder._guard, WriterThread._drain = (
            original_summarize, original_guard, original_drain)
    spent["other hook work"] -= spent["tensor summaries"]
    result = {k: v / steps / 1e6 for k, v in spent.items()}
    result["writer thread CPU (msgpack + LMDB)"] = sum(writer_cpu) / steps * 1e3
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternate plain and recorded runs this many times (noise)")
    args = parser.parse_args()
    devnull = open(os.devnull, "w")
    base: list[float] = []
    under: list[float] = []
    with tempfile.TemporaryDirectory() as out:
        real_stdout, sys.stdout = sys.stdout, devnull
        real_stderr, sys.stderr = sys.stderr, devnull
        try:
            for i in range(args.rounds):
                base += plain(args.steps)
                under += recorded(args.steps, os.path.join(out, str(i)))
            where = breakdown(args.steps, os.path.join(out, "instrumented"))
        finally:
            sys.stdout, sys.stderr = real_stdout, real_stderr
        run = Path(out) / "0" / "bench"
        stored = sum(f.stat().st_blocks * 512 for f in run.iterdir())
        with RunReader(run) as reader:
            rec_steps = reader.steps()
            calls = reader.call_count()
    plain_ms, under_ms = statistics.median(base) * 1e3, statistics.median(under) * 1e3
    print(f"bundled CNN, {args.rounds} x {args.steps} steps each way, "
          f"OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}")
    print(f"median step time  plain {plain_ms:.2f} ms   under tvis {under_ms:.2f} ms")
    print(f"overhead ratio    {under_ms / plain_ms:.2f}x  (target <= 3x)")
    print(f"stored            {stored / len(rec_steps) / 2**20:.2f} MiB per step "
          f"({calls / len(rec_steps):.0f} calls per step)")
    phases: dict[str, list[int]] = {}
    for s in rec_steps[1:]:
        for phase, ns in s.phase_ns.items():
            phases.setdefault(phase, []).append(ns)
    shares = ", ".join(f"{p} {statistics.median(v) / 1e6:.2f} ms" for p, v in phases.items())
    print(f"recorded step, median per phase (tvis's own work is in 'other'): {shares}")
    print("tvis's own time per step: " + ", ".join(f"{k} {v:.2f} ms" for k, v in where.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
