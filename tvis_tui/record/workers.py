"""Bringing what DataLoader workers saw back to the run.

Workers never touch the run's LMDB environment (not fork-safe), and the recorder is
inactive there. Instead, a worker's observed fetch returns its batch inside a `Carrier`
with the sample records (plain maps of bytes, numbers and text), which torch's own result
queue takes to the main process like any batch. There the iterator's `_process_data`
(wrapped) takes the carrier apart before torch looks at the data, so the script receives
exactly the batch the worker made.

A forked worker inherits tvis's wrappers. A worker started by spawn or forkserver (a
`multiprocessing_context` the script chose) is a fresh interpreter: torch's `_worker_loop`,
the process's target, is replaced by a `WorkerLoop` that pickles as "install the worker
side of tvis, then give torch's loop" (`in_spawned_worker`), with the settings and the
tokenizer classes tvis watches at the moment the worker starts.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Callable

from torch.utils.data import get_worker_info
from torch.utils.data._utils import fetch as fetch_module
from torch.utils.data._utils import worker as worker_module

from tvis_tui.record.describe import Budget
from tvis_tui.record.samples import observed_fetch, to_current_capture
from tvis_tui.record.tokenizers import TokenizerWatch

TORCH_WORKER_LOOP = worker_module._worker_loop
"""torch's own loop, read when this module is first imported (before tvis replaces it)."""

FETCHERS = (fetch_module._MapDatasetFetcher, fetch_module._IterableDatasetFetcher)


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


def fetch(original: Callable[..., Any], fetcher: Any, index: Any, budget: Budget) -> Carrier:
    """A worker's fetch, observed: the batch and what was seen, carried together."""
    batch, capture = observed_fetch(original, fetcher, index, budget, contain)
    capture.worker = worker_id()
    return Carrier(batch, {"batch": capture.batch_record(), "samples": capture.samples})


@dataclass(frozen=True)
class WorkerSettings:
    """What a spawned worker needs to observe as a forked one does."""

    batch_bytes: int
    value_bytes: int
    tokenizer_classes: tuple[tuple[str, str], ...]  # (module, qualified name)


class WorkerLoop:
    """Stands for torch's `_worker_loop` as a worker process's target."""

    def __init__(self, settings: Callable[[], WorkerSettings]) -> None:
        self._settings = settings

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # a fork: tvis's wrappers are inherited
        return TORCH_WORKER_LOOP(*args, **kwargs)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[WorkerSettings]]:
        return in_spawned_worker, (self._settings(),)


def in_spawned_worker(settings: WorkerSettings) -> Callable[..., Any]:
    """Run as a spawned worker unpickles its target: observe its fetches, return torch's loop."""
    watch = TokenizerWatch(lambda tok, make: to_current_capture(make), lambda path: False,
                           lambda undo: None)
    for fetcher in FETCHERS:
        fetcher.fetch = _observed(fetcher.fetch, settings, watch)
    return TORCH_WORKER_LOOP


def _observed(original: Callable[..., Any], settings: WorkerSettings, watch: TokenizerWatch
              ) -> Callable[..., Any]:
    watching: list[bool] = []

    def observed_in_worker(fetcher: Any, index: Any) -> Any:
        if not watching:  # the first fetch: the dataset, and the script's modules, are loaded
            watching.append(True)
            _watch_tokenizers(watch, settings, fetcher.dataset)
        return fetch(original, fetcher, index, Budget(settings.batch_bytes, settings.value_bytes))
    return observed_in_worker


def _watch_tokenizers(watch: TokenizerWatch, settings: WorkerSettings, dataset: Any) -> None:
    """The classes the main process watches (those loaded here by now: tvis imports
    nothing of the script's), and a tokenizer the dataset holds."""
    for module_name, qualname in settings.tokenizer_classes:
        cls: Any = sys.modules.get(module_name)
        for part in qualname.split("."):
            cls = getattr(cls, part, None)
        if isinstance(cls, type):
            contain(watch.patch, cls)
    for value in list(getattr(dataset, "__dict__", {}).values()):
        contain(watch.consider, value)
