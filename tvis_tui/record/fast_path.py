"""Keeping torch's no-hooks shortcut's behaviour while tvis's global hooks are in place.

torch calls a module with no hooks, while no global hooks exist, straight through
(`Module._call_impl`'s shortcut); with hooks it reads the forward hooks after `forward`
returns. tvis's global hooks always take the second path, so a forward hook the script
registers from inside a running call (a module hooking itself on its first forward, a
global hook registered inside a model's forward) would run at the end of that very call
under tvis, where without tvis it first runs on the next one: training would change.

The calls that would have taken the shortcut are noted as they start (the frame each runs
in, Module._call_impl's); a forward hook registered while such calls run is wrapped in a
`NotForRunningCalls` that passes over those calls and is the script's hook for every other.
"""

from __future__ import annotations

import functools
import sys
import threading
from types import FrameType
from typing import Any, Callable

import torch
from torch.nn.modules import module as module_module

from tvis_tui.record.calls import MODULE_CALL_CODE, on_stack, running_frame


def _calling_frame(here: FrameType | None) -> FrameType | None:
    """The Module._call_impl frame running the hooks that call `here`'s function."""
    return running_frame(here, MODULE_CALL_CODE)


def _identity(value: Any) -> Any:
    return value


class NotForRunningCalls:
    """A forward hook of the script's, passed over by the calls that ran when it was
    registered and would have taken torch's shortcut."""

    def __init__(self, hook: Callable[..., Any], frames: list[FrameType]) -> None:
        functools.update_wrapper(self, hook)  # type: ignore[arg-type]
        self.hook = hook
        self._frames = frames

    def __call__(self, module: Any, *rest: Any) -> Any:
        if self._frames and _calling_frame(sys._getframe(1)) in self._frames:
            return None  # torch's shortcut would not have called it
        return self.hook(module, *rest)

    def forget_ended(self, here: FrameType) -> bool:
        """Let go of the frames of calls that are over (no frame is kept alive past its
        call); True while some are still running."""
        self._frames = [frame for frame in self._frames if on_stack(frame, here)]
        return bool(self._frames)

    def __reduce__(self) -> tuple[Callable[[Any], Any], tuple[Callable[..., Any]]]:
        return _identity, (self.hook,)  # a copy or a pickle holds the script's hook itself


class _Running(threading.local):
    def __init__(self) -> None:
        self.calls: list[tuple[int, FrameType]] = []  # (id(module), its call's frame)
        self.wrappers: list[NotForRunningCalls] = []  # holding frames of calls that may still run


class FastPath:
    """Notes the calls that would have taken torch's shortcut; wraps the script's forward
    hooks registered while they run. `mine()` is true during tvis's own registrations."""

    def __init__(self, mine: Callable[[], bool]) -> None:
        self._mine = mine
        self._running = _Running()

    def call_starts(self, module: torch.nn.Module, frame: FrameType | None) -> None:
        """From tvis's global pre-hook, with the frame the call runs in (tvis's own global
        hooks are one of each kind)."""
        if frame is None:  # not run by Module._call_impl: nothing to emulate
            return
        calls = self._running.calls
        while calls and not on_stack(calls[-1][1], frame):
            calls.pop()  # left by an exception no hook saw (a Ctrl-C the script caught)
        if self._running.wrappers:  # a call that ended has run all its hooks by now
            self._running.wrappers = [w for w in self._running.wrappers if w.forget_ended(frame)]
        if (module._forward_hooks or module._forward_pre_hooks or module._backward_hooks
                or module._backward_pre_hooks or len(module_module._global_forward_hooks) > 1
                or len(module_module._global_forward_pre_hooks) > 1
                or module_module._global_backward_hooks or module_module._global_backward_pre_hooks):
            return
        calls.append((id(module), frame))

    def call_ends(self, module: torch.nn.Module) -> None:
        """From tvis's global forward hook: the frame is let go as the call ends."""
        calls = self._running.calls
        if calls and calls[-1][0] == id(module):
            calls.pop()

    def install(self) -> Callable[[], None]:
        """Wrap the two ways to register a forward hook; returns the undo."""
        method = torch.nn.Module.register_forward_hook
        function = module_module.register_module_forward_hook

        @functools.wraps(method)
        def register_forward_hook(module: torch.nn.Module, hook: Callable[..., Any], **kwargs: Any) -> Any:
            return method(module, self._wrapped(hook, id(module)), **kwargs)

        @functools.wraps(function)
        def register_module_forward_hook(hook: Callable[..., Any], **kwargs: Any) -> Any:
            return function(self._wrapped(hook, None), **kwargs)

        torch.nn.Module.register_forward_hook = register_forward_hook  # type: ignore[method-assign]
        module_module.register_module_forward_hook = register_module_forward_hook

        def undo() -> None:
            torch.nn.Module.register_forward_hook = method  # type: ignore[method-assign]
            module_module.register_module_forward_hook = function
        return undo

    def _wrapped(self, hook: Callable[..., Any], owner: int | None) -> Callable[..., Any]:
        """`hook`, or a NotForRunningCalls when calls it would reach are running now
        (`owner`: the module it is registered on; None: a global hook, for every module)."""
        if self._mine() or not self._running.calls:
            return hook
        here = sys._getframe(2)
        running = [(m, f) for m, f in self._running.calls if on_stack(f, here)]
        self._running.calls = running
        frames = [f for m, f in running if owner is None or m == owner]
        if not frames:
            return hook
        wrapper = NotForRunningCalls(hook, frames)
        self._running.wrappers.append(wrapper)
        return wrapper
