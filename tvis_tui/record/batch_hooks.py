"""The recorder's hook on batches: the DataLoader iterator's `__next__`, as a call of the
"data" phase whose outputs are the collated batch (data.py records the samples in it).

Drawing a batch from the loader that fed the last step ends that step where its loop's
head went unseen.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable

import torch

from tvis_tui.record.calls import OpenCall
from tvis_tui.record.hook_base import HookBase
from tvis_tui.record.slots import leaves


class BatchHooks(HookBase):
    def _next_batch(self, original: Callable[..., Any], iterator: Any) -> Any:
        if torch.compiler.is_compiling() or not self._active():
            return original(iterator)
        self._guard(self.log.close_left, sys._getframe(1))
        if self.steps.pending is not None and self.steps.fed_by(id(iterator)):
            self._guard(self.steps.end_pending)  # the next batch: its loop head went unseen
        self._stop_if_done()
        call = self._guard(self._open_batch, iterator, sys._getframe(2))
        try:
            batch = self.functions.untraced(original, iterator)
        except StopIteration:
            if call is not None:
                self._guard(self._close_batch, call, time.perf_counter_ns(), None, True)
            raise
        except BaseException as exc:
            self._close_failed(call, exc)
            raise
        if call is not None:
            self._guard(self._close_batch, call, time.perf_counter_ns(), batch, False)
        return batch

    def _open_batch(self, iterator: Any, frame: Any) -> OpenCall:
        self.steps.note_batch(id(iterator))
        dataset = getattr(iterator, "_dataset", None)
        return self.log.open(kind="data", name="DataLoader", type_=type(dataset).__name__,
                             phase="data", owner=id(iterator), call_site=self.sites.call_site(frame),
                             def_site=self.sites.def_site(type(dataset), "__getitem__"))

    def _close_batch(self, call: OpenCall, ended: int, batch: Any, exhausted: bool) -> None:
        if self.log.innermost(call.owner) is None:
            return
        if exhausted:
            self.log.close(call, ended, extra={"exhausted": True})
        else:
            self.log.close(call, ended, leaves(batch, "batch"))
