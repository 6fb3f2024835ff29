"""Accuracy and speed of `tvis vram` on the bundled training scripts.

For each script in tests/vram/scripts/ it prints, side by side:
  recorder  the peak `tvis run --steps 2` records for step 2 (StepRecord.peak_bytes)
  live      the peak of live tensor storage in step 2, counted op by op on real tensors
            (the tracker `--trace` uses, without fake tensors)
  static    the static estimate, no flags, for a CPU run (see below)
  trace     `--trace`: the script on fake tensors
and each estimate's relative error against both measurements.

Like with like: the measurements are CPU runs, so the estimates are made for a CPU run
(device="cpu": no CUDA context or allocator overhead, CPU kernels' saved tensors, CPU
autocast rules, one-tensor-at-a-time optimizer temporaries). Step 2 is compared because
from step 2 on the optimizer state is resident during forward, as for the rest of training;
step 1 is printed too. The recorder counts the live tensor storages its hooks see
(parameters, grads, optimizer state, module inputs/outputs, what autograd saved), so it
misses temporaries that live and die inside one module call (attention scores inside a
hand-written attention block); `live` counts every op's tensors, exactly what an estimate
models.

    .venv/bin/python scripts/score_vram.py [SCRIPT ...]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tvis_tui.vram.estimate import estimate  # noqa: E402
from tvis_tui.vram.facts import Settings  # noqa: E402

MIB = 1024 ** 2


def recorded_peaks(script: Path) -> list[int | None]:
    from tvis_tui.store import RunReader

    with tempfile.TemporaryDirectory() as out:
        tvis = Path(sys.executable).parent / "tvis"
        proc = subprocess.run([str(tvis), "run", "--steps", "2", "--out", out, str(script)],
                              capture_output=True, text=True, timeout=600)
        runs = sorted(Path(out).glob("*"))
        if proc.returncode != 0 or not runs:
            print(f"  tvis run failed on {script.name}: {proc.stderr.strip()[-200:]}")
            return []
        with RunReader(runs[0]) as reader:
            return [s.peak_bytes for s in reader.steps()]


def error(estimate_bytes: int | None, measured: int | None) -> float | None:
    if not estimate_bytes or not measured:
        return None
    return estimate_bytes / measured - 1


def fmt(value: float | None) -> str:
    return "    -" if value is None else f"{value:+6.1%}"


def main(argv: list[str]) -> int:
    from tvis_tui.vram.trace import trace

    scripts = [Path(a) for a in argv] or sorted((ROOT / "tests/vram/scripts").glob("*.py"))
    print(f"{'script':16s} {'recorder':>9s} {'live':>9s} {'static':>9s} {'trace':>9s}  "
          f"{'static vs rec':>13s} {'static vs live':>14s} {'trace vs rec':>12s} "
          f"{'trace vs live':>13s} {'static s':>8s}   (MiB; step-1 recorder/live)")
    errors: dict[str, list[float]] = {"static/rec": [], "static/live": [], "trace/rec": [],
                                      "trace/live": []}
    slowest = 0.0
    for script in scripts:
        start = time.perf_counter()
        static = estimate(script, Settings(device="cpu")).tensor_bytes
        took = time.perf_counter() - start
        slowest = max(slowest, took)
        traced = trace(script).peak_bytes or None
        live = trace(script, fake=False).step_peaks
        rec = recorded_peaks(script)
        rec2 = rec[1] if len(rec) > 1 else None
        live2 = live[1] if len(live) > 1 else None
        row = {"static/rec": error(static, rec2), "static/live": error(static, live2),
               "trace/rec": error(traced, rec2), "trace/live": error(traced, live2)}
        for key, value in row.items():
            if value is not None:
                errors[key].append(abs(value))
        step1 = f"{(rec[0] or 0) / MIB:.0f}/{live[0] / MIB:.0f}" if rec and live else "-"
        print(f"{script.name:16s} {(rec2 or 0) / MIB:9.1f} {(live2 or 0) / MIB:9.1f} "
              f"{static / MIB:9.1f} {(traced or 0) / MIB:9.1f}  {fmt(row['static/rec']):>13s} "
              f"{fmt(row['static/live']):>14s} {fmt(row['trace/rec']):>12s} "
              f"{fmt(row['trace/live']):>13s} {took:8.3f}   ({step1})")
    print()
    for key, values in errors.items():
        if values:
            print(f"{key:12s} median |error| {statistics.median(values):6.1%}   "
                  f"max {max(values):6.1%}   over {len(values)} scripts")
    print(f"slowest static estimate: {slowest:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
