"""Per-line tensor shapes: which tensors each executed line of user code bound, per step.

An extension database of the run store (see docs/store-format.md), written by the
recorder's line tracer (`tvis_tui/record/lines.py`) once per step and read per
(file, step). Nothing here imports torch.

    lines: u32 file id + u32 step + u32 line -> {"hits", "entries", "dropped"}

`hits` is how often the line ran in the step; `entries` are the first distinct
(name, shape, dtype) bindings the line made, each with its own `hits`; `dropped` counts
sightings of further distinct bindings past the cap.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from tvis_tui.store import codec, layout
from tvis_tui.store.damage import OnDamage, decoded
from tvis_tui.store.field_types import record_of

LINES = layout.LINES


@dataclass(frozen=True, slots=True)
class LineShape:
    """A tensor a line bound to a local (or module-level) name: `x = conv(x)`."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    hits: int = 1


@dataclass(frozen=True, slots=True)
class LineRecord:
    """What one line did during one step."""

    line: int
    hits: int
    entries: tuple[LineShape, ...] = ()
    dropped: int = 0


def line_key(file_id: int, step: int, line: int) -> bytes:
    return codec.u32(file_id) + codec.u32(step) + codec.u32(line)


def to_wire(record: LineRecord) -> dict[str, Any]:
    return {"hits": record.hits, "dropped": record.dropped,
            "entries": [{"name": e.name, "shape": list(e.shape), "dtype": e.dtype, "hits": e.hits}
                        for e in record.entries]}


_FIELDS = {"hits": int, "dropped": int,
           "entries": list[{"name": str, "shape": list[int], "dtype": str, "hits": int}]}
_checked = record_of(_FIELDS)


def from_wire(line: int, data: Any) -> LineRecord:
    data = _checked(data)
    entries = tuple(LineShape(e.get("name", ""), tuple(e.get("shape") or ()), e.get("dtype", ""), e.get("hits", 1))
                    for e in data.get("entries") or ())
    return LineRecord(line, data.get("hits", 0), entries, data.get("dropped", 0))


class _Scanner(Protocol):
    def scan(self, db: bytes, start: bytes = b"", stop: bytes | None = None) -> Iterator[tuple[bytes, bytes]]: ...

    def decode(self, raw: bytes, as_record: Callable[[Any], Any], what: str, key: bytes = b"") -> Any: ...


def records(reader: _Scanner, file_id: int, step: int) -> list[LineRecord]:
    """The line records of one file in one step, by line."""
    rows = reader.scan(LINES, line_key(file_id, step, 0), line_key(file_id, step + 1, 0))
    return [_record(reader, key, value) for key, value in rows]


def all_records(reader: _Scanner, on_damage: OnDamage | None = None) -> Iterator[tuple[int, int, LineRecord]]:
    """(file id, step, record) for every line record of a run, in key order (a damaged
    one left out, with `on_damage`: see store/damage.py)."""
    def decode(key: bytes, value: bytes) -> tuple[int, int, LineRecord]:
        return codec.from_u32(key[:4]), codec.from_u32(key[4:8]), _record(reader, key, value)

    return decoded(reader.scan(LINES), decode, on_damage)


def _record(reader: _Scanner, key: bytes, value: bytes) -> LineRecord:
    return reader.decode(value, lambda data: from_wire(codec.from_u32(key[8:12]), data), "line", key)
