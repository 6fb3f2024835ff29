"""Where one training step ends and the next begins, and what each step measured.

The rule, in order:

1. Optimizer rule. tvis knows every optimizer the script has created (and still holds).
   A step is complete when an `Optimizer.step()` returns and every one of them has
   stepped in this step: one optimizer, or a GAN's D and G, or per-layer optimizers, each
   iteration is one step. An optimizer is not waited for once a newer one, made after its
   last step, steps where it stepped (each fold or trial of a sweep makes its own; the
   script may keep the old ones), nor when it never stepped and those that stepped
   updated all its parameters (SAM's wrapper, which steps its base optimizer; one made
   and never used). Closure-based `step()` (LBFGS) is one optimizer step however
   many times it calls the closure. A `GradScaler.step()` that skips `optimizer.step()`
   (inf/NaN gradients) counts as that optimizer's step, marked skipped. A complete step
   ends when its iteration does: when the loop around the step comes back to its head
   (loop_head.py), so that the scheduler step, logging and evaluation after `step()`
   belong to the step they report on; at once where no loop of user code is found. Another
   backward() or optimizer step, or another batch from the DataLoader iterator that fed
   the step before it was complete, ends it too.
2. Iteration rule. Optimizers that step at different rates (a WGAN critic every iteration
   or k times in an inner loop, its generator every n-th) leave a step incomplete: the
   step ends when the loop around the step that left some optimizer waiting comes back to
   its head, as a complete one does; each such pass of the loop is a step of its own. Not
   where that loop goes over the optimizers themselves (`for opt in optimizers:`, an
   ensemble's `for model, opt in members:`, `for agent in agents: agent.update()`,
   `opts[i].step()` in `for i in range(len(opts)):`): the others step in its next passes,
   and the iteration is the loop around it; its head ends the step, complete or not
   (an optimizer made for later, a probe's, does not step in it). Nor where an exception
   leaves the loop: that step is unfinished.
3. Repeat rule. If an optimizer is about to step a second time in the current step (no
   loop of user code watched, or a created optimizer that never steps), the step ends just
   before that call.
4. Backward rule. While the script has created no optimizer at all (hand-written
   `p -= lr * p.grad` updates), a step is complete when `backward()` returns, and ends as
   above.

Calls are numbered in one sequence; a step holds the calls made while it was current.

Times leave tvis out: a step's `wall_ns` is the monotonic time from its first call (or the
previous step's end) to its end, less tvis's own time on the training thread in between
(its hooks, captures and trace callbacks), which is `extra["tvis_overhead_ns"]`.
`phase_ns` sums the durations of the step's top-level calls per phase (each already less
tvis's time inside it; the calls inside an optimizer step, a closure's forward and backward,
count in their own phases, the step only for the rest); "other" is the rest of `wall_ns`
(the script's own code between calls). `extra["tvis_overhead_phase_ns"]` is tvis's time
inside each phase's calls (the rest of tvis_overhead_ns was spent opening and closing
calls and between them).
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable

import torch

from tvis_tui.record.memory import PeakMemory
from tvis_tui.store.records import PHASES, StepRecord
from tvis_tui.store.writer import RunWriter
from tvis_tui.record.sink import WriterThread
from tvis_tui.record.timing import put_timed_step


class StepTracker:
    def __init__(self, writer: WriterThread, memory: PeakMemory) -> None:
        self._writer = writer
        self._memory = memory
        self._lock = threading.Lock()
        self.optimizers: weakref.WeakSet[Any] = weakref.WeakSet()
        self.steps_taken = 0  # optimizer steps so far, all optimizers, skipped ones too
        # When each optimizer was made, and its last step (steps taken then, and its site).
        self._born: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
        self._last_step: weakref.WeakKeyDictionary[Any, tuple[int, Any]] = weakref.WeakKeyDictionary()
        self._stepped: set[int] = set()
        self.step = 1
        self._recording_started = self._committed_at = 0  # step 1's first call sets both (_commit_due)
        self.rules: set[str] = set()
        # tvis's time on this thread so far (CallLog.overhead_so_far sets it).
        self.overhead_clock: Callable[[], int] = lambda: 0
        # Watches for the next iteration and calls its first argument then (the recorder
        # sets it); returns something with cancel(), or None when it cannot watch. The
        # second argument is the optimizer that stepped last (None after a backward), the
        # third whether the step is incomplete (others still waiting).
        self.next_iteration: Callable[[Callable[[], None], Any, bool], Any] | None = None
        self._iteration_watcher: Any = None  # of an incomplete step (the iteration rule)
        self.pending: tuple[str, Any] | None = None  # a complete step's rule and watcher (or None)
        self.tentative = False  # the pending step may yet see an optimizer step (_complete)
        self._optimizers_seen = 0
        self._reset(time.perf_counter_ns())

    def _reset(self, now: int) -> None:
        self._first: int | None = None
        self._last = 0
        self._losses: list[float] = []
        self._closure_losses = 0
        # Per optimizer (id), how many losses the step had when its gradients were last
        # zeroed; and the losses whose gradients an optimizer step then applied.
        self._zeroed_at: dict[int, int] = {}
        self._zeroed: set[int] = set()  # parameters zeroed since the last loss
        self._applied: set[int] = set()
        # Per optimizer step: who stepped ({"optimizer", "model", "seq"}) and the losses it applied.
        self._applied_by: list[tuple[dict[str, Any], range]] = []
        self._extra: dict[str, Any] = {}  # what other parts of the recorder add (note_extra)
        self._sources: set[int] = set()  # ids of the DataLoader iterators that fed this step
        self._phase_ns = dict.fromkeys(PHASES, 0)
        self._phase_overhead: dict[str, int] = {}
        self._gpu_events: list[tuple[str, Any, Any]] = []
        self._started = now
        self._overhead_at_start = self.overhead_clock()

    # -- what happens inside a step ------------------------------------------------------

    def note_call(self, seq: int, phase: str) -> None:
        """A call opened in this step; `phase` is its phase, where the parameters and
        optimizer state first seen now are counted (a no_grad-only step has no forward)."""
        with self._lock:
            if self._first is None:
                self._first = seq
                if self.step == 1:  # the first step starts at its first call, not at import
                    self._started = self._recording_started = self._committed_at = time.perf_counter_ns()
                    self._overhead_at_start = self.overhead_clock()
            self._last = max(self._last, seq)
        if len(self.optimizers) != self._optimizers_seen:  # count parameters from the start
            self._optimizers_seen = len(self.optimizers)
            self._memory.see_optimizers(self.optimizers, phase)

    def add_phase_time(self, phase: str, ns: int, overhead_ns: int = 0,
                       gpu_events: tuple[Any, Any] | None = None) -> None:
        """Time of a top-level call (nested calls are inside their parent's time), tvis's
        time inside it, and its CUDA events if it was timed on the GPU (timing.py)."""
        with self._lock:
            self._phase_ns[phase] = self._phase_ns.get(phase, 0) + ns
            if overhead_ns:
                self._phase_overhead[phase] = self._phase_overhead.get(phase, 0) + overhead_ns
            if gpu_events is not None:
                self._gpu_events.append((phase, *gpu_events))

    def add_loss(self, value: float, *, in_closure: bool = False) -> None:
        """A loss backward() was called on; `in_closure`: inside an optimizer step's
        closure (LBFGS evaluates it several times a step)."""
        with self._lock:
            self._losses.append(value)
            self._zeroed = set()
            if in_closure:
                self._closure_losses += 1

    def zeroed(self, owner: Any) -> None:
        """The gradients of `owner`'s parameters (an optimizer's or a module's) were zeroed
        (`zero_grad()`): the losses so far
        reach no optimizer all of whose parameters these are (a pass skipped after a
        non-finite loss, SAM's first pass) unless it stepped before. Parts zeroed one after
        the other since the last backward add up; zeroing only a part (a head's) leaves
        the earlier losses' gradients on the rest to be applied."""
        with self._lock:
            self._zeroed |= parameter_ids(owner)  # in parts too: `enc.zero_grad(); head.zero_grad()`
            for optimizer in list(self.optimizers):
                if parameter_ids(optimizer) <= self._zeroed:
                    self._zeroed_at[id(optimizer)] = len(self._losses)

    def note_batch(self, source: int) -> None:
        """A batch was drawn from the DataLoader iterator `source` in this step. Once the
        step is complete, batches feed an evaluation, not the step: the second of them
        must not end it as the next training batch would."""
        if self.pending is None:
            self._sources.add(source)

    def fed_by(self, source: int) -> bool:
        return source in self._sources

    def extra_now(self, key: str) -> Any:
        """`extra[key]` of the current step as noted so far (None if not)."""
        with self._lock:
            return self._extra.get(key)

    def note_extra(self, key: str, value: Any) -> None:
        """Set `extra[key]` of the current step's record (the last value set wins)."""
        with self._lock:
            self._extra[key] = value

    def list_extra(self, key: str, item: Any, limit: int) -> None:
        """Add `item` to the list `extra[key]` of the current step's record, once, while the
        list holds fewer than `limit` (the step view reads such lists; it scans no calls)."""
        with self._lock:
            listed = self._extra.get(key) or []
            if item not in listed and len(listed) < limit:
                self._extra[key] = [*listed, item]

    # -- boundaries ----------------------------------------------------------------------

    def before_optimizer_step(self, optimizer: Any) -> bool:
        """True when the repeat rule ended the step before this optimizer steps."""
        if id(optimizer) in self._stepped:
            self.end("optimizer")
            return True
        return False

    def add_optimizer(self, optimizer: Any) -> None:
        """An optimizer the script made (or that stepped before tvis saw it made)."""
        if optimizer not in self._born:
            self._born[optimizer] = self.steps_taken
        self.optimizers.add(optimizer)

    def after_optimizer_step(self, optimizer: Any, site: Any = None,
                             who: dict[str, Any] | None = None) -> bool:
        """True when this optimizer step ended the step. `site`: where the script called
        `step()` (None: not known); `who`: the step's call and the model it updated
        (`{"seq", "model"}`), for the step's loss per optimizer."""
        self._memory.see_optimizer(optimizer)  # its state exists from its first step on
        self._stepped.add(id(optimizer))
        with self._lock:
            applied = range(self._zeroed_at.get(id(optimizer), 0), len(self._losses))
            self._applied.update(applied)
            self._applied_by.append(({"optimizer": type(optimizer).__name__, **(who or {})}, applied))
        self.steps_taken += 1
        self._last_step[optimizer] = (self.steps_taken, site)
        live = list(self.optimizers)
        waiting = [o for o in live if id(o) not in self._stepped and not self._replaced(o)]
        if not waiting or self._covered(live, waiting):
            # Tentatively where some never stepped: one may still step in this iteration.
            self._complete("optimizer", tentative=bool(waiting), optimizer=optimizer)
            return True
        if self.next_iteration is not None:
            self._cancel_watcher()
            self._iteration_watcher = self.next_iteration(self._end_iteration, optimizer, True)
        return False

    def _end_iteration(self) -> None:
        self.end("optimizer")

    def _covered(self, live: list[Any], waiting: list[Any]) -> bool:
        """Whether the optimizers that stepped updated every parameter those `waiting`
        hold, and those never stepped: a wrapper over the same parameters that never steps
        itself (SAM's, stepping its base optimizer), or an optimizer made over them and
        never used, is no part of the step; two that step over shared parameters both are
        (the second's first step comes before the loop's head: the step is complete only
        tentatively until then)."""
        if any(o in self._last_step for o in waiting):  # it has stepped before
            return False
        updated = set().union(*(parameter_ids(o) for o in live if id(o) in self._stepped))
        return all(parameter_ids(o) <= updated for o in waiting)

    def _replaced(self, optimizer: Any) -> bool:
        """Whether a newer optimizer, made after `optimizer`'s last step, steps where it
        stepped: a new fold's or trial's, the old one kept by the script (a list of
        results) or by its scheduler (the two hold each other until a collection)."""
        last = self._last_step.get(optimizer)
        if last is None or last[1] is None:  # never stepped, or where is not known
            return False
        return any(other is not optimizer and self._born.get(other, -1) >= last[0]
                   and self._last_step.get(other, (0, None))[1] == last[1]
                   for other in list(self.optimizers))

    def after_backward(self) -> bool:
        if len(self.optimizers) == 0:
            self._complete("backward")
            return True
        return False

    def _complete(self, rule: str, tentative: bool = False, optimizer: Any = None) -> None:
        """The step is complete: it ends when its iteration does, or now. It is pending
        from here on, so that a Ctrl-C landing inside `end()` leaves it for `finish()` to
        end again, complete, rather than as an unfinished step. A `tentative` one is not
        ended by a new backward() (an optimizer not yet seen stepping may be on its way)."""
        self._cancel_watcher()  # an optimizer first seen after the step was complete
        self.pending = (rule, None)
        watcher = (self.next_iteration(self.end_pending, optimizer, False)
                   if self.next_iteration is not None else None)
        if watcher is None:
            self.end_pending()
        else:
            self.pending, self.tentative = (rule, watcher), tentative

    @property
    def has_calls(self) -> bool:
        """Whether the current step has seen a call."""
        return self._first is not None

    def end_pending(self) -> None:
        """End the complete step whose iteration was still going on, if any."""
        if self.pending is not None:
            self.end(self.pending[0])

    def _cancel_watcher(self) -> None:
        if self._iteration_watcher is not None:
            self._iteration_watcher.cancel()
            self._iteration_watcher = None
        if self.pending is not None and self.pending[1] is not None:
            self.pending[1].cancel()

    def end(self, rule: str, complete: bool = True) -> None:
        """Write the current step's record and start the next step."""
        with self._lock:
            self._cancel_watcher()
            now = time.perf_counter_ns()
            if self._first is not None:
                self._put_step(now, rule, complete)
                self.rules.add(rule)
                # One statement, no call in it: a Ctrl-C cannot land between these (finish()
                # would end the step twice, or once more as unfinished).
                self.pending, self.step, self._first = None, self.step + 1, None
            self.pending, self.tentative = None, False
            self._stepped.clear()
            self._reset(now)

    def _put_step(self, now: int, rule: str, complete: bool) -> None:
        overhead = max(self.overhead_clock() - self._overhead_at_start, 0)
        wall = max(now - self._started - overhead, 0)
        phases = {k: v for k, v in self._phase_ns.items() if v}
        phases["other"] = phases.get("other", 0) + max(wall - sum(phases.values()), 0)
        peak, memory_extra = self._memory.end_step()
        extra: dict[str, Any] = {"wall_ns": wall, "tvis_overhead_ns": overhead, **memory_extra,
                                 **self._extra}
        if self._phase_overhead:
            extra["tvis_overhead_phase_ns"] = self._phase_overhead
        if len(self._losses) > 1:
            extra["losses"] = self._losses
        # A closure's evaluations (LBFGS's line search) each zero the gradients: the step's
        # loss is its first, by its own rule.
        unapplied = ([i for i in range(len(self._losses)) if i not in self._applied]
                     if self._applied and not self._closure_losses else [])
        if unapplied:
            extra["losses_not_applied"] = unapplied
        loss = _step_loss(self._losses, self._closure_losses, unapplied)
        apart = [] if self._closure_losses else losses_apart(self._losses, self._applied_by, len(self.optimizers))
        if apart:  # a GAN's: D's loss and G's, never their sum
            extra["optimizer_losses"] = apart
            loss = apart[0]["loss"]
        record = StepRecord(
            step=self.step, first_seq=self._first or 0, last_seq=self._last,
            loss=loss, rule=rule,
            phase_ns=phases, peak_bytes=peak, complete=complete, extra=extra)
        if self._gpu_events:
            self._writer.defer(put_timed_step, record, self._gpu_events)
        else:
            self._writer.put_step(record)
        if not self._commit_due(now):
            return
        if self._gpu_events:
            self._writer.defer(RunWriter.flush)  # after the timed step, written on the writer thread
        else:
            self._writer.flush()

    def _commit_due(self, now: int) -> bool:
        """Whether to commit as this step ends: where what is not committed spans as long as
        what is, since recording began. Records are otherwise committed every 0.5 s (or
        MiB), and a crash in a run's first half second (an OOM at step 3) lost every step;
        steps of equal length commit at steps 1, 2, 4, 8...: a killed run keeps at least
        half the steps that ended, for a few commits (each wakes the writer thread)."""
        if 2 * (now - self._committed_at) < now - self._recording_started:
            return False
        self._committed_at = now
        return True

    def run_meta(self) -> dict[str, Any]:
        """What goes into the run's meta at its end: tvis's total time on the training
        thread, and how peak memory was measured."""
        return {"tvis_overhead_ns": self.overhead_clock(), **self._memory.run_meta()}

    def finish(self) -> int:
        """Close a step the script left unfinished (written with complete=False);
        returns the number of complete steps."""
        self.end_pending()
        complete = self.step - 1
        if self._first is not None:
            self.end(self.rule, complete=False)
        return complete

    @property
    def rule(self) -> str:
        if "optimizer" in self.rules or len(self.optimizers):
            return "optimizer"
        return "backward"


def parameter_ids(owner: Any) -> set[int]:
    """The ids of the parameters an optimizer steps, or a module holds."""
    if isinstance(owner, torch.nn.Module):
        return {id(p) for p in owner.parameters()}
    return {id(p) for group in getattr(owner, "param_groups", ()) for p in group.get("params", ())}


def _step_loss(losses: list[float], in_closure: int, unapplied: list[int]) -> float | None:
    """The loss whose gradients the step applied: the sum of what backward() was called on
    (micro-batches of gradient accumulation, several objectives), less those whose
    gradients were zeroed before any optimizer step applied them, or that came after
    (`unapplied`: a pass skipped after a non-finite loss, SAM's first pass). When backward()
    ran in the optimizer's closure, the closure's first evaluation, which is what `step()`
    returns (LBFGS's later evaluations belong to its line search). Each is kept in
    extra["losses"] when there are more than one, the unapplied ones' indices in
    extra["losses_not_applied"]."""
    if not losses:
        return None
    if in_closure:
        return losses[len(losses) - in_closure]
    return sum(v for i, v in enumerate(losses) if i not in unapplied)


def losses_apart(losses: list[float], applied_by: list[tuple[dict[str, Any], range]],
                 optimizers: int) -> list[dict[str, Any]]:
    """Where optimizers each applied losses of their own (a GAN's discriminator its real
    and fake losses, its generator one more), each optimizer step with the sum of its
    losses, in the order they stepped; [] where any two applied the same loss (one loss
    over two models' optimizers: it is the step's). A step where one of the run's
    `optimizers` stepped alone (a WGAN critic's step without its generator's) names it
    too, so that the plot of each one's loss goes through it."""
    ranges = [(who, r) for who, r in applied_by if len(r)]
    if not ranges or (len(ranges) == 1 and optimizers < 2):
        return []
    seen: set[int] = set()
    for _, r in ranges:
        if seen.intersection(r):
            return []
        seen.update(r)
    return [{**who, "loss": sum(losses[i] for i in r)} for who, r in ranges]

