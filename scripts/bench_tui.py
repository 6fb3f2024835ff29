"""How fast `tvis tui` opens a run and moves one call, on a tiny run and a 1,000,000-call run.

    .venv/bin/python scripts/bench_tui.py [--calls 1000000] [--keep DIR]

Builds the runs synthetically through the store's RunWriter, drives the app headless with
Textual's `run_test`, and prints the timings side by side with their ratio. Targets: open
in under 1 s and move one call in under 50 ms, whatever the size of the run: from the key
to the first frame written once the panes hold the new call (`painted`: Textual writes a
frame in `App._display`; the panes take the call in one handler, `on_call_loaded`, so that
frame shows all of them). `drawn` waits for Pilot's pause as well, which costs
`idle_pause_ms` with nothing to draw, and for later frames (a scroll bar's thumb).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from textual import events
from textual.app import App

from tvis_tui.screens.debugger import DebuggerScreen

from tvis_tui.store import CallRecord, RunWriter, Site, Slot, StepRecord, TensorStats

SOURCE = "\n".join(f"    x = self.layer{i}(x)  # line {i + 1}" for i in range(10_000)) + "\n"
FILE = "/bench/model.py"
BLOCKS_PER_STEP = 40
LAYERS_PER_BLOCK = 24


def build(path: Path, calls: int) -> None:
    """Steps of: a data call, a model call holding blocks of layers, loss, backward, optimizer."""
    per_step = 5 + BLOCKS_PER_STEP * (1 + LAYERS_PER_BLOCK)
    stats = TensorStats(numel=4096, min=-3.0, max=3.0, mean=0.0, std=1.0)
    out = Slot("output", 0, "out", shape=(64, 64), dtype="float32", device="cpu", stats=stats,
               hist=tuple(range(16)), hist_lo=-3.0, hist_hi=3.0)
    with RunWriter(path, max_pending_bytes=64 << 20, max_pending_seconds=60) as w:
        w.put_meta(script="bench.py", started_at="2026-01-01T00:00:00", status="running")
        w.put_source(FILE, SOURCE)
        seq, step = 0, 0
        while seq < calls:
            step += 1
            first = seq + 1
            for phase, name in (("data", "loader"), ("forward", "model")):
                seq += 1
                w.put_call(_call(seq, 0, 0, step, phase, name))
            model = seq
            for b in range(BLOCKS_PER_STEP):
                seq += 1
                block = seq
                w.put_call(_call(block, model, 1, step, "forward", f"blocks.{b}"))
                for layer in range(LAYERS_PER_BLOCK):
                    seq += 1
                    w.put_call(_call(seq, block, 2, step, "forward", f"blocks.{b}.layer{layer}"))
                    w.put_slot(seq, out)
            for phase, name in (("loss", "criterion"), ("backward", "backward"), ("optimizer", "optimizer.step")):
                seq += 1
                w.put_call(_call(seq, 0, 0, step, phase, name))
            w.put_step(StepRecord(step=step, first_seq=first, last_seq=seq, loss=1.0 / step))
            assert seq - first + 1 == per_step
        w.close(status="ok", steps_recorded=step)


def _call(seq: int, parent: int, depth: int, step: int, phase: str, name: str) -> CallRecord:
    return CallRecord(seq=seq, parent=parent, depth=depth, step=step, phase=phase, kind="module", name=name,
                      type="Linear", call_site=Site(FILE, seq % 10_000 + 1), start_ns=seq, duration_ns=1000)


class Frames:
    """When Textual wrote each frame (App._display with something to show), and when the
    debugger's panes last took a call (DebuggerScreen.on_call_loaded returned)."""

    def __init__(self) -> None:
        self.written: list[float] = []
        self.loaded_at = 0.0
        self._display = App._display
        self._on_call_loaded = DebuggerScreen.on_call_loaded

    def __enter__(self) -> "Frames":
        def display(app: App, screen, renderable) -> None:
            self._display(app, screen, renderable)
            if renderable is not None:
                self.written.append(time.perf_counter())

        def on_call_loaded(screen: DebuggerScreen, message) -> None:
            self._on_call_loaded(screen, message)
            self.loaded_at = time.perf_counter()
        App._display = display  # type: ignore[method-assign]
        DebuggerScreen.on_call_loaded = on_call_loaded  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        App._display = self._display  # type: ignore[method-assign]
        DebuggerScreen.on_call_loaded = self._on_call_loaded  # type: ignore[method-assign]

    def painted(self) -> float:
        """When the first frame after the panes took the call was written."""
        return next((t for t in self.written if t >= self.loaded_at), float("nan"))


