"""Bringing what DataLoader workers saw back to the run.

Worker processes are forks of the training process: they must never touch the run's LMDB
environment (not fork-safe), and the recorder is inactive there. Instead, a worker's
observed fetch returns its batch inside a `Carrier` with the sample records (plain maps of
bytes, numbers and text), which torch's own result queue takes to the main process like
any batch. There the iterator's `_process_data` (wrapped) takes the carrier apart before
torch looks at the data, so the script receives exactly the batch the worker made.
"""

from __future__ import annotations

from typing import Any

from torch.utils.data import get_worker_info


class Carrier:
    """A worker's batch and what tvis saw while the worker made it."""

    __slots__ = ("batch", "capture")

    def __init__(self, batch: Any, capture: dict[str, Any]) -> None:
        self.batch = batch
        self.capture = capture

    def __getstate__(self) -> tuple[Any, dict[str, Any]]:
        return self.batch, self.capture

    def __setstate__(self, state: tuple[Any, dict[str, Any]]) -> None:
        self.batch, self.capture = state

    def pin_memory(self, *args: Any) -> "Carrier":
        """torch's pin-memory thread calls this on objects that have it: pin the batch."""
        from torch.utils.data._utils.pin_memory import pin_memory

        return Carrier(pin_memory(self.batch, *args), self.capture)


def worker_id() -> int | None:
    """The DataLoader worker this process is, or None in any other process."""
    info = get_worker_info()
    return None if info is None else info.id


def contain(fn: Any, *args: Any) -> Any:
    """The guard used in workers: a capture error costs that value, never the batch."""
    try:
        return fn(*args)
    except Exception:
        return None
