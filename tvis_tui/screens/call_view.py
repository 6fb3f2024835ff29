"""Reading everything the panes show about one call (runs in a worker thread)."""

from __future__ import annotations

from tvis_tui.messages import CallLoaded
from tvis_tui.screens.stepping import Stepper
from tvis_tui.store import CallRecord, Site
from tvis_tui.store.lines import LineShape
from tvis_tui.widgets.call_rows import CallRows
from tvis_tui.widgets.format import shape

NEARBY_CALLS = 64
"""Sibling calls read around the current one to label source lines with shapes."""

MAX_SHOWN = 2
"""Entries shown beside a line (a loop line may have bound up to four shapes)."""


class CallViewLoader:
    """Builds `CallLoaded` messages; caches source snapshots by path."""

    def __init__(self, stepper: Stepper, rows: CallRows) -> None:
        self.stepper = stepper
        self.reader = stepper.reader
        self.rows = rows
        self._sources: dict[str, str | None] = {}
        self._has_lines = False

    def source(self, path: str) -> str | None:
        if path not in self._sources:
            self._sources[path] = self.reader.source(path)
        return self._sources[path]

    def load(self, seq: int, *, reveal: bool = True, definition: bool = False) -> CallLoaded | None:
        """With `definition`, the source pane shows the called code's own lines where
        their source was recorded (a function of the script's: its body and the shapes its
        lines bound), else where it was called from."""
        call = self.stepper.call(seq)
        if call is None:
            return None
        at_definition = bool(definition and call.def_site and self.source(call.def_site.file))
        site = call.def_site if at_definition else call.call_site
        row = self.rows.reveal(seq) if reveal else None
        return CallLoaded(
            seq=seq,
            call=call,
            slots=self.reader.slots(seq),
            nonfinite_grad=self.reader.nonfinite_grad(seq),
            source=self.source(site.file) if site else None,
            step=self.reader.step(call.step),
            total=self.stepper.total,
            rows=self.rows.rows,
            row=row,
            line_shapes=self.line_shapes(call, site, at_definition),
            site=site,
            definition=at_definition,
        )

    def line_shapes(self, call: CallRecord, site: Site | None, at_definition: bool = False) -> dict[int, str]:
        """What each line of `site`'s file bound in this call's step (the run's per-line
        shapes), else, at the call site, the shapes of the calls made around this one
        (they are the caller's lines, not the definition's)."""
        if site is None:
            return {}
        if not self._has_lines:  # asked again while a live run may still write them
            self._has_lines = self.reader.has_line_shapes()
        if self._has_lines:
            recorded = {line: _names_and_shapes(entries)
                        for line, entries in self.reader.line_shapes(site.file, call.step).items() if entries}
            if recorded or at_definition:
                return recorded
        return {} if at_definition else self._nearby_shapes(call)

    def _nearby_shapes(self, call: CallRecord) -> dict[int, str]:
        """Output shapes of the calls made around this one from the same file, by line:
        what each line of the caller produced in this pass (runs without line shapes),
        `pool → [4, 16, 1, 1]`: the module's output, not what the line bound."""
        site = call.call_site
        assert site is not None
        after = max(call.parent, call.seq - NEARBY_CALLS // 2)
        shapes: dict[int, str] = {}
        for seq in self.reader.children(call.parent, after=after - 1, limit=NEARBY_CALLS):
            near = self.stepper.call(seq)
            if near is None or near.call_site is None or near.call_site.file != site.file:
                continue
            outputs = [s for s in self.reader.slots(seq, "output") if s.is_tensor]
            if outputs:  # named as the call's output: the line may go on to reshape it
                called = (near.name or near.type).rsplit(".", 1)[-1]
                if called.isdigit():  # a Sequential's `2`: its class says more
                    called = near.type
                shapes[near.call_site.line] = f"{called} → " + " ".join(shape(s.shape) for s in outputs[:2])
        return shapes


def _names_and_shapes(entries: list[LineShape]) -> str:
    """`x [4, 8]  y [4]`: the first entries a line bound; "…" when it bound more."""
    shown = [f"{e.name} {shape(e.shape)}" for e in entries[:MAX_SHOWN]]
    if len(entries) > MAX_SHOWN:
        shown.append("…")
    return "  ".join(shown)
