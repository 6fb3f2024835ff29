"""Warnings about the line that called torch name the script's line, not tvis's wrapper.

torch warns about its caller (`F.mse_loss` warns with `stacklevel=2` that the target's
shape broadcasts); while tvis wraps `F.mse_loss`, that caller is a recorder frame, and the
script's own line, the one its author must fix, went unnamed. Python 3.11 has no
`skip_file_prefixes`, so while recording `warnings.warn` is wrapped: a warning's
stacklevel counts no recorder frame, and one that would land on a recorder frame moves out
to the first frame past them. A warning
about its own line (stacklevel 1) is left alone. A caller that passes `skip_file_prefixes`
(3.12+) gets the recorder's folder added to them, which does the same.

TorchScript compiles `warnings.warn` calls to its own op only for the function it knows:
the wrapper is registered as that op too, or scripting a module that warns would fail.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

from tvis_tui.record.tvis_frames import TVIS_DIR, is_runpy_file, is_tvis_file


_WRAPPERS: list[Callable[..., None]] = []
"""Every wrapper made, kept alive: TorchScript's table of builtins is keyed by id(), and a
module that imported `warn` from `warnings` while recording holds one after the undo."""


def install() -> Callable[[], None]:
    """Wrap `warnings.warn`; returns the undo."""
    original = warnings.warn

    def warn(message: Any, category: Any = None, stacklevel: int = 1, source: Any = None,
             **kwargs: Any) -> None:
        if "skip_file_prefixes" in kwargs:
            kwargs["skip_file_prefixes"] = (*kwargs["skip_file_prefixes"], TVIS_DIR)
            original(message, category, max(stacklevel, 1) + 1, source, **kwargs)
        else:
            original(message, category, _past_recorder(stacklevel) + 1, source, **kwargs)

    warn.__wrapped__ = original  # type: ignore[attr-defined]
    _WRAPPERS.append(warn)
    _script_as_builtin(warn)
    warnings.warn = warn

    def undo() -> None:
        if warnings.warn is warn:  # something wrapped it after us: leave theirs
            warnings.warn = original
    return undo


def _script_as_builtin(warn: Callable[..., None]) -> None:
    """TorchScript compiles `warnings.warn(...)` to `aten::warn`: the wrapper must compile to it too."""
    try:
        from torch.jit._builtins import _register_builtin
        _register_builtin(warn, "aten::warn")
    except Exception:  # torch moved it: scripting warning code fails under tvis, nothing else
        pass


def _past_recorder(stacklevel: int) -> int:
    """`stacklevel`, counted from the caller of `warn` (0 and below mean the caller, as for
    the builtin), as if tvis's frames were not there: grown by tvis's frames between the
    caller and the frame it names (tvis's wrapper of backward() sits between a backward
    hook that warns and the script's `loss.backward()` line), and past those where it would
    land on one. A level past the script's top frame goes past every frame, as it would
    without tvis (python then names `sys:1`), not to tvis's frames that run the script."""
    if stacklevel < 2:
        return 1
    frame = sys._getframe(2)  # the caller of warn()
    level, left = 1, stacklevel - 1
    while left > 0 or _is_tvis(frame):
        frame = frame.f_back
        level += 1
        if frame is None or _is_tvis(frame) and _nothing_but_tvis_above(frame):
            return PAST_THE_TOP
        if not _is_tvis(frame):
            left -= 1
    return level


PAST_THE_TOP = 1 << 20
"""A stacklevel past any stack: `warnings.warn` then names `sys:1`."""


def _is_tvis(frame: Any) -> bool:
    return frame is not None and (is_tvis_file(frame.f_code.co_filename)
                                  or is_runpy_file(frame.f_code.co_filename))


def _nothing_but_tvis_above(frame: Any) -> bool:
    """Whether `frame` (tvis's) and every frame above it are those that run the script,
    above its top frame: tvis's, runpy's (`python -m tvis_tui.cli`) and the process's
    first, the `tvis` console script's."""
    while frame.f_back is not None:
        if not _is_tvis(frame):
            return False
        frame = frame.f_back
    return True
