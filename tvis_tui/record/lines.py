"""Per-line tensor shapes: what TorchSnooper prints, stored instead of printed.

After each line of user code runs, the frame's local names (module-level code: its
globals) are compared with what they held before the line: every name now bound to a
different tensor object is an entry (name, shape, dtype) of that line. Lines are
aggregated per (file, line, step) with a cap on distinct entries, so a loop adds hits,
not records; a step's records are written once the step after it ends, and when recording
stops (store/lines.py).

Only ids are kept between lines (never the tensors: holding them would change when
memory is freed). Shapes and dtypes are read from the tensor objects; no tensor op runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import torch

from tvis_tui.record.stats import shape_of
from tvis_tui.record.sink import WriterThread
from tvis_tui.store.lines import LineRecord, LineShape

MAX_ENTRIES = 4
"""Distinct (name, shape, dtype) entries kept per line and step; later ones only count."""

Snapshot = dict[str, int]
"""name -> id() of the tensor it was bound to."""

Entry = tuple[str, tuple[int, ...], str]
"""What a line bound: a name, and the shape and dtype of the tensor it holds."""


def bound_entries(changed: list[tuple[str, torch.Tensor]]) -> list[Entry]:
    return [(name, shape_of(t), str(t.dtype).removeprefix("torch.")) for name, t in changed]


def tensor_ids(names: Mapping[str, Any]) -> Snapshot:
    return {k: id(v) for k, v in names.items() if issubclass(type(v), torch.Tensor)}


def rebound(names: Mapping[str, Any], before: Snapshot) -> tuple[Snapshot, list[tuple[str, torch.Tensor]]]:
    """(the new snapshot, the names bound to a different tensor than in `before`)."""
    now: Snapshot = {}
    changed: list[tuple[str, torch.Tensor]] = []
    for name, value in names.items():
        # By type: isinstance() reads __class__, and a dead weakref.proxy raises on that.
        if issubclass(type(value), torch.Tensor):
            ident = now[name] = id(value)
            if before.get(name) != ident:
                changed.append((name, value))
    return now, changed


@dataclass(slots=True)
class _LineTally:
    hits: int = 0
    entries: dict[Entry, int] = field(default_factory=dict)
    dropped: int = 0

    def record(self) -> tuple[tuple[LineShape, ...], int]:
        shapes = tuple(LineShape(n, s, d, hits) for (n, s, d), hits in self.entries.items())
        return shapes, self.dropped


class LineShapes:
    """Per-step tallies of the lines that ran, written through the sink (sink.py).

    A line counts in the step it started in: `opt.step()` ends a step and is reported
    when the next line starts, in the next step. So a step's tallies are written once the
    step after it is over too.
    """

    def __init__(self, writer: WriterThread) -> None:
        self._writer = writer
        self._current = 0
        self._tallies: dict[tuple[int, str, int], _LineTally] = {}

    def ran(self, path: str, line: int, step: int, current: int,
            changed: list[tuple[str, torch.Tensor]]) -> None:
        """Line `path:line`, started in `step`, ran once (now in step `current`) and bound
        the tensors `changed`."""
        self.tally(path, line, step, current, bound_entries(changed))

    def tally(self, path: str, line: int, step: int, current: int, bound: list[Entry]) -> None:
        """`ran`, with the tensors already read as entries."""
        if current != self._current:
            self._current = current
            self.flush(before=current - 1)
        tally = self._tallies.get((step, path, line))
        if tally is None:
            tally = self._tallies[(step, path, line)] = _LineTally()
        tally.hits += 1
        for key in bound:
            if key in tally.entries:
                tally.entries[key] += 1
            elif len(tally.entries) < MAX_ENTRIES:
                tally.entries[key] = 1
            else:
                tally.dropped += 1

    def flush(self, before: int | None = None, drop: int | None = None) -> None:
        """Write the tallies of the steps before `before` (all of them by default), less
        those of step `drop`, which are forgotten."""
        if drop is not None:
            self._tallies = {k: v for k, v in self._tallies.items() if k[0] != drop}
        done = sorted(k for k in self._tallies if before is None or k[0] < before)
        by_step: dict[int, list[tuple[str, LineRecord]]] = {}
        for key in done:
            step, path, line = key
            tally = self._tallies.pop(key)
            entries, dropped = tally.record()
            by_step.setdefault(step, []).append((path, LineRecord(line, tally.hits, entries, dropped)))
        for step, records in by_step.items():
            self._writer.call(_put_lines, step, records)


def _put_lines(writer: Any, step: int, records: list[tuple[str, LineRecord]]) -> None:
    writer.put_lines(step, records)
