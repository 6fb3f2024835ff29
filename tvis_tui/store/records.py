"""The records a run holds, as the reader hands them out and the writer takes them in.

Each record travels as a MessagePack map of its field names. Decoding ignores fields it
does not know and fills defaults for ones it lacks, so older readers open newer runs
within one schema version (see docs/store-format.md).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, TypeVar

from tvis_tui.store.field_types import U16, U32, U64, Fields, fields_check, record_of, wrong_type

PHASES: tuple[str, ...] = ("data", "forward", "loss", "backward", "optimizer", "no_grad", "other")
"""Phases of a training step, in the order a step usually runs through them. "no_grad":
model and loss calls made with autograd off outside any other call (an evaluation, a
shape probe, a frozen part of the model; record/calls.py)."""

ROLES: tuple[str, ...] = ("input", "output", "grad", "param_grad", "update", "param", "per_sample")
"""What a slot of a call holds; the index is the role code used in keys. New roles are
appended (never inserted) so the codes of older runs keep their meaning."""

T = TypeVar("T", bound="_Wire")

META: Fields = {"script": str, "started_at": str, "status": str, "exit_status": int | None,
                "steps_recorded": int | None, "exception": str | None, "traceback": str | None,
                "failing_seq": U64 | None, "failing_site": str | None, "stopped_by": str,
                "warnings": list[str], "incomplete": bool, "host": str, "pid": int}
"""The metadata keys readers use, with their types (docs/store-format.md, "Metadata")."""

DESCRIPTIVE_META: frozenset[str] = frozenset(
    {"script", "started_at", "exception", "traceback", "failing_site", "warnings", "host", "pid"})
"""Meta keys that describe a run but decide nothing about reading it: a damaged one is left
out (and said in `warnings`) rather than making every call and step of the run unreadable."""


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    """A record class's field names, in order (`dataclasses.fields` is slow per call: the
    recorder encodes hundreds of records a step)."""
    return tuple(f.name for f in dataclasses.fields(cls))


class _Wire:
    """MessagePack round trip by field name, tolerant of added and missing fields."""

    __slots__ = ()

    _nested: ClassVar[dict[str, type]] = {}
    _extra: ClassVar[Fields] = {}
    """The `extra` keys readers use, with their types (checked when present)."""

    def to_wire(self) -> dict[str, Any]:
        # The fields that hold records are the ones `_nested` names (from_wire decodes by
        # it, so a record field missing there could not round-trip): only those are checked.
        out = {name: getattr(self, name) for name in _field_names(type(self))}
        for name in self._nested:
            value = out[name]
            if isinstance(value, _Wire):
                out[name] = value.to_wire()
        return out

    @classmethod
    def from_wire(cls: type[T], data: dict[str, Any]) -> T:
        allowed, deep = _checks(cls)
        kwargs: dict[str, Any] = {}
        for name, value in data.items():
            types = allowed.get(name)
            if types is None and name not in deep:
                continue  # a field this reader does not know
            nested = cls._nested.get(name)
            if nested is not None and isinstance(value, dict):
                value = nested.from_wire(value)
            elif isinstance(value, list) and name in _TUPLE_FIELDS:
                value = tuple(value)
            if type(value) not in types if types is not None else not deep[name](value):
                raise wrong_type(name, value)
            kwargs[name] = value
        if "extra" in kwargs:
            _extra_of(cls)(kwargs["extra"])
        return cls(**kwargs)


_checks = functools.cache(fields_check)
"""Each record class's field checks (store/field_types.py), built once."""


@functools.cache
def _extra_of(cls: type) -> Callable[[Any], dict[str, Any]]:
    """The check of an `extra` map's keys the class's `_extra` names."""
    return record_of(cls._extra, within="extra.")


_TUPLE_FIELDS = {"shape", "hist", "values_from"}


@dataclass(frozen=True, slots=True)
class Site(_Wire):
    """A place in a source file. `file` is the path as recorded (absolute)."""

    file: str
    line: U32

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class TensorStats(_Wire):
    """Statistics over a tensor's values. min/max/mean/std/norm skip NaN and ±Inf;
    they are None when no finite value exists (or for dtypes without an order)."""

    numel: int = 0
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    norm: float | None = None
    nan: int = 0
    posinf: int = 0
    neginf: int = 0
    zeros: int = 0

    @property
    def nonfinite(self) -> int:
        return self.nan + self.posinf + self.neginf


