"""Watching one DataLoader fetch: which indices, what each sample was, how it was collated.

torch's fetchers (`_MapDatasetFetcher`, `_IterableDatasetFetcher`) do the same work in the
main process and in worker processes: take the indices the sampler already drew, get each
item from the dataset, collate. `observed_fetch` runs the real `fetch` with the fetcher's
dataset (or dataset iterator) swapped for a pass-through proxy for the length of the call, so the indices are read, never drawn again, and every item is seen as
the dataset returned it, together with the transform stages that made it (transforms.py);
tokenizer calls made while collating belong to the batch.
The dataset itself is only touched for its transform attributes (put back at the end).
"""

from __future__ import annotations

import operator
import threading
from typing import Any, Callable

from torch.utils.data import Subset

from tvis_tui.record import transforms
from tvis_tui.record.describe import Budget, describe

Guard = Callable[..., Any]
"""Runs a capture step, containing its errors (the recorder's guard in the main process)."""

MAX_INDEX_ITEMS = 4096
"""Sampler indices kept per batch; a batch is rarely bigger."""

DETAILED_SAMPLES = 8
"""Samples of a batch described in detail (item, transform stages, tokenizer calls): the
first ones in batch order. The others keep their position and index only: describing every
sample of every batch made recording the bundled CNN 1.6x slower for values nobody reads."""


class BatchCapture:
    """What one fetch produced besides the batch itself (MessagePack-ready maps)."""

    def __init__(self, indices: Any, collate: Any, budget: Budget, guard: Guard) -> None:
        self.indices = _indices(indices)
        self.collate = transforms._name(collate)
        self.samples: list[dict[str, Any]] = []
        self.tokens: list[dict[str, Any]] = []  # tokenizer calls outside any one sample
        self.transforms: list[dict[str, Any]] = []  # transform calls outside any one sample
        self.budget = budget
        self.guard = guard
        self.sample: dict[str, Any] | None = None  # the sample being produced now
        self.worker: int | None = None
        self.memo: dict = {}  # descriptions of this batch's tensors (describe.Memo)

    def describe(self, value: Any) -> dict[str, Any]:
        out = self.guard(describe, value, self.budget, 0, self.memo)
        return out if out is not None else {"kind": "repr", "repr": "<not recorded>"}

    def on_transform(self, entry: dict[str, Any]) -> None:
        target = self.sample.setdefault("transforms", []) if self.sample is not None else self.transforms
        target.append(entry)

    def on_tokens(self, entry: dict[str, Any]) -> None:
        target = self.sample.setdefault("tokens", []) if self.sample is not None else self.tokens
        target.append(entry)

    def detailed(self, sample: dict[str, Any] | None) -> bool:
        """Whether work done for `sample` (None: for the batch as a whole) is described."""
        return sample is None or sample["position"] < DETAILED_SAMPLES

    def wants_detail(self) -> bool:
        """Whether what happens now (a transform call, a tokenizer call) is described."""
        return self.detailed(self.sample)

    def begin_sample(self, index: Any) -> dict[str, Any]:
        sample = {"position": len(self.samples), "index": _index(index)}
        self.samples.append(sample)
        self.sample = sample
        return sample

    def batch_record(self) -> dict[str, Any]:
        return {"indices": self.indices, "collate": self.collate, "size": len(self.samples),
                "detailed": min(len(self.samples), DETAILED_SAMPLES), "worker": self.worker, "tokens": self.tokens, "transforms": self.transforms}


class _Current(threading.local):
    capture: BatchCapture | None = None


current = _Current()
"""The fetch being observed on this thread (tokenizer calls look here)."""


def to_current_capture(make: Callable[[], dict[str, Any]]) -> bool:
    """Give a tokenizer call (its record made by `make`, if wanted) to the fetch observed on
    this thread; False when no fetch is."""
    capture = current.capture
    if capture is None:
        return False
    if capture.wants_detail():
        entry = capture.guard(make)
        if entry is not None:
            capture.on_tokens(entry)
    return True


def observed_fetch(original: Callable[..., Any], fetcher: Any, index: Any, budget: Budget,
                   guard: Guard) -> tuple[Any, BatchCapture]:
    """Run `original(fetcher, index)` unchanged and return (batch, what was seen)."""
    capture = BatchCapture(index, fetcher.collate_fn, budget, guard)
    iterable = "dataset_iter" in vars(fetcher)
    source_attr = "dataset_iter" if iterable else "dataset"
    source = getattr(fetcher, source_attr)
    proxy = _IteratorProxy(source, capture) if iterable else _DatasetProxy(source, capture)
    setattr(fetcher, source_attr, proxy)
    current.capture = capture
    try:
        with transforms.observing(fetcher.dataset if iterable else source, capture.on_transform,
                                  capture.describe, capture.wants_detail):
            batch = original(fetcher, index)
    finally:
        current.capture = None
        setattr(fetcher, source_attr, source)
    return batch, capture


