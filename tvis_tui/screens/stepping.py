"""Where each stepping command lands, computed from the store alone (no Textual here).

Every method takes the current call's seq and returns the seq to move to, or None when
there is nowhere to go. The cheap moves cost a few keyed lookups whatever the size of the
run, so the screen runs them directly; `search` and `failure` may walk the run and belong
in a worker.
"""

from __future__ import annotations

from tvis_tui.store import CallRecord, PhaseSpan, RunReader

FAILING_SEQ_KEYS = ("failing_seq", "failed_seq", "error_seq")
"""Metadata keys under which a recorder may name the call that raised."""

SEARCH_CHUNK = 4096
"""Calls decoded per read transaction while looking for the failing call."""


class Stepper:
    """Stepping over one run's call tree: execution order, siblings, parents, phases."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader
        self.total = reader.call_count()

    def refresh(self) -> None:
        self.reader.refresh()
        self.total = self.reader.call_count()

    def call(self, seq: int) -> CallRecord | None:
        return self.reader.call(seq) if 1 <= seq <= self.total else None

    # -- execution order and the tree -----------------------------------------------------

    def next(self, seq: int) -> int | None:
        return seq + 1 if seq < self.total else None

    def prev(self, seq: int) -> int | None:
        return seq - 1 if seq > 1 else None

    def over(self, seq: int) -> int | None:
        """The first call after `seq` and everything it called (pdb `n`)."""
        while True:
            call = self.call(seq)
            if call is None:
                return None
            sibling = self.reader.sibling(seq, call.parent)
            if sibling is not None:
                return sibling
            if call.parent == 0:
                return None
            seq = call.parent

    def back_over(self, seq: int) -> int | None:
        """The previous call at this level, else the caller."""
        call = self.call(seq)
        if call is None:
            return None
        sibling = self.reader.sibling(seq, call.parent, forward=False)
        return sibling if sibling is not None else (call.parent or None)

    def out(self, seq: int) -> int | None:
        """The caller of `seq`."""
        call = self.call(seq)
        return call.parent if call is not None and call.parent else None

    def finish(self, seq: int) -> int | None:
        """The first call after the caller returns (gdb `finish`, VS Code step out)."""
        parent = self.out(seq)
        return self.over(parent) if parent is not None else None

    def ancestors(self, seq: int) -> list[int]:
        """`seq` and its callers, innermost first."""
        chain: list[int] = []
        call = self.call(seq)
        while call is not None:
            chain.append(call.seq)
            call = self.call(call.parent) if call.parent else None
        return chain

    # -- steps and phases -----------------------------------------------------------------

    def span_of(self, seq: int) -> PhaseSpan | None:
        call = self.call(seq)
        if call is None:
            return None
        return next((s for s in self.reader.phases(call.step) if s.first_seq <= seq <= s.last_seq), None)

    def step_start(self, seq: int, *, forward: bool = True) -> int | None:
        """The first call of the next (or previous) training step."""
        call = self.call(seq)
        if call is None:
            return None
        spans = self.reader.phases(call.step + (1 if forward else -1))
        return spans[0].first_seq if spans else None

    def phase_start(self, seq: int, phase: str) -> int | None:
        """The first call of `phase` in the step of `seq`."""
        call = self.call(seq)
        if call is None:
            return None
        return next((s.first_seq for s in self.reader.phases(call.step) if s.phase == phase), None)

    def optimizer(self, seq: int, *, forward: bool = True) -> int | None:
        """The first call of the next (or previous) optimizer phase."""
        call = self.call(seq)
        if call is None:
            return None
        step = call.step
        while True:
            spans = [s for s in self.reader.phases(step) if s.phase == "optimizer"]
            if not spans and step != call.step:
                return None
            hits = [s.first_seq for s in spans if (s.first_seq > seq if forward else s.first_seq < seq)]
            if hits:
                return hits[0] if forward else hits[-1]
            step += 1 if forward else -1
            if step < 1:
                return None

    # -- events ----------------------------------------------------------------------------

    def nonfinite(self, seq: int, *, forward: bool = True) -> int | None:
        return self.reader.nonfinite_near(seq, forward=forward)

    def first_nonfinite(self) -> int | None:
        return self.reader.nonfinite_near(0)

    def failure(self) -> int | None:
        """The call that raised in a crashed run: named in metadata, else the last call
        that recorded an error."""
        meta = self.reader.meta()
        for key in FAILING_SEQ_KEYS:
            value = meta.get(key)
            if isinstance(value, int) and self.call(value) is not None:
                return value
        for seq in range(self.total, 0, -SEARCH_CHUNK):
            for call in reversed(self.reader.calls(max(1, seq - SEARCH_CHUNK + 1), seq)):
                if call.error:
                    return call.seq
        return None

    def stop(self, seq: int, *, forward: bool = True) -> int | None:
        """Continue (pdb `c`): the next call with NaN/Inf outputs, or the failure."""
        hits = [self.nonfinite(seq, forward=forward)]
        failing = self.failure() if self.reader.meta().get("status") == "crashed" else None
        if failing is not None and (failing > seq if forward else failing < seq):
            hits.append(failing)
        hits = [h for h in hits if h is not None]
        if not hits:
            return None
        return min(hits) if forward else max(hits)

    def at_line(self, file: str, line: int, seq: int, *, forward: bool = True) -> int | None:
        """The next (previous) call made from `file:line` (run to cursor)."""
        return self.reader.call_at_line_near(file, line, seq, forward=forward)

    def search(self, text: str, seq: int, *, forward: bool = True) -> int | None:
        """The next (previous) call whose name or type contains `text`, wrapping around."""
        order = [(seq + 1, self.total), (1, seq)] if forward else [(1, seq - 1), (seq, self.total)]
        for lo, hi in order:
            for found in self.reader.calls_matching(text, lo, hi, reverse=not forward):
                return found
        return None
