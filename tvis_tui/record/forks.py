"""Telling the recording process from its forks (DataLoader workers) without a system call.

Every hook asks whether it runs in the process that records: a fork must never touch the
run's LMDB environment. `os.getpid()` is a system call each time (glibc stopped caching
it), and asked in every hook it took ~6% of the recorder's time on a model of small
layers. Instead a fork handler counts forks in the child: a process is the one that
recorded if its `generation()` is the one it had then.
"""

from __future__ import annotations

import os

_generation = 0


def _forked_child() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_forked_child)


def generation() -> int:
    """Forks between the interpreter's start and this process (0 in the first one)."""
    return _generation
