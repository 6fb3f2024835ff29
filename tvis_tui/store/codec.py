"""Value and key encodings of the store. MessagePack only: decoding never executes code.

Keys are big-endian unsigned integers so that LMDB's byte order is numeric order.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import msgpack
import numpy as np

from tvis_tui.errors import TvisError

_U64 = struct.Struct(">Q")
_U32 = struct.Struct(">I")
_SLOT = struct.Struct(">QBH")  # call seq, role code, slot index
_SITE = struct.Struct(">IIQ")  # file id, line, call seq
_CHILD = struct.Struct(">QQ")  # parent seq, child seq
_PHASE = struct.Struct(">IH")  # step, ordinal within the step


def pack(obj: Any) -> bytes:
    try:
        return msgpack.packb(obj, use_bin_type=True)
    except UnicodeEncodeError:  # text holding a lone surrogate: a non-UTF-8 file name
        return msgpack.packb(_encodable(obj), use_bin_type=True)


def text(s: str) -> bytes:
    """`s` as UTF-8, a lone surrogate escaped (`_encodable`)."""
    try:
        return s.encode("utf-8")  # nearly always: encoded once
    except UnicodeEncodeError:
        return _encodable(s).encode("utf-8")


def _encodable(obj: Any) -> Any:
    """`obj` with every string UTF-8 can hold: a byte that `os.fsdecode` escaped
    (`img_\\udcff.png`, a file name on disk that is not UTF-8) written as `\\xff`, any
    other lone surrogate as `\\ud800`. An exception message or a path naming such a file
    must not cost the run its record (robustness sweep)."""
    if isinstance(obj, str):
        try:
            obj.encode("utf-8")
            return obj
        except UnicodeEncodeError:
            try:
                return obj.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                return obj.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(obj, dict):
        return {_encodable(k): _encodable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_encodable(v) for v in obj]
    return obj


def unpack(data: bytes) -> Any:
    # ext types come back as msgpack.ExtType objects: inert data, never code.
    return msgpack.unpackb(data, raw=False, strict_map_key=False)


def field_starting(field: str, prefixes: list[str]) -> re.Pattern[bytes]:
    """A pattern found in a packed map (its bytes lowercased) whose string `field` may
    start with one of `prefixes` (lowercase): a scan tests it before decoding a record.
    It may find a map that does not (the bytes elsewhere), never misses one that does."""
    key = msgpack.packb(field)
    header = rb"(?:[\xa0-\xbf]|\xd9.|\xda..|\xdb....)"  # fixstr, str 8, str 16, str 32
    starts = b"|".join(re.escape(text(prefix)) for prefix in prefixes)
    return re.compile(re.escape(key) + header + b"(?:" + starts + b")", re.DOTALL)


class BadKey(TvisError):
    """A key of a damaged run that is not the size its database's keys are."""


def _parsed(layout: struct.Struct, key: bytes) -> tuple[int, ...]:
    try:
        return layout.unpack(key)
    except struct.error:
        raise BadKey(f"corrupt run (a key of {len(key)} bytes where {layout.size} belong)") from None


def array_dtype(name: str) -> np.dtype:
    """The little-endian dtype that stored values of dtype `name` are read as; TypeError
    for anything but the numeric kinds the recorder stores (an object array never)."""
    dtype = np.dtype(name).newbyteorder("<")
    if dtype.kind not in "biufc":
        raise TypeError(f"values of dtype {name!r}")
    return dtype


def u64(n: int) -> bytes:
    return _U64.pack(n)


def from_u64(key: bytes) -> int:
    return _parsed(_U64, key)[0]


def u32(n: int) -> bytes:
    return _U32.pack(n)


def from_u32(key: bytes) -> int:
    return _parsed(_U32, key)[0]


def slot_key(seq: int, role_code: int, index: int) -> bytes:
    return _SLOT.pack(seq, role_code, index)


def parse_slot_key(key: bytes) -> tuple[int, int, int]:
    return _parsed(_SLOT, key)  # type: ignore[return-value]


def site_key(file_id: int, line: int, seq: int) -> bytes:
    return _SITE.pack(file_id, line, seq)


def parse_site_key(key: bytes) -> tuple[int, int, int]:
    return _parsed(_SITE, key)  # type: ignore[return-value]


def child_key(parent: int, child: int) -> bytes:
    return _CHILD.pack(parent, child)


def parse_child_key(key: bytes) -> tuple[int, int]:
    return _parsed(_CHILD, key)  # type: ignore[return-value]


def phase_key(step: int, ordinal: int) -> bytes:
    return _PHASE.pack(step, ordinal)
