"""The run store: one LMDB environment per recorded run.

`RunWriter` is used by the recorder (and by tests and benchmarks to build runs);
`RunReader` is the only way the TUI and `tvis export` read a run. Nothing here
imports torch or Textual. The on-disk format is described in docs/store-format.md.
"""

from tvis_tui.store.reader import RunReader
from tvis_tui.store.records import CallRecord, PhaseSpan, Site, Slot, StepRecord, TensorStats
from tvis_tui.store.writer import RunWriter

__all__ = [
    "CallRecord",
    "PhaseSpan",
    "RunReader",
    "RunWriter",
    "Site",
    "Slot",
    "StepRecord",
    "TensorStats",
]
