"""Reading past damaged records of the optional databases (samples, tokens, predictions,
per-line shapes), for a reader that keeps what it can: `tvis export`.

The TUI and the other readers stop at the first damaged record with its one-line reason:
they show one step at a time, and a run whose records they cannot trust is better closed.
An export is the whole run at once, and one damaged line record should not cost a user
every record after it.
"""

from __future__ import annotations

from typing import Callable, Iterable, Iterator, TypeVar

from tvis_tui.errors import TvisError

T = TypeVar("T")

OnDamage = Callable[[TvisError], None]
"""Told of each record left out, with the reader's one-line reason."""


def decoded(rows: Iterable[tuple[bytes, bytes]], decode: Callable[[bytes, bytes], T],
            on_damage: OnDamage | None = None) -> Iterator[T]:
    """`decode(key, value)` of each row. A damaged row raises its TvisError, or, with
    `on_damage`, is handed to it and left out."""
    for key, value in rows:
        try:
            yield decode(key, value)
        except TvisError as exc:
            if on_damage is None:
                raise
            on_damage(exc)
