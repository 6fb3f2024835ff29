"""The GPUs `tvis vram --gpu` knows, with the memory a training process can actually use.

`usable` is what `torch.cuda.mem_get_info()` reports as total on an idle card: the marketed
size less what the driver and ECC keep for themselves. Display cards (the consumer ones) lose
a further few hundred MiB to the desktop when a monitor is attached; that is not subtracted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tvis_tui.errors import TvisError

GIB = 1024 ** 3
MIB = 1024 ** 2


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU model. `key` is the name `--gpu` takes; `aliases` are other spellings."""

    key: str
    name: str
    memory_gib: float
    usable_bytes: int
    kind: str
    aliases: tuple[str, ...] = ()
    bf16: bool | None = True
    """Whether it computes in bfloat16: NVIDIA from compute capability 8.0 (Ampere) on, AMD
    from CDNA2; None for a GPU known only by its memory (--gpu-memory)."""


def _gpu(key: str, name: str, memory_gib: float, usable_mib: int, kind: str,
         *aliases: str, bf16: bool = True) -> Gpu:
    return Gpu(key, name, memory_gib, usable_mib * MIB, kind, aliases, bf16)


GPUS: tuple[Gpu, ...] = (
    _gpu("h200-141gb", "NVIDIA H200", 141, 143_771, "data centre", "h200"),
    _gpu("h100-80gb", "NVIDIA H100 80GB (SXM/PCIe)", 80, 81_008, "data centre", "h100"),
    _gpu("h100-nvl", "NVIDIA H100 NVL", 94, 95_830, "data centre"),
    _gpu("gh200", "NVIDIA GH200 (GPU side)", 96, 97_871, "data centre"),
    _gpu("b200", "NVIDIA B200", 180, 182_623, "data centre"),
    _gpu("a100-80gb", "NVIDIA A100 80GB", 80, 81_050, "data centre", "a100-80"),
    _gpu("a100-40gb", "NVIDIA A100 40GB", 40, 40_339, "data centre", "a100", "a100-40"),
    _gpu("a10", "NVIDIA A10", 24, 22_731, "data centre", "a10g"),
    _gpu("a30", "NVIDIA A30", 24, 24_062, "data centre"),
    _gpu("a40", "NVIDIA A40", 48, 45_634, "data centre"),
    _gpu("l4", "NVIDIA L4", 24, 22_491, "data centre"),
    _gpu("l40s", "NVIDIA L40S", 48, 45_589, "data centre", "l40"),
    _gpu("v100-16gb", "NVIDIA V100 16GB", 16, 16_160, "data centre", "v100", bf16=False),
    _gpu("v100-32gb", "NVIDIA V100 32GB", 32, 32_494, "data centre", bf16=False),
    _gpu("t4", "NVIDIA T4", 16, 15_102, "data centre", bf16=False),
    _gpu("p100", "NVIDIA P100 16GB", 16, 16_280, "data centre", bf16=False),
    _gpu("mi300x", "AMD Instinct MI300X", 192, 196_592, "data centre"),
    _gpu("mi250x", "AMD Instinct MI250X (one GCD)", 64, 65_520, "data centre", "mi250"),
    _gpu("rtx-a6000", "NVIDIA RTX A6000", 48, 48_676, "workstation", "a6000"),
    _gpu("rtx-6000-ada", "NVIDIA RTX 6000 Ada", 48, 48_632, "workstation"),
    _gpu("rtx-a5000", "NVIDIA RTX A5000", 24, 24_248, "workstation", "a5000"),
    _gpu("rtx5090", "NVIDIA GeForce RTX 5090", 32, 32_110, "consumer", "5090"),
    _gpu("rtx4090", "NVIDIA GeForce RTX 4090", 24, 24_217, "consumer", "4090"),
    _gpu("rtx4080", "NVIDIA GeForce RTX 4080", 16, 15_992, "consumer", "4080"),
    _gpu("rtx4070-ti", "NVIDIA GeForce RTX 4070 Ti", 12, 11_994, "consumer"),
    _gpu("rtx4060-ti-16gb", "NVIDIA GeForce RTX 4060 Ti 16GB", 16, 15_992, "consumer"),
    _gpu("rtx3090", "NVIDIA GeForce RTX 3090", 24, 24_268, "consumer", "3090"),
    _gpu("rtx3080", "NVIDIA GeForce RTX 3080 10GB", 10, 10_010, "consumer", "3080"),
    _gpu("rtx3060", "NVIDIA GeForce RTX 3060 12GB", 12, 12_041, "consumer", "3060"),
    _gpu("rtx2080-ti", "NVIDIA GeForce RTX 2080 Ti", 11, 10_997, "consumer", "2080ti", bf16=False),
)


def _norm(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def find_gpu(name: str) -> Gpu:
    """The GPU called `name` (key or alias, case and `_`/space insensitive), or TvisError."""
    wanted = _norm(name)
    for gpu in GPUS:
        if wanted == gpu.key or wanted in gpu.aliases:
            return gpu
    raise TvisError(f"unknown GPU {name!r}; `tvis gpus` lists the known ones, "
                    "or give --gpu-memory SIZE (e.g. 48GiB)")


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(gib|gb|mib|mb|g|m)?\s*$", re.IGNORECASE)
_UNIT = {"gib": GIB, "g": GIB, "gb": 10 ** 9, "mib": MIB, "m": MIB, "mb": 10 ** 6}


def parse_size(text: str) -> int:
    """Bytes in a size such as `48GiB`, `48GB`, `24576MiB` or `48` (GiB), or TvisError."""
    match = _SIZE.match(text)
    if not match or float(match.group(1)) <= 0:
        raise TvisError(f"cannot read memory size {text!r}; write it like 48GiB or 24576MiB")
    unit = (match.group(2) or "gib").lower()
    return int(float(match.group(1)) * _UNIT[unit])


def custom_gpu(memory: int) -> Gpu:
    """A GPU known only by the memory the user gave: all of it counts as usable."""
    gib = memory / GIB
    return Gpu("custom", f"GPU with {gib:.1f} GiB", round(gib, 1), memory, "custom", bf16=None)
