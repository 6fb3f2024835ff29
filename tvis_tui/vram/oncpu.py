"""Running a CUDA training script on a machine without CUDA, for `--trace`: explicit CUDA
devices become the CPU, and autocast for CUDA becomes autocast for the CPU with the same
dtype. Imports torch; only used when CUDA is not available."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

import torch
from torch.overrides import TorchFunctionMode


def _is_cuda(value: Any) -> bool:
    if isinstance(value, str):
        return value.startswith("cuda")
    return isinstance(value, torch.device) and value.type == "cuda"


def _cpu(value: Any) -> Any:
    return "cpu" if _is_cuda(value) else value


class CudaAsCpu(TorchFunctionMode):
    """`tensor.cuda()`, `.to("cuda")` and `device="cuda"` stay on the CPU."""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = dict(kwargs or {})
        if func is torch.Tensor.cuda:
            return args[0]
        if "device" in kwargs:
            kwargs["device"] = _cpu(kwargs["device"])
        return func(*(_cpu(a) for a in args), **kwargs)


class _CpuAutocast(torch.autocast):
    def __init__(self, device_type: str = "cpu", dtype: Any = None, enabled: bool = True,
                 cache_enabled: Any = None) -> None:
        if _is_cuda(device_type):
            device_type, dtype = "cpu", dtype or torch.bfloat16
        super().__init__(device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


@contextlib.contextmanager
def cuda_as_cpu() -> Iterator[None]:
    """Within the block, CUDA device requests land on the CPU (no-op where CUDA exists)."""
    if torch.cuda.is_available():
        yield
        return
    saved = (torch.autocast, torch.amp.autocast, torch.nn.Module.cuda)
    torch.autocast = torch.amp.autocast = _CpuAutocast
    torch.nn.Module.cuda = lambda self, device=None: self
    try:
        with CudaAsCpu():
            yield
    finally:
        torch.autocast, torch.amp.autocast, torch.nn.Module.cuda = saved