class _DatasetProxy:
    """The fetcher's view of a map-style dataset: each item goes through `__getitem__`."""

    def __init__(self, dataset: Any, capture: BatchCapture) -> None:
        self._dataset, self._capture = dataset, capture

    def __getitem__(self, index: Any) -> Any:
        sample = self._begin_sample(index)
        try:
            item = self._dataset[index]
        finally:
            self._capture.sample = None
        if self._capture.detailed(sample):
            sample["item"] = self._capture.describe(item)
        return item

    def _begin_sample(self, index: Any) -> dict[str, Any]:
        sample = self._capture.begin_sample(index)
        beneath = _index_beneath(self._dataset, index)
        if beneath is not None:
            sample["base_index"] = beneath
        return sample

    def __getattr__(self, name: str) -> Any:
        if name == "__getitems__" and _subsets_of_single_items(self._dataset):
            # Then fetching item by item (the fetcher's way without __getitems__) gets the
            # same items by the same calls, and each is seen with its transform stages.
            raise AttributeError(name)
        value = getattr(self._dataset, name)  # AttributeError as the dataset gives it
        if name == "__getitems__" and value:
            return self._getitems_of(value)
        return value

    def _getitems_of(self, getitems: Callable[..., Any]) -> Callable[..., Any]:
        def getitems_observed(indices: Any) -> Any:
            items = getitems(indices)
            for index, item in zip(indices, items):
                sample = self._begin_sample(index)
                if self._capture.detailed(sample):
                    sample["item"] = self._capture.describe(item)
            self._capture.sample = None
            return items
        return getitems_observed

    def __len__(self) -> int:
        return len(self._dataset)


class _IteratorProxy:
    """The fetcher's view of an iterable dataset's iterator (items have no index)."""

    def __init__(self, iterator: Any, capture: BatchCapture) -> None:
        self._iterator, self._capture = iterator, capture

    def __iter__(self) -> "_IteratorProxy":
        return self

    def __next__(self) -> Any:
        sample = self._capture.begin_sample(None)
        try:
            item = next(self._iterator)
        except BaseException:
            self._capture.samples.pop()  # the end of the data is not a sample
            raise
        finally:
            self._capture.sample = None
        if self._capture.detailed(sample):
            sample["item"] = self._capture.describe(item)
        return item


def _subsets_of_single_items(dataset: Any) -> bool:
    """Whether `dataset` (through any `Subset`s, random_split's, as torch defines them)
    has no `__getitems__` beneath: a Subset's then only gets each item in turn."""
    while _plain_subset(dataset):
        dataset = dataset.dataset
    return not isinstance(dataset, Subset) and not callable(getattr(dataset, "__getitems__", None))


def _plain_subset(dataset: Any) -> bool:
    """A Subset whose item access is torch's own (a subclass may change either way)."""
    kind = type(dataset)
    return (isinstance(dataset, Subset) and kind.__getitems__ is Subset.__getitems__
            and kind.__getitem__ is Subset.__getitem__)


def _index_beneath(dataset: Any, index: Any) -> int | None:
    """The index in the dataset under a chain of `Subset`s (random_split) that `index`
    of the outer one stands for; None when `dataset` is no Subset."""
    if not isinstance(dataset, Subset):
        return None
    try:
        index = operator.index(index)  # an int, or numpy's (a sampler over a permutation)
        while isinstance(dataset, Subset):
            index, dataset = dataset.indices[index], dataset.dataset
        return int(index)
    except (IndexError, TypeError, ValueError):  # indices of a shape tvis does not know
        return None


def _index(index: Any) -> Any:
    if isinstance(index, (int, str)) or index is None:
        return index
    if hasattr(index, "item") and getattr(index, "ndim", 1) == 0:
        return index.item()
    if isinstance(index, (list, tuple)):
        return [_index(i) for i in index[:MAX_INDEX_ITEMS]]
    return repr(index)[:80]


def _indices(index: Any) -> Any:
    """The sampler's indices for this batch (a list; one index when batching is off)."""
    if isinstance(index, (list, tuple)):
        return [_index(i) for i in index[:MAX_INDEX_ITEMS]]
    return _index(index)
