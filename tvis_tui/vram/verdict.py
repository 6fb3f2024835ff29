"""Fits, tight or does not fit: the estimate against one GPU's usable memory."""

from __future__ import annotations

from dataclasses import dataclass

from tvis_tui.vram.gpus import Gpu

FITS_FRACTION = 0.9
"""Up to 90% of usable memory fits; above it, fragmentation spikes and other processes on
the GPU (a second dataloader worker pinning memory, NCCL buffers) make it tight."""


@dataclass(frozen=True)
class Verdict:
    gpu: Gpu
    peak_bytes: int

    @property
    def headroom_bytes(self) -> int:
        return self.gpu.usable_bytes - self.peak_bytes

    @property
    def word(self) -> str:
        if self.peak_bytes <= self.gpu.usable_bytes * FITS_FRACTION:
            return "fits"
        if self.peak_bytes <= self.gpu.usable_bytes:
            return "tight"
        return "does not fit"

    @property
    def fits(self) -> bool:
        return self.word != "does not fit"
