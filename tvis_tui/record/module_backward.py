"""Backward time per module call, on the CPU: the autograd nodes a call's forward made,
timed as backward runs them.

Autograd numbers the nodes it creates, in creation order on each thread; the next number is
readable at any time (`torch._C._autograd._get_sequence_nr`). The nodes a module call's
forward made are those numbered from the counter at its start up to the counter at its end:
a range, and the ranges of the calls nested in it lie inside it. On the CPU the engine runs
the nodes of a backward one after another on the calling thread, and tvis already hooks
each of them to follow memory (saved.py): a node's time is the time since the previous
node ended, less tvis's own time in between (its hooks are counted). Each call gets the
time of the nodes in its range, its children's included, as its forward duration does.

Left out, and so in no call's figure: nodes made outside every module call (the script's
own ops between calls, the loss arithmetic) and AccumulateGrad (a parameter's `.grad`
being written, with the script's post-accumulate hooks). Not measured on CUDA (nodes run on
device threads, asynchronously). Under a non-reentrant checkpoint the recomputation runs
in the first node of the region backward reaches: the checkpointed call's time includes
it. A reentrant checkpoint recomputes its calls inside backward, in a backward of its own:
those calls carry their backward time, the calls around the checkpoint do not include it.
"""

from __future__ import annotations

import bisect
from typing import Callable

import torch

from tvis_tui.store.records import CallRecord

next_node_number: Callable[[], int] | None = getattr(torch._C._autograd, "_get_sequence_nr", None)
"""The number autograd gives the next node made on this thread (None in a torch without it)."""

MAX_CALLS = 100_000
"""Module calls kept waiting for a backward; past it the oldest half are dropped (a script
that runs forwards with autograd on and never backward would otherwise grow it forever)."""


class ModuleBackwardTimes:
    """Ranges of node numbers per module call, and the time backward spends in each."""

    def __init__(self, overhead_done: Callable[[], int], overhead_so_far: Callable[[], int],
                 write: Callable[[CallRecord], None], step: Callable[[], int]) -> None:
        self._overhead_done = overhead_done  # tvis's time so far on this thread, hooks that ended
        self._overhead_so_far = overhead_so_far  # the same, the hook running now included
        self._write = write
        self._step = step
        self._calls: list[tuple[int, int, CallRecord]] = []  # (low, high, record): nodes low < n <= high
        self._totals: dict[int, int] = {}  # seq -> backward ns so far in its step
        # During a backward: node number boundaries and the calls each segment is in.
        self._starts: list[int] = []
        self._chains: list[tuple[int, ...]] = []
        self._touched: set[int] = set()
        self._last = (0, 0)  # (when the previous node ended, tvis's time by then)

    @staticmethod
    def low() -> int:
        """At a call's start: its own nodes are numbered above this."""
        return next_node_number() - 1  # type: ignore[misc]

    def closed(self, record: CallRecord, low: int) -> None:
        """At a call's end: its nodes are those numbered above `low` and made so far."""
        high = next_node_number() - 1  # type: ignore[misc]
        if high > low:
            if len(self._calls) >= MAX_CALLS:  # a forward with no backward, say: forget the oldest
                del self._calls[: MAX_CALLS // 2]
            self._calls.append((low, high, record))

    def begin(self, now_ns: int, nested: bool = False) -> None:
        """backward() starts: index the ranges of this step's calls by node number;
        `nested`: inside another (a reentrant checkpoint's), adding the calls it recomputed."""
        if not nested:
            step = self._step()
            self._calls = [c for c in self._calls if c[2].step >= step]
            kept = {record.seq for _, _, record in self._calls}
            self._totals = {seq: ns for seq, ns in self._totals.items() if seq in kept}
            self._touched = set()
            # The hook that calls this is still running: the part of it before `now_ns`
            # is counted now, so that its end does not take it off the first node's time.
            self._last = (now_ns, self._overhead_so_far())
        self._starts, self._chains = _segments(self._calls)

    def node_ran(self, number: int | None, ended_ns: int) -> None:
        """A node of this backward ended at `ended_ns` (read before tvis's hook began);
        `number` None: a node no call made (AccumulateGrad), whose time is no call's."""
        overhead = self._overhead_done()
        last_end, last_overhead = self._last
        self._last = (ended_ns, overhead)
        at = bisect.bisect_right(self._starts, number) - 1 if number is not None else -1
        if at < 0:
            return
        took = max(ended_ns - last_end - (overhead - last_overhead), 0)
        for seq in self._chains[at]:
            self._totals[seq] = self._totals.get(seq, 0) + took
            self._touched.add(seq)

    def end(self) -> None:
        """The outermost backward() returned: write each call it ran nodes of with its
        time so far."""
        for _, _, r in self._calls:
            if r.seq in self._touched:
                self._write(r.closed(r.duration_ns, r.nonfinite_output, r.error,  # type: ignore[arg-type]
                                     {**r.extra, "backward_ns": self._totals[r.seq]}))
        self._touched = set()
        self._starts, self._chains = [], []


def _segments(calls: list[tuple[int, int, CallRecord]]) -> tuple[list[int], list[tuple[int, ...]]]:
    """Node numbers where the set of enclosing calls changes, and that set (call seqs) from
    each on: one sweep over the ranges, outer ones first where they start together."""
    calls = sorted(calls, key=lambda c: (c[0], -c[1]))
    points = sorted({b for low, high, _ in calls for b in (low + 1, high + 1)})
    starts: list[int] = []
    chains: list[tuple[int, ...]] = []
    inside: list[tuple[int, int, CallRecord]] = []
    i = 0
    for point in points:
        inside = [c for c in inside if c[1] >= point]
        while i < len(calls) and calls[i][0] < point:
            if calls[i][1] >= point:
                inside.append(calls[i])
            i += 1
        starts.append(point)
        chains.append(tuple(c[2].seq for c in inside))
    return starts, chains