@dataclass(frozen=True, slots=True)
class Slot(_Wire):
    """One input, output, gradient or other value attached to a call.

    A tensor slot has shape/dtype/stats; any other value has only `repr`.
    `hist` holds counts of finite values in equal bins over [hist_lo, hist_hi].
    `values_dtype` is the numpy dtype of the stored values (bf16 is stored as float32)
    and is None when the values were over the cap or not captured. `values_from` is set
    when the same unchanged tensor was already stored by an earlier slot: its values are
    kept once, under that slot's (seq, role, index).
    """

    role: str
    index: U16
    path: str
    repr: str | None = None
    shape: tuple[int, ...] | None = None
    dtype: str | None = None
    device: str | None = None
    requires_grad: bool = False
    stats: TensorStats | None = None
    hist: tuple[int, ...] = ()
    hist_lo: float | None = None
    hist_hi: float | None = None
    values_dtype: str | None = None
    values_from: tuple[U64, str, U16] | None = None
    ratio: float | None = None  # "update" slots: ‖update‖ / ‖param before the step‖

    _nested: ClassVar[dict[str, type]] = {"stats": TensorStats}

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    @property
    def has_values(self) -> bool:
        return self.values_dtype is not None


@dataclass(frozen=True, slots=True)
class CallRecord(_Wire):
    """One call: a module's forward, a user function, a backward() or an optimizer step.

    `seq` starts at 1 and follows call (entry) order; `parent` is 0 for top-level calls.
    `step` starts at 1. Times are nanoseconds; `duration_ns` excludes tvis's own work and
    is None while the call has not returned (or never did: see `error`).
    """

    seq: U64
    parent: U64
    depth: int
    step: U32
    phase: str
    kind: str
    name: str
    type: str = ""
    call_site: Site | None = None
    def_site: Site | None = None
    start_ns: int = 0
    duration_ns: int | None = None
    nonfinite_output: bool = False
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    _nested: ClassVar[dict[str, type]] = {"call_site": Site, "def_site": Site}
    _extra: ClassVar[Fields] = {"error_text": str, "backward_ns": int, "lrs": list[float | None],
                                "no_grad": list[str], "no_grad_count": int,
                                "no_grad_frozen": list[str], "no_grad_frozen_count": int,
                                "not_zeroed": list[str], "not_zeroed_count": int,
                                "not_stepped": list[str], "not_stepped_count": int, "eval_while_training": bool,
                                "clip_params": int, "clip_grads": int, "hyper": list[dict[str, Any]],
                                "trains": str}

    def closed(self, duration_ns: int, nonfinite_output: bool, error: str | None,
               extra: dict[str, Any]) -> "CallRecord":
        """This call as it returned (what `dataclasses.replace` gives, at a third of its
        cost: the recorder closes every call it sees)."""
        return CallRecord(self.seq, self.parent, self.depth, self.step, self.phase, self.kind,
                          self.name, self.type, self.call_site, self.def_site, self.start_ns,
                          duration_ns, nonfinite_output, error, extra)


@dataclass(frozen=True, slots=True)
class StepRecord(_Wire):
    """One training step: the calls `first_seq..last_seq` and what was measured over them.

    `phase_ns` maps a phase name to wall time in nanoseconds. `rule` says how the step
    ended: "optimizer" (an Optimizer.step() call) or "backward" (no torch.optim in use).
    """

    step: U32
    first_seq: U64
    last_seq: U64
    loss: float | None = None
    rule: str = "optimizer"
    phase_ns: dict[str, int] = field(default_factory=dict)
    peak_bytes: int | None = None
    complete: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    _extra: ClassVar[Fields] = {
        "wall_ns": int, "tvis_overhead_ns": int, "phase_clock": str, "peak_method": str,
        "peak_phase_bytes": dict[str, int], "optimizer_step_skipped": str,
        "losses": list[float | None], "losses_not_applied": list[int],
        "optimizer_losses": list[{"optimizer": str, "model": str, "seq": U64, "loss": float}],
        "eval_while_training": list[str],
        "per_sample_loss": {"seq": U64, "count": int, "worst": list[tuple[int, float]], "probabilities": bool,
                            "broadcast": {"input": list[int], "target": list[int], "shape": list[int]}},
    }


@dataclass(frozen=True, slots=True)
class PhaseSpan(_Wire):
    """A maximal run of consecutive calls of one step that share a phase."""

    step: U32
    ordinal: U16
    phase: str
    first_seq: U64
    last_seq: U64
