"""Live tensor storage, counted op by op: a dispatch mode that notes every storage an op
returns and forgets it when the storage is freed. Imports torch; only `--trace` uses it."""

from __future__ import annotations

import itertools
import os
import site
import sys
import sysconfig
import weakref
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.utils.weak import WeakIdKeyDictionary

_SCALAR = torch.ops.aten._local_scalar_dense.default
_TORCH = os.path.dirname(torch.__file__)
_DISPATCH = tuple(os.path.join(_TORCH, part) for part in (
    "_subclasses", "utils/_python_dispatch.py", "_tensor.py", "_ops.py", "overrides.py",
    "_prims_common", "_decomp", "_refs", "_compile.py", "_dynamo", "_library",
    "utils/_device.py")) + (os.path.dirname(__file__),)
"""The code between a read of a tensor's value and the code that asked for it: fake tensor
and dispatch machinery, and this tracker."""
_INSTALLED = tuple({path for key in ("purelib", "platlib", "stdlib")
                    if (path := sysconfig.get_paths().get(key))} | set(site.getsitepackages())
                   | {site.getusersitepackages()})
"""Installed code, even in a virtual environment inside the script's folder: reads there
(Adam's step count) are a library's."""
_MKLDNN_RNN = torch.ops.aten.mkldnn_rnn_layer.default
_FUSED_ATTENTION = frozenset(
    getattr(torch.ops.aten, name).default for name in (
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention")
    if hasattr(torch.ops.aten, name))
"""The kernels scaled_dot_product_attention uses when it does not materialise the attention
matrix. Its math path has no op of its own: a call during which none of these ran took it."""

MKLDNN_RNN_WORKSPACE = (61, 41)
"""oneDNN's LSTM training workspace, in bytes per (time step x batch x hidden) and per
(batch x hidden) for float32, fitted to the real kernel (within 1% on 7 shapes); the fake
kernel reports it as empty."""

SNAPSHOT_STEP = 1.002
"""A new peak is snapshotted (for its breakdown) only when it beats the last snapshot by
0.2%: exact enough for the parts, and cheap on models with thousands of live tensors."""


class StorageTracker(TorchDispatchMode):
    """Counts bytes of live storages. With `fake` set, `.item()` and friends answer 1 (False
    for booleans) so a script's logging and optimizers' step counters run on fake tensors
    instead of stopping; 1 rather than 0 keeps Adam's bias correction from dividing by zero."""

    def __init__(self, fake: bool) -> None:
        super().__init__()
        self.fake = fake
        self.keys: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self.live: dict[int, int] = {}
        self.counter = itertools.count(1)
        self.current = 0
        self.peak = 0
        self.snapshot: dict[int, int] = {}
        self.snapshot_total = 0
        self.saved: set[int] = set()
        self.grads: set[int | None] = set()
        self.fused_attention = 0  # calls of _FUSED_ATTENTION kernels, read around each SDPA call
        self.faked_scalars = 0  # values the script's own code read out of fake tensors
        self.user_dir: str | None = None  # the script's folder: reads from there are counted
        self.phase = "forward"  # what the step is running (trace.py moves it on)
        self.peak_phase = "forward"  # what it was running at the step's peak

    def _read_by_script(self) -> bool:
        """Whether the code asking for the value is the script's (`int(n)`, `loss.item()`),
        not a library's (Adam reads its step count on every step, a sampler its indices)."""
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(_DISPATCH):
            frame = frame.f_back
        if frame is None or self.user_dir is None:
            return False
        file = frame.f_code.co_filename
        return file.startswith(self.user_dir) and not file.startswith(_INSTALLED)

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        if self.fake and func is _SCALAR:
            self.faked_scalars += self._read_by_script()
            dtype = args[0].dtype
            return False if dtype == torch.bool else 1.0 if dtype.is_floating_point else 1
        out = func(*args, **(kwargs or {}))
        if func in _FUSED_ATTENTION:
            self.fused_attention += 1
        if self.fake and func is _MKLDNN_RNN:
            steps, batch, hidden = out[0].shape[0], out[0].shape[1], out[1].shape[-1]
            per_step, per_row = MKLDNN_RNN_WORKSPACE
            scale = out[0].element_size() / 4
            self.track(out[3], int((per_step * steps + per_row) * batch * hidden * scale))
        for value in tree_flatten(out)[0]:
            if isinstance(value, torch.Tensor):
                self.track(value)
        return out

    def key(self, tensor: torch.Tensor) -> int | None:
        try:
            return self.keys.get(tensor.untyped_storage())
        except (RuntimeError, NotImplementedError):
            return None

    def track(self, tensor: torch.Tensor, size: int | None = None) -> None:
        try:
            storage = tensor.untyped_storage()
        except (RuntimeError, NotImplementedError):
            return
        if storage in self.keys:
            return
        key = next(self.counter)
        size = storage.nbytes() if size is None else size
        self.keys[storage] = key
        self.live[key] = size
        weakref.finalize(storage, self._free, key)
        self.current += size
        if self.current > self.peak:
            self.peak = self.current
            self.peak_phase = self.phase
            if self.current > self.snapshot_total * SNAPSHOT_STEP:
                self.snapshot = dict(self.live)
                self.snapshot_total = self.current

    def _free(self, key: int) -> None:
        self.current -= self.live.pop(key, 0)

    def reset_peak(self) -> None:
        """Start a new step: its peak starts from what is live now."""
        self.peak = self.current
        self.peak_phase = self.phase
        self.snapshot = dict(self.live)
        self.snapshot_total = 0

    def pack(self, tensor: torch.Tensor) -> torch.Tensor:
        """A saved-tensors hook: note that autograd keeps this storage for backward."""
        key = self.key(tensor)
        if key is not None:
            self.saved.add(key)
        return tensor