async def measure(path: Path, moves: int) -> dict[str, float]:
    with Frames() as frames:
        return await _measure(path, moves, frames)


async def _measure(path: Path, moves: int, frames: Frames) -> dict[str, float]:
    from tvis_tui.app import make_app

    started = time.perf_counter()
    app = make_app(path)
    async with app.run_test(size=(160, 48)) as pilot:
        await _until_loaded(pilot, 1)
        opened = time.perf_counter() - started
        results = {"open_s": opened}
        idle = []
        for _ in range(moves):
            t0 = time.perf_counter()
            await pilot.pause()
            idle.append(time.perf_counter() - t0)
        results["idle_pause_ms"] = statistics.median(idle) * 1000
        middle = pilot.app.screen.stepper.total // 2
        for key, label in (("s", "into"), ("S", "back"), ("n", "over"), ("N", "back over")):
            pilot.app.screen.seq = middle
            await _until_loaded(pilot, middle)
            loaded, painted, drawn = [], [], []
            for _ in range(moves):
                before = pilot.app.screen.seq
                frames.written.clear()
                t0 = time.perf_counter()
                # The key event as a terminal would deliver it (Pilot.press adds its own waits).
                pilot.app.post_message(events.Key(key, key))
                await _until_loaded(pilot, None, before)
                loaded.append(frames.loaded_at - t0)
                await pilot.pause()
                drawn.append(time.perf_counter() - t0)
                painted.append(frames.painted() - t0)
            results[f"{label}_loaded_ms"] = statistics.median(loaded) * 1000
            results[f"{label}_painted_ms"] = statistics.median(painted) * 1000
            results[f"{label}_drawn_ms"] = statistics.median(drawn) * 1000
        t0 = time.perf_counter()
        last = pilot.app.screen.stepper.total
        pilot.app.screen.jump(last, "last call")
        await _until_loaded(pilot, last)
        results["goto_last_ms"] = (time.perf_counter() - t0) * 1000
    return results


async def _until_loaded(pilot, seq: int | None, not_seq: int | None = None) -> None:
    """Wait until the debugger has drawn call `seq` (or any call other than `not_seq`)."""
    for _ in range(10_000):
        screen = pilot.app.screen
        loaded = getattr(screen, "loaded_seq", 0)
        if loaded and (loaded == seq or (seq is None and loaded != not_seq)):
            return
        await asyncio.sleep(0.001)
    raise TimeoutError("the debugger never drew the call")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1_000_000)
    parser.add_argument("--moves", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="build (or reuse) the runs in this folder")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="tvis-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    sizes = {"tiny": 1_005, "large": args.calls}
    for label, calls in sizes.items():
        path = root / f"{label}-{calls}"
        if not path.exists():
            t0 = time.perf_counter()
            build(path, calls)
            print(f"built {label} run ({calls:,} calls) in {time.perf_counter() - t0:.1f} s")
    tiny = asyncio.run(measure(root / f"tiny-{sizes['tiny']}", args.moves))
    large = asyncio.run(measure(root / f"large-{sizes['large']}", args.moves))
    print(f"{'':22}{'tiny':>10}{'large':>10}{'ratio':>8}   target")
    for key in tiny:
        target = "< 1 s" if key == "open_s" else "< 50 ms" if key.endswith("painted_ms") else ""
        print(f"{key:22}{tiny[key]:10.3f}{large[key]:10.3f}{large[key] / tiny[key]:8.2f}   {target}")
    print("loaded: key event until the panes hold the new call; painted: until the next frame "
          "was written; drawn: until Pilot's pause returned (idle_pause_ms with nothing to draw)")


if __name__ == "__main__":
    main()
