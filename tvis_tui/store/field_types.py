"""Type checks for the fields of stored records.

A run received from someone else, or damaged on disk, may hold a well-formed map whose
fields have the wrong types: a name that is a number, a step that is text. The reader
checks every field against its record class's annotation as it decodes it, so that such a
run is the reader's one-line "corrupt run" error, and a screen never meets text where it
formats a number, nor a key part that does not fit its key.

The checks follow the annotations, by exact type as MessagePack decodes values: `int`
(never a bool), `float` (an int too), `str`, `bool`, `None` in a union, `tuple[X, ...]`,
`tuple[X, Y]`, `list[X]`, `dict[K, V]`, a record class (decoded before it is checked), and
`U16`/`U32`/`U64`: an int that fits a key part of that size. A `dict` of names to
annotations (`Fields`) checks a free-form map's known keys only: the `extra` maps grow
with the recorder, and a reader ignores keys it does not know. `Later(lambda: X)` names a
map that holds maps of its own kind.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Callable, Union

from tvis_tui.text import cut

Check = Callable[[Any], bool]
Fields = dict[str, Any]
"""Names to annotations: a map whose listed keys, where present, hold those types."""


class _KeyBytes:
    def __init__(self, size: int) -> None:
        # One below the key part's largest value: readers scan from `n + 1`, which must fit too.
        self.limit = (1 << (8 * size)) - 1


U16 = Annotated[int, _KeyBytes(2)]
U32 = Annotated[int, _KeyBytes(4)]
U64 = Annotated[int, _KeyBytes(8)]
"""Ints that are part of a store key (a call's seq, a step, a line): they must fit it."""


class Later:
    """An annotation given before it is defined: a value whose items are values."""

    def __init__(self, hint: Callable[[], Any]) -> None:
        self.hint = hint
        self._check: Check | None = None

    def __call__(self, value: Any) -> bool:
        if self._check is None:
            self._check = check_for(self.hint())
        return self._check(value)


def check_for(hint: Any) -> Check:
    """A check of a value against an annotation (or a `Fields` map)."""
    if isinstance(hint, Later):
        return hint
    if isinstance(hint, dict):
        return _map_of(hint)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        return _in_key(args[1].limit)
    if origin in (Union, types.UnionType):
        checks = [check_for(a) for a in args]
        return lambda v: any(c(v) for c in checks)
    if origin is tuple or origin is list:
        return _sequence_of(args)
    if origin is dict:
        key, value = check_for(args[0]), check_for(args[1])
        return lambda v: isinstance(v, dict) and all(key(k) and value(x) for k, x in v.items())
    return _SIMPLE.get(hint) or (lambda v: isinstance(v, hint))


def exact_types(hint: Any) -> frozenset[type] | None:
    """The types a value of `hint` may have, when its type alone decides (`float | None`:
    float, int, NoneType), else None. MessagePack decodes to exact types (a bool is never an
    int there), so a set lookup does the check: records are decoded by the thousand."""
    origin = typing.get_origin(hint)
    union = origin in (Union, types.UnionType)
    if hint is Any or origin is not None and not union:
        return None
    parts = typing.get_args(hint) if union else (hint,)
    found: set[type] = set()
    for part in parts:
        if not isinstance(part, type) or typing.get_origin(part) is not None:
            return None
        found |= {float, int} if part is float else {part}
    return frozenset(found)


def fields_check(cls: type) -> tuple[dict[str, frozenset[type]], dict[str, Check]]:
    """The checks of a record class's fields, from its annotations: the allowed types of
    each field whose type alone decides (`exact_types`), and a check of each other field."""
    hints = {name: hint for name, hint in typing.get_type_hints(cls, include_extras=True).items()
             if typing.get_origin(hint) is not typing.ClassVar}
    exact = {name: exact_types(hint) for name, hint in hints.items()}
    return ({name: found for name, found in exact.items() if found is not None},
            {name: check_for(hint) for name, hint in hints.items() if exact[name] is None})


def record_of(schema: Fields, also: Callable[[dict[str, Any]], None] | None = None,
              within: str = "") -> Callable[[Any], dict[str, Any]]:
    """Makes a decoded map a record of `schema`, for `RunReader.decode`: TypeError (the
    reader's "corrupt run") naming the first key whose value does not fit (after `within`,
    the field that holds the map: "extra."); then `also`, a further check, runs on it."""
    checks = {key: check_for(hint) for key, hint in schema.items()}

    def record(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise TypeError(f"a {type(data).__name__}, not a map")
        for key, check in checks.items():
            if key in data and not check(data[key]):
                raise wrong_type(within + key, data[key])
        if also is not None:
            also(data)
        return data

    return record


def wrong_type(name: str, value: Any) -> TypeError:
    return TypeError(f"field {name!r} holds {type(value).__name__} {cut(repr(value), 40)}")


_SIMPLE: dict[Any, Check] = {
    Any: lambda v: True,
    type(None): lambda v: v is None,
    bool: lambda v: type(v) is bool,
    int: lambda v: type(v) is int,
    float: lambda v: type(v) is float or type(v) is int,
    str: lambda v: type(v) is str,
}


def _in_key(limit: int) -> Check:
    return lambda v: type(v) is int and 0 <= v < limit


def _sequence_of(args: tuple[Any, ...]) -> Check:
    if len(args) == 2 and args[1] is Ellipsis or len(args) == 1:
        each = check_for(args[0])
        return lambda v: isinstance(v, (list, tuple)) and all(map(each, v))
    checks = [check_for(a) for a in args]
    return lambda v: (isinstance(v, (list, tuple)) and len(v) == len(checks)
                      and all(c(x) for c, x in zip(checks, v)))


def _map_of(known: Fields) -> Check:
    checks = {name: check_for(hint) for name, hint in known.items()}
    return lambda v: isinstance(v, dict) and all(c(v[k]) for k, c in checks.items() if k in v)
