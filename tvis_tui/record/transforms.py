"""Seeing a dataset's transform pipeline work: the value before it and after each stage.

While one batch is fetched, each transform-like attribute of the dataset (`transform`,
`target_transform`, `augment`, ...; also on a wrapped `.dataset`) is swapped for an
observer that calls it with the same arguments and returns its result unchanged. When the
transform holds its stages in a list or tuple attribute (`transforms`, as torchvision's
Compose and RandomApply; else its one attribute that is a list of callable objects, as a
hand-written Compose's `self.ts`), that list is swapped, for the duration of the call, for
one whose items call the real stages the same way; so the pipeline's own logic runs as
written and each stage output is seen in call order. A
transform without such a list that holds pipelines as attributes (SimCLR's two-view wrapper
around a Compose) has those observed the same way, each run of one labelled apart.
Everything is put back when the fetch ends, also when it raises.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, Callable, Iterator

TRANSFORM_WORDS = ("transform", "augment", "preprocess")
"""Instance attributes whose name holds one of these words are treated as transforms."""

MAX_NESTING = 3
WRAPPED_DATASET_ATTRS = ("dataset", "datasets", "base", "data_source")
"""Where wrapper datasets (Subset, ConcatDataset, ...) keep the dataset they wrap."""


def transform_owners(dataset: Any, depth: int = 0) -> Iterator[tuple[Any, str, Callable[..., Any]]]:
    """(object, attribute, transform) for each transform the dataset (or one it wraps)
    holds as an instance attribute."""
    state = getattr(dataset, "__dict__", None)
    if not isinstance(state, dict):
        return
    for name, value in list(state.items()):
        lowered = name.lower()
        if any(w in lowered for w in TRANSFORM_WORDS) and _is_callable_object(value):
            yield dataset, name, value
    if depth < MAX_NESTING:
        for name in WRAPPED_DATASET_ATTRS:
            inner = state.get(name)
            for item in inner if isinstance(inner, (list, tuple)) else [inner]:
                if item is not None and item is not dataset and hasattr(item, "__getitem__"):
                    yield from transform_owners(item, depth + 1)


def _is_callable_object(value: Any) -> bool:
    return callable(value) and not inspect.isclass(value) and type(value) is not Observed


@contextlib.contextmanager
def observing(dataset: Any, record: Callable[[dict[str, Any]], None],
              describe: Callable[[Any], dict[str, Any]],
              wanted: Callable[[], bool] = lambda: True) -> Iterator[None]:
    """Observe the dataset's transforms while the block runs. `record` receives one map
    per transform call: attribute, name, input, stages (name and value) and output.
    A call made while `wanted()` is false just runs (samples past the detail cap)."""
    swapped: list[tuple[Any, str, Any]] = []
    try:
        for owner, attr, fn in transform_owners(dataset):
            try:
                setattr(owner, attr, Observed(fn, attr, record, describe, wanted))
            except (AttributeError, TypeError):  # slots, read-only properties
                continue
            swapped.append((owner, attr, fn))
        yield
    finally:
        for owner, attr, fn in reversed(swapped):
            setattr(owner, attr, fn)


class _StandIn:
    """Takes the place of a callable `_fn` and looks like it to the pipeline's code:
    its attributes, its repr, and `isinstance` (which asks `__class__`), so a pipeline
    that branches on a transform's type (`isinstance(t, JointTransform)`) takes the same
    branch. Only `type(x) is C` sees the stand-in."""

    _fn: Callable[..., Any]

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._fn)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._fn, name)

    def __repr__(self) -> str:
        return repr(self._fn)


class Observed(_StandIn):
    """Stands in for a transform during a fetch; calls it exactly as the dataset would."""

    def __init__(self, fn: Callable[..., Any], attr: str, record: Callable[[dict[str, Any]], None],
                 describe: Callable[[Any], dict[str, Any]],
                 wanted: Callable[[], bool] = lambda: True) -> None:
        self._fn, self._attr, self._record, self._describe = fn, attr, record, describe
        self._wanted = wanted

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not self._wanted():
            return self._fn(*args, **kwargs)
        entry: dict[str, Any] = {"attr": self._attr, "name": _name(self._fn),
                                 "input": self._describe(_argument(args, kwargs)), "stages": []}
        self._record(entry)
        with _stages(self._fn, entry, self._describe, ""):
            out = self._fn(*args, **kwargs)
        if not entry["stages"]:
            entry["output"] = self._describe(out)
        return out


class _Stage(_StandIn):
    """A stage of a pipeline; run more than once in one transform call (a two-view
    wrapper's pipeline), its later runs are labelled `#2`, `#3`, ..."""

    def __init__(self, fn: Callable[..., Any], entry: dict[str, Any],
                 describe: Callable[[Any], dict[str, Any]], label: str, depth: int) -> None:
        self._fn, self._entry, self._describe, self._label, self._depth = fn, entry, describe, label, depth
        self._runs = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._runs += 1
        label = self._label if self._runs == 1 else f"{self._label}#{self._runs}"
        with _stages(self._fn, self._entry, self._describe, label + "/", self._depth + 1):
            out = self._fn(*args, **kwargs)
        self._entry["stages"].append({"name": label, "value": self._describe(out)})
        return out


@contextlib.contextmanager
def _stages(fn: Any, entry: dict[str, Any], describe: Callable[[Any], dict[str, Any]],
            prefix: str, depth: int = 0) -> Iterator[None]:
    """While the block runs, `fn`'s stages are observed: the items of its stage list
    (`_stage_list`), else the pipelines it holds as attributes (a wrapper's `base`)."""
    state = getattr(fn, "__dict__", None)
    if depth >= MAX_NESTING or not isinstance(state, dict):
        yield
        return
    listed = _stage_list(state)
    if listed is not None:
        attr, inner = listed
        stages = type(inner)(_Stage(t, entry, describe, f"{prefix}{i}:{_name(t)}", depth)
                             for i, t in enumerate(inner))
        swaps = {attr: stages}
    else:
        swaps = {name: _Stage(value, entry, describe, f"{prefix}{name}", depth)
                 for name, value in state.items() if _is_pipeline(value)}
    originals = {name: state[name] for name in swaps}
    swapped: list[str] = []
    try:
        for name, stand_in in swaps.items():
            try:
                setattr(fn, name, stand_in)
            except (AttributeError, TypeError):  # slots, read-only properties
                continue
            swapped.append(name)
        yield
    finally:
        for name in swapped:
            setattr(fn, name, originals[name])


def _stage_list(state: dict[str, Any]) -> tuple[str, list[Any] | tuple[Any, ...]] | None:
    """(attribute, stages) of a pipeline's state: its `transforms` list (torchvision's
    name), else its one attribute that is a list of callable objects (`self.ts`)."""
    if _is_stage_list(state.get("transforms")):
        return "transforms", state["transforms"]
    found = [(name, value) for name, value in state.items() if _is_stage_list(value)]
    return found[0] if len(found) == 1 else None


def _is_stage_list(value: Any) -> bool:
    return type(value) in (list, tuple) and len(value) > 0 and all(map(_is_callable_object, value))


def _is_pipeline(value: Any) -> bool:
    """A callable object applying a list of stages (a Compose)."""
    state = getattr(value, "__dict__", None)
    return _is_callable_object(value) and isinstance(state, dict) and _stage_list(state) is not None


def _argument(args: tuple, kwargs: dict) -> Any:
    if len(args) == 1 and not kwargs:
        return args[0]
    return {**{f"args[{i}]": a for i, a in enumerate(args)}, **kwargs}


def _name(fn: Any) -> str:
    if inspect.isfunction(fn) or inspect.ismethod(fn) or inspect.isbuiltin(fn):
        return getattr(fn, "__qualname__", getattr(fn, "__name__", "function"))
    return type(fn).__name__
