"""Plain-text helpers shared by the recorder, the commands and the screens."""

from __future__ import annotations


def cut(text: str, width: int) -> str:
    """`text` at most `width` characters long, an ellipsis ending it where it was cut."""
    return text if len(text) <= width else text[:width - 1] + "…"


def printable(text: str) -> str:
    """`text` with each control character written as Python writes it in a literal (`\\n`,
    `\\x1b`): a run or script named by someone else must not move the cursor, recolour
    the terminal or split a table row."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def without_ansi(text: str) -> str:
    """`text` without its terminal escape sequences (torch's `\x1b[1m` bold in an
    exception's message): a one-line summary shows them raw, and they count as width."""
    if "\x1b" not in text:
        return text
    from rich.text import Text  # rarely needed: not imported into a recorded script up front

    return Text.from_ansi(text).plain
