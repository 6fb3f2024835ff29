"""Closing a module call after the script's forward hooks, which may replace its output.

torch runs the global forward hooks (tvis's) before a module's own (`register_forward_hook`
on it): a hook of the script's that returns a new output (a mask, steering, an adapter)
would make tvis record the output before the change, not what the call returned to its
caller. The same goes for global forward hooks the script registers (after tvis's). For a
recorded call of a module that has hooks of its own, or of any module while the script
has global forward hooks, tvis adds one more hook to the module, last, for the time the
call runs, and closes the call there; the global hook leaves it alone. Modules without
hooks of their own in a script without global hooks (nearly all) cost nothing here.

The call's inputs stay those its caller passed (the global pre-hook runs before the
module's own pre-hooks, which may replace them): the call is what the caller saw, hooks
included, and its duration includes them.

Known limits: a hook the script registers while the call runs (in a pre-hook, in
`forward`) runs after tvis's, and its replacement is not seen. While the call runs, the
module's `_forward_hooks` holds tvis's hook too, and so does a `copy.deepcopy(module)`
made then (the same hook object, which does nothing for any other module); pickling the
module then stores an inert hook in tvis's place (loading it needs tvis installed). A
script that clears the hooks in `forward` takes tvis's off too: the global hook closes the
call then. (tvis's hooks being global, torch never takes its no-hooks shortcut: what
that would change for a hook registered inside `forward`, fast_path.py undoes.)

Whether the call failed: torch runs the hooks registered with `always_call` (tvis's) when
the forward or a hook raises an Exception, with the same arguments; the added hook tells
that path by the exception being handled, new since the global hook ran (a forward called
inside the script's own `except` block sees that block's exception at both). A
BaseException (Ctrl-C) caught by the script runs no hook: the call stays open until the
next call starts or the user function around it returns, whichever is first (calls.py,
functions.py), and the added hook stays on the module until its next call after that.
An added hook that is not its module's last when its call ends (the script added one
during the call) is taken off at the next module call: removed then, it would break
torch's loop over the hooks of a forward that raised.

Calls are kept per thread: two threads calling one module close their own calls. What is
added is removed as the module's last open call ends, and at the end of recording.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Callable

import torch
from torch.nn.modules import module as module_module

from tvis_tui.record.calls import OpenCall


class AfterOwnHooks:
    """The hooks tvis added to modules whose recorded calls are open now, and those calls."""

    def __init__(self, closer: Callable[[torch.nn.Module, tuple, dict, Any, BaseException | None], None],
                 stack: Callable[[], list[OpenCall]], active: Callable[[], bool]) -> None:
        self._closer = closer  # closes a call (module, args, kwargs, result, error)
        self._stack = stack  # this thread's open calls (calls.py)
        self._active = active  # whether calls are recorded now (not in tvis's own work)
        self._added: dict[int, tuple[Any, _AddedHook, int]] = {}  # id(module) -> (handle, hook, calls)
        # (thread, id(module)) -> its managed calls, innermost last: [call, exception handled
        # when tvis's global hook ran (_FAILED: on torch's path for a raising forward)]
        self._calls: dict[tuple[int, int], list[list[Any]]] = {}
        self._lock = threading.RLock()  # threads calling one module share its added hook
        # Added hooks to take off at the next call: removing one that is not its module's
        # last hook while torch loops over the hooks (for a forward that raised) breaks the loop.
        self._retired: list[Any] = []

    def enter(self, module: torch.nn.Module, call: OpenCall) -> None:
        """`call` of `module` began: when hooks besides tvis's run after its forward, it is
        closed after them."""
        if self._retired:
            self._take_off_retired()
        if (not module._forward_hooks and len(module_module._global_forward_hooks) <= 1
                and id(module) not in self._added):
            return  # tvis's global hook is the only one
        key = (threading.get_ident(), id(module))
        with self._lock:
            if key in self._calls:
                self._drop_stale(module, key)
            try:
                self._add_last(module)
            except RuntimeError:  # a ScriptModule takes no hooks: closed before them, as before
                return
            handle, hook, calls = self._added[id(module)]
            self._added[id(module)] = (handle, hook, calls + 1)
            self._calls.setdefault(key, []).append([call, None])

    def _add_last(self, module: torch.nn.Module) -> None:
        handle, hook, calls = self._added.get(id(module), (None, None, 0))
        if handle is not None and next(reversed(module._forward_hooks), None) == handle.id:
            return
        if handle is not None:  # hooks registered since: be the last again
            handle.remove()
        hook = hook or _AddedHook(self, id(module))
        handle = module.register_forward_hook(hook, with_kwargs=True, always_call=True)
        self._added[id(module)] = (handle, hook, calls)

    def closes(self, module: torch.nn.Module) -> bool:
        """Whether the recorded call of `module` ending now on this thread is closed by the
        added hook (not when the script took it off, clearing the module's hooks)."""
        key = (threading.get_ident(), id(module))
        if key not in self._calls:
            return False
        with self._lock:
            if self._added[id(module)][0].id in module._forward_hooks:
                return True
            self._pop(key)
            self._release(module)
            return False

    def global_hook_ran(self, module: torch.nn.Module, failed: bool) -> None:
        """tvis's global hook saw the call end (`failed`: on torch's path for a forward
        that raised) and left it to the added hook."""
        calls = self._calls.get((threading.get_ident(), id(module)))
        if calls:
            calls[-1][1] = _FAILED if failed else sys.exc_info()[1]

    def hook_ran(self, module: torch.nn.Module, args: tuple, kwargs: dict, result: Any) -> None:
        """The added hook: close the innermost managed call of `module` on this thread."""
        key = (threading.get_ident(), id(module))
        if key not in self._calls or not self._active():
            return  # a call tvis does not record (inside its own work, say)
        with self._lock:
            _, handled = self._pop(key)
        now = sys.exc_info()[1]
        error = now if now is not None and now is not handled else None
        try:
            self._closer(module, args, kwargs, result, error)
        finally:
            with self._lock:
                self._release(module)

    def _pop(self, key: tuple[int, int]) -> list[Any]:
        calls = self._calls[key]
        entry = calls.pop()
        if not calls:
            del self._calls[key]
        return entry

    def _drop_stale(self, module: torch.nn.Module, key: tuple[int, int]) -> None:
        """Forget calls closed without the added hook (a BaseException passed them)."""
        open_calls = self._stack()
        calls = self._calls[key]
        for entry in [e for e in calls if not any(c is e[0] for c in open_calls)]:
            calls.remove(entry)
            self._release(module)
        if not calls:
            del self._calls[key]

    def _release(self, module: torch.nn.Module) -> None:
        handle, hook, calls = self._added[id(module)]
        if calls > 1:
            self._added[id(module)] = (handle, hook, calls - 1)
        else:
            hook.owner = None  # a copy made meanwhile holds it: inert from now on
            del self._added[id(module)]
            if next(reversed(module._forward_hooks), None) == handle.id:
                handle.remove()  # the last: safe even inside torch's loop over them
            else:  # hooks registered during the call come after it
                self._retired.append(handle)

    def _take_off_retired(self) -> None:
        with self._lock:
            retired, self._retired = self._retired, []
        for handle in retired:
            handle.remove()

    def remove_all(self) -> None:
        """Recording ends: take every added hook off (calls an exception left open)."""
        with self._lock:
            for handle, hook, _ in self._added.values():
                handle.remove()
                hook.owner = None
            self._added.clear()
            self._calls.clear()
        self._take_off_retired()


_FAILED = object()


class _AddedHook:
    """The hook added to one module. Inert for any other module (a copy made while the call
    ran holds this same object) and once recording ended; pickled, an inert hook."""

    __slots__ = ("owner", "_module_id")

    def __init__(self, owner: AfterOwnHooks, module_id: int) -> None:
        self.owner: AfterOwnHooks | None = owner
        self._module_id = module_id

    def __call__(self, module: torch.nn.Module, args: tuple, kwargs: dict, result: Any) -> None:
        owner = self.owner
        if owner is not None and id(module) == self._module_id:
            owner.hook_ran(module, args, kwargs, result)
        return None  # the output is never changed

    def __deepcopy__(self, memo: dict) -> "_AddedHook":
        return self

    def __reduce__(self) -> tuple[Any, tuple]:
        return _inert_hook, ()


class _InertHook:
    def __call__(self, *args: Any) -> None:
        return None


def _inert_hook() -> _InertHook:
    return _InertHook()
