"""Plain-text helpers shared by the recorder, the commands and the screens."""

from __future__ import annotations


def cut(text: str, width: int) -> str:
    """`text` at most `width` characters long, an ellipsis ending it where it was cut."""
    return text if len(text) <= width else text[:width - 1] + "…"
