"""Messages that cross widgets and screens. Workers post these; tests can post them too."""

from __future__ import annotations

from dataclasses import dataclass, field

from textual.message import Message

from tvis_tui.store import CallRecord, Site, Slot, StepRecord
from tvis_tui.widgets.call_rows import Row


@dataclass
class CallLoaded(Message):
    """Everything the panes show about call `seq`, read by a worker."""

    seq: int
    call: CallRecord
    slots: list[Slot]
    source: str | None
    step: StepRecord | None
    total: int
    rows: tuple[Row, ...] = ()
    row: int | None = None
    line_shapes: dict[int, str] = field(default_factory=dict)
    nonfinite_grad: bool = False
    """The call's outputs are finite, their gradients are not."""
    site: Site | None = None
    """The place the source pane shows: the call site, or the called code's definition."""
    definition: bool = False
    """`site` is the definition (asked for, and its source recorded)."""

    def can_replace(self, message: Message) -> bool:
        # Holding a stepping key queues loads; only the newest needs drawing.
        return isinstance(message, CallLoaded)


@dataclass
class RowsChanged(Message):
    """The call tree's rows after an expand or collapse."""

    rows: tuple[Row, ...]
    cursor: int


@dataclass
class JumpFound(Message):
    """A search in a worker found call `seq` (None: nothing matched `what`). A search that
    wraps around the run started at call `start`, going `forward` or not."""

    seq: int | None
    what: str
    start: int | None = None
    forward: bool = True


@dataclass
class ValuesRequested(Message):
    """Open the values of a tensor slot of call `seq`."""

    seq: int
    slot: Slot


class RunClosed(Message):
    """A run's reader was closed (its screen left): a list of runs may read it again
    (LMDB opens a run once per process)."""
