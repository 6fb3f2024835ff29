"""Where one training step ends and the next begins, and what each step measured.

The rule, in order:

1. Optimizer rule. tvis knows every optimizer the script has created (and still holds).
   A step ends when an `Optimizer.step()` returns and every one of them has stepped in
   this step: one optimizer, or a GAN's D and G, or per-layer optimizers, each iteration
   is one step. Closure-based `step()` (LBFGS) is one optimizer step however many times
   it calls the closure.
2. Repeat rule. If an optimizer is about to step a second time in the current step
   (a created optimizer that never steps, or a GradScaler skipping one), the step ends
   just before that call.
3. Backward rule. While the script has created no optimizer at all (hand-written
   `p -= lr * p.grad` updates), a step ends when `backward()` returns.

Calls are numbered in one sequence; a step holds the calls made while it was current.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any

from tvis_tui.record.memory import PeakMemory
from tvis_tui.store.records import PHASES, StepRecord
from tvis_tui.record.sink import WriterThread


class StepTracker:
    def __init__(self, writer: WriterThread, memory: PeakMemory) -> None:
        self._writer = writer
        self._memory = memory
        self._lock = threading.Lock()
        self.optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        self._stepped: set[int] = set()
        self.step = 1
        self.rules: set[str] = set()
        self._reset(time.perf_counter_ns())

    def _reset(self, now: int) -> None:
        self._first: int | None = None
        self._last = 0
        self._losses: list[float] = []
        self._phase_ns = dict.fromkeys(PHASES, 0)
        self._started = now

    # -- what happens inside a step ------------------------------------------------------

    def note_call(self, seq: int) -> None:
        with self._lock:
            if self._first is None:
                self._first = seq
                if self.step == 1:  # the first step starts at its first call, not at import
                    self._started = time.perf_counter_ns()
            self._last = max(self._last, seq)

    def add_phase_time(self, phase: str, ns: int) -> None:
        """Time of a top-level call (nested calls are inside their parent's time)."""
        with self._lock:
            self._phase_ns[phase] = self._phase_ns.get(phase, 0) + ns

    def add_loss(self, value: float) -> None:
        with self._lock:
            self._losses.append(value)

    # -- boundaries ----------------------------------------------------------------------

    def before_optimizer_step(self, optimizer: Any) -> bool:
        """True when the repeat rule ended the step before this optimizer steps."""
        if id(optimizer) in self._stepped:
            self.end("optimizer")
            return True
        return False

    def after_optimizer_step(self, optimizer: Any) -> bool:
        """True when this optimizer step ended the step."""
        self._stepped.add(id(optimizer))
        if all(id(o) in self._stepped for o in list(self.optimizers)):
            self.end("optimizer")
            return True
        return False

    def after_backward(self) -> bool:
        if len(self.optimizers) == 0:
            self.end("backward")
            return True
        return False

    def end(self, rule: str, complete: bool = True) -> None:
        """Write the current step's record and start the next step."""
        with self._lock:
            now = time.perf_counter_ns()
            if self._first is not None:
                phases = {k: v for k, v in self._phase_ns.items() if v}
                wall = now - self._started
                phases["other"] = phases.get("other", 0) + max(wall - sum(phases.values()), 0)
                extra: dict[str, Any] = {"wall_ns": wall, "peak_method": self._memory.method}
                if len(self._losses) > 1:
                    extra["losses"] = self._losses
                self._writer.put_step(StepRecord(
                    step=self.step, first_seq=self._first, last_seq=self._last,
                    loss=self._losses[-1] if self._losses else None, rule=rule,
                    phase_ns=phases, peak_bytes=self._memory.end_step(), complete=complete,
                    extra=extra))
                self.rules.add(rule)
                self.step += 1
            self._stepped.clear()
            self._reset(now)

    def finish(self) -> int:
        """Close a step the script left unfinished (written with complete=False);
        returns the number of complete steps."""
        complete = self.step - 1
        if self._first is not None:
            self.end(self.rule, complete=False)
        return complete

    @property
    def rule(self) -> str:
        if "optimizer" in self.rules or len(self.optimizers):
            return "optimizer"
        return "backward"
