"""The rows of the call tree that are expanded so far: steps -> phases -> calls.

Nothing is read until a node is expanded, and a node's children arrive a page at a time
behind a "more" row, so the rows held grow with what the user opened, never with the size
of the run. Each change builds a new tuple of rows: the UI thread may draw the previous
tuple while a worker computes the next one.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace

from tvis_tui.screens.stepping import Stepper
from tvis_tui.store import CallRecord, PhaseSpan
from tvis_tui.store.step_details import loss_label

PAGE = 100
"""Children read per expansion; the rest wait behind a "more" row."""

Key = tuple


@dataclass(frozen=True)
class Row:
    """One line of the tree. `key` is ("step", n), ("phase", step, ordinal), ("call", seq)
    or ("more", parent key, after seq, before seq or None): children not read yet."""

    key: Key
    depth: int
    expandable: bool = False
    expanded: bool = False
    call: CallRecord | None = None
    span: PhaseSpan | None = None
    loss: str | None = None  # the step's, as loss_label prints it
    unfinished: bool = False
    """A step with no optimizer step at its end (yet): cut short by a crash, still being
    recorded, or what the script did after its last step (the loader running out of data)."""
    nonfinite_grad: bool = False
    """The call's outputs are finite, their gradients are not."""
    until: int | None = None
    """The last call of the phase this row is listed in: a call's children past it (the
    backward and optimizer calls of a user function that runs a whole step) are listed
    in their own phases, and listing them here too would show them twice."""

    @property
    def seq(self) -> int | None:
        """The call this row stands for (a step or phase: its first call)."""
        if self.call is not None:
            return self.call.seq
        if self.span is not None:
            return self.span.first_seq
        return None


class CallRows:
    """Expand, collapse and reveal over a run; `rows` is the current immutable snapshot."""

    def __init__(self, stepper: Stepper) -> None:
        self.stepper = stepper
        self.reader = stepper.reader
        self._lock = threading.Lock()
        self.rows: tuple[Row, ...] = ()
        self.reload()

    def reload(self) -> None:
        """Start again from the list of steps (after a refresh)."""
        records = {s.step: s for s in self.reader.steps()}
        with self._lock:
            self.rows = tuple(
                Row(("step", n), 0, expandable=True, span=(self.reader.phases(n) or [None])[0],
                    loss=loss_label(records.get(n), named=False),  # the status line names them
                    unfinished=n not in records or not records[n].complete)
                for n in self.reader.phase_steps()
            )

    def index(self, key: Key) -> int | None:
        return next((i for i, row in enumerate(self.rows) if row.key == key), None)

    # -- children --------------------------------------------------------------------------

    def _child_rows(self, parent: Row, after: int, before: int | None = None) -> list[Row]:
        if parent.key[0] == "step":
            return [Row(("phase", s.step, s.ordinal), 1, expandable=True, span=s, until=s.last_seq)
                    for s in self.reader.phases(parent.key[1])]
        seqs = [s for s in self._child_seqs(parent, after) if before is None or s < before]
        rows = [self._call_row(seq, parent.depth + 1, parent.until) for seq in seqs[:PAGE]]
        if len(seqs) > PAGE:
            rows.append(Row(("more", parent.key, seqs[PAGE - 1], before), parent.depth + 1))
        return rows

    def _child_seqs(self, parent: Row, after: int) -> list[int]:
        if parent.key[0] == "call":
            seqs = self.reader.children(parent.key[1], after=after, limit=PAGE + 1)
            return [s for s in seqs if parent.until is None or s <= parent.until]
        span = parent.span
        assert span is not None
        seqs: list[int] = []
        seq: int | None = span.first_seq if after == 0 else self.stepper.over(after)
        while seq is not None and seq <= span.last_seq and len(seqs) <= PAGE:
            seqs.append(seq)
            seq = self.stepper.over(seq)
        return seqs

    def _call_row(self, seq: int, depth: int, until: int | None) -> Row:
        call = self.stepper.call(seq)
        first = self.reader.children(seq, limit=1)
        expandable = bool(first) and (until is None or first[0] <= until)
        return Row(("call", seq), depth, expandable=expandable, call=call, until=until,
                   nonfinite_grad=self.reader.nonfinite_grad(seq))

    # -- edits -----------------------------------------------------------------------------

    def expand(self, i: int) -> None:
        with self._lock:
            self.rows = self._expanded(list(self.rows), i)

    def collapse(self, i: int) -> None:
        with self._lock:
            rows = list(self.rows)
            end = self._subtree_end(rows, i)
            rows[i : end] = [replace(rows[i], expanded=False)]
            self.rows = tuple(rows)

    def _expanded(self, rows: list[Row], i: int) -> tuple[Row, ...]:
        row = rows[i]
        if row.key[0] == "more":
            parent = next(r for r in reversed(rows[:i]) if r.key == row.key[1])
            rows[i : i + 1] = self._child_rows(parent, row.key[2], row.key[3])
        elif row.expandable and not row.expanded:
            rows[i : i + 1] = [replace(row, expanded=True), *self._child_rows(row, 0)]
        return tuple(rows)

    @staticmethod
    def _subtree_end(rows: list[Row], i: int) -> int:
        end = i + 1
        while end < len(rows) and rows[end].depth > rows[i].depth:
            end += 1
        return end

    def reveal(self, seq: int) -> int | None:
        """Expand the path down to call `seq`, and `seq`; return its row index."""
        call = self.stepper.call(seq)
        span = self.stepper.span_of(seq)
        if call is None or span is None:
            return None
        path: list[Key] = [("step", call.step), ("phase", span.step, span.ordinal)]
        path += [("call", s) for s in reversed(self.stepper.ancestors(seq)) if s >= span.first_seq]
        with self._lock:
            rows = list(self.rows)
            at: int | None = None
            for depth, key in enumerate(path):
                at = self._find_child(rows, at, key, depth)
                if at is None:
                    break
                if not rows[at].expanded:  # the call itself too: its callees come next
                    rows = list(self._expanded(rows, at))
            self.rows = tuple(rows)
            return at

    def _find_child(self, rows: list[Row], parent: int | None, key: Key, depth: int) -> int | None:
        start = 0 if parent is None else parent + 1
        end = len(rows) if parent is None else self._subtree_end(rows, parent)
        for i in range(start, end):
            if rows[i].key == key:
                return i
        if parent is None or key[0] != "call":
            return None
        return self._open_gap(rows, parent, end, key[1])

    def _open_gap(self, rows: list[Row], parent: int, end: int, seq: int) -> int | None:
        """Load the page of `parent`'s children that starts at `seq` in place of the
        "more" row that hides it."""
        for i in range(parent + 1, end):
            row = rows[i]
            if (row.key[0] != "more" or row.depth != rows[parent].depth + 1 or row.key[2] >= seq
                    or (row.key[3] is not None and seq >= row.key[3])):
                continue
            previous = self._previous(rows[parent], seq)
            page = self._child_rows(rows[parent], previous, row.key[3])
            gap = [replace(row, key=(*row.key[:3], seq))] if previous > row.key[2] else []
            rows[i : i + 1] = gap + page
            return i + len(gap)
        return None

    def _previous(self, parent: Row, seq: int) -> int:
        """The child of `parent` listed before `seq` (0: none), so a page starts at `seq`."""
        if parent.key[0] == "call":
            return self.reader.sibling(seq, parent.key[1], forward=False) or 0
        call = self.stepper.call(seq)
        sibling = self.reader.sibling(seq, call.parent, forward=False) if call else None
        return sibling if sibling is not None and parent.span and sibling >= parent.span.first_seq else 0
