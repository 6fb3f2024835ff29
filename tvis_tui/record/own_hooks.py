"""Closing a module call after the module's own forward hooks, which may replace its output.

torch runs the global forward hooks (tvis's) before a module's own (`register_forward_hook`
on it): a hook of the script's that returns a new output (a mask, steering, an adapter)
would make tvis record the output before the change, not what the call returned to its
caller. The same goes for global forward hooks the script registers (after tvis's). For a
module that has hooks of its own, or any module while the script has global forward hooks,
tvis adds one more hook of its own to the module, last, for the time its call runs, and
closes the call there; the global hook leaves it alone. Modules without hooks of their own
in a script without global hooks (nearly all) cost nothing here. The
call's inputs stay those its caller passed (the global pre-hook runs before the module's
own pre-hooks, which may replace them): the call is what the caller saw, hooks included,
and its duration includes them.

Whether the call failed: torch runs the hooks registered with `always_call` (tvis's) when
the forward or a hook raises, with the same arguments; the added hook tells that path by
the exception being handled, new since the global hook ran (a forward called inside the
script's own `except` block sees that block's exception at both).

The added hook is registered as a call begins and removed as its last open call ends, so
nothing of tvis stays on the script's modules (a `copy.deepcopy(model)` between calls
copies no tvis hook).
"""

from __future__ import annotations

import sys
from typing import Any, Callable

import torch
from torch.nn.modules import module as module_module


class AfterOwnHooks:
    """The closing hooks tvis added to modules whose calls are open now."""

    def __init__(self, closer: Callable[..., Any]) -> None:
        self._closer = closer  # called as a forward hook with kwargs, also on errors
        self._held: dict[int, tuple[Any, int]] = {}  # id(module) -> (handle, open calls)
        # id(module) -> for each of its calls whose global hook ran: the exception handled then
        self._handled: dict[int, list[BaseException | None]] = {}

    def enter(self, module: torch.nn.Module) -> None:
        """A call of `module` begins: when hooks besides tvis's run after its forward,
        close it after them."""
        hooks = module._forward_hooks
        held = self._held.get(id(module))
        if held is None and not hooks and len(module_module._global_forward_hooks) <= 1:
            return  # tvis's global hook is the only one
        handle, calls = held if held is not None else (None, 0)
        if handle is None or next(reversed(hooks), None) != handle.id:
            # Hooks registered since the last call: be the last again.
            if handle is not None:
                handle.remove()
            handle = module.register_forward_hook(self._closer, with_kwargs=True, always_call=True)
        self._held[id(module)] = (handle, calls + 1)

    def closes(self, module: torch.nn.Module) -> bool:
        """Whether the call of `module` ending now is closed after its own hooks."""
        return id(module) in self._held

    def global_hook_ran(self, module: torch.nn.Module, failed: bool) -> None:
        """tvis's global hook saw the call end (`failed`: on torch's path for a forward
        that raised) and left it to the added hook."""
        self._handled.setdefault(id(module), []).append(None if failed else sys.exc_info()[1])

    def error(self, module: torch.nn.Module) -> BaseException | None:
        """At the added hook: the exception the call ends with, None if it returned."""
        handled = self._handled.get(id(module))
        before = handled.pop() if handled else None
        now = sys.exc_info()[1]
        return now if now is not None and now is not before else None

    def leave(self, module: torch.nn.Module) -> None:
        """A call closed by the added hook ended; the hook goes with the module's last."""
        held = self._held.get(id(module))
        if held is None:
            return
        handle, calls = held
        if calls > 1:
            self._held[id(module)] = (handle, calls - 1)
        else:
            handle.remove()
            del self._held[id(module)]
            self._handled.pop(id(module), None)

    def remove_all(self) -> None:
        """Recording ends: take every added hook off (calls an exception left open)."""
        for handle, _ in self._held.values():
            handle.remove()
        self._held.clear()
        self._handled.clear()
