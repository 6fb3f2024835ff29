"""The names a frame of the script holds, read without changing them.

On Python 3.12 a comprehension runs inline in the code around it (PEP 709), its
variable a hidden fast local of that frame. Reading `frame.f_locals` of a module or
class body makes CPython 3.12 copy the locals dict back into the frame after the frame's
next trace callback, and the dict leaves the hidden variable out: a comprehension that
is running then sees its variable become None (`RuntimeWarning: assigning None to
unbound local 'w'`, then a TypeError in the script's own line). Function frames keep
hidden variables in the dict, so reading theirs is safe; 3.11 has no inlining, and 3.13
reads locals through a proxy that writes nothing back (PEP 667).
"""

from __future__ import annotations

import sys
from inspect import CO_OPTIMIZED
from types import FrameType, MappingProxyType
from typing import Any, Mapping

_WRITES_BACK = sys.version_info[:2] == (3, 12)

_NOTHING: Mapping[str, Any] = MappingProxyType({})


def frame_locals(frame: FrameType) -> Mapping[str, Any]:
    """`frame.f_locals`, but where reading it could change what a comprehension sees (a
    module or class body on 3.12 that holds one): a module's globals, which are its
    locals as the script runs, or nothing for a class body."""
    code = frame.f_code
    if _WRITES_BACK and code.co_nlocals and not code.co_flags & CO_OPTIMIZED:
        return frame.f_globals if code.co_name == "<module>" else _NOTHING
    return frame.f_locals
