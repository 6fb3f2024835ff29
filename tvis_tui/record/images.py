"""Recognising images among sample values and making a drawable copy of them.

Forms recognised: PIL images; uint8 H x W and H x W x C numpy arrays; C x H x W tensors or
arrays (C = 1, 3 or 4, float or uint8), and N x C x H x W with the N images side by side.
The drawable copy is uint8 H x W x C; float values in [0, 1] are scaled by 255, values
already in [0, 255] kept, anything else (a normalised image) stretched from its own
[lo, hi]. Everything works on copies: the value the script holds is never touched.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

MIN_SIDE = 4
"""Smaller than this on a side is a vector or a feature map, not a picture."""

MAX_PIXELS = 512 * 512
"""Bigger images are subsampled by a whole stride (no RNG, no interpolation)."""

MAX_TILES = 8
"""N x C x H x W values show at most this many images side by side."""


@dataclass(frozen=True, slots=True)
class ImageView:
    pixels: np.ndarray  # uint8, H x W x C
    layout: str  # how the value held it: "PIL RGB", "HWC", "CHW", "NCHW", ...
    lo: float  # the value drawn as 0
    hi: float  # the value drawn as 255
    stride: int  # subsampling applied to fit MAX_PIXELS

    def to_wire(self) -> dict[str, Any]:
        return {"shape": list(self.pixels.shape), "data": self.pixels.tobytes(), "layout": self.layout,
                "lo": self.lo, "hi": self.hi, "stride": self.stride}


WIDE_PIL_MODES = ("I", "I;16", "I;16L", "I;16B", "I;16N", "F")
"""One channel of 16 or 32 bits (a depth map, a medical or astronomy image)."""


def is_pil(value: Any) -> bool:
    pil = sys.modules.get("PIL.Image")  # never import PIL for a script that does not
    return pil is not None and isinstance(value, pil.Image)


def image_view(value: Any, bounds: tuple[float, float] | None = None) -> ImageView | None:
    """A drawable copy of `value` if it looks like an image, else None. `bounds`: the
    finite min and max of all of `value`, when already known (saves two passes)."""
    if is_pil(value):
        return _from_pil(value)
    if isinstance(value, torch.Tensor):
        if value.is_meta or value.layout != torch.strided or value.is_complex():
            return None
        with torch.no_grad():
            x = value.detach().cpu()
            x = x.float() if x.is_floating_point() else x.to(torch.uint8) if x.dtype == torch.bool else x
        arr = x.numpy()
    elif isinstance(value, np.ndarray):
        arr = value
    else:
        return None
    if arr.dtype.kind not in "biuf":
        return None
    return _from_array(arr, bounds)


def _from_pil(img: Any) -> ImageView:
    mode = img.mode
    if mode in WIDE_PIL_MODES:  # converted to 8 bits they would clip: drawn over their own range
        return _scaled(np.asarray(img)[:, :, None], f"PIL {mode}")
    if mode not in ("L", "RGB", "RGBA"):
        img = img.convert("RGBA" if "A" in mode else "RGB")
    pixels = np.asarray(img, dtype=np.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    return _fit(pixels, f"PIL {mode}", 0.0, 255.0)


def _from_array(arr: np.ndarray, bounds: tuple[float, float] | None = None) -> ImageView | None:
    shape = arr.shape
    channels = (1, 3, 4)
    if arr.ndim == 2 and arr.dtype == np.uint8 and min(shape) >= MIN_SIDE:
        return _scaled(arr[:, :, None], "HW", bounds)
    if arr.ndim == 3 and shape[0] in channels and min(shape[1:]) >= MIN_SIDE:
        return _scaled(arr.transpose(1, 2, 0), "CHW", bounds)
    if arr.ndim == 3 and shape[2] in channels and min(shape[:2]) >= MIN_SIDE:
        return _scaled(arr, "HWC", bounds)
    if arr.ndim == 4 and shape[1] in channels and min(shape[2:]) >= MIN_SIDE and shape[0] >= 1:
        tiles = arr[:MAX_TILES].transpose(0, 2, 3, 1)  # N H W C; bounds of the shown tiles only
        return _scaled(np.concatenate(list(tiles), axis=1), "NCHW")
    return None


def _scaled(hwc: np.ndarray, layout: str, bounds: tuple[float, float] | None = None) -> ImageView:
    if hwc.dtype == np.uint8:
        return _fit(hwc, layout, 0.0, 255.0)
    if bounds is not None:
        lo, hi = float(bounds[0]), float(bounds[1])
    else:
        finite = hwc[np.isfinite(hwc)]
        lo, hi = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    if lo >= 0.0 and hi <= 1.0:
        lo, hi = 0.0, 1.0
    elif lo >= 0.0 and hi <= 255.0 and hwc.dtype.kind in "iu":
        lo, hi = 0.0, 255.0
    span = hi - lo if hi > lo else 1.0
    # Subsampled first: only the drawn pixels are scaled. float32 is exact enough for
    # 256 levels, within its range (a span or values near its limits take float64);
    # fmax/fmin send NaN and -inf to 0 and +inf to 255 in two passes.
    wide = hwc.dtype == np.float64 or not (1e-30 < span and max(abs(lo), abs(hi)) < 1e30)
    sample, stride = _subsampled(hwc)
    with np.errstate(over="ignore", invalid="ignore"):  # non-finite values: no warnings
        pixels = np.subtract(sample, lo, dtype=np.float64 if wide else np.float32)
        pixels *= 255.0 / span
        np.fmax(pixels, 0.0, out=pixels)
        np.fmin(pixels, 255.0, out=pixels)
    return ImageView(pixels.astype(np.uint8, order="C"), layout, lo, hi, stride)


def _subsampled(pixels: np.ndarray) -> tuple[np.ndarray, int]:
    """Every stride-th row and column, the smallest whole stride within MAX_PIXELS."""
    h, w = pixels.shape[:2]
    stride = 1
    while (h // stride) * (w // stride) > MAX_PIXELS:
        stride += 1
    return (pixels[::stride, ::stride] if stride > 1 else pixels), stride


def _fit(pixels: np.ndarray, layout: str, lo: float, hi: float) -> ImageView:
    sample, stride = _subsampled(pixels)
    # Always a copy: the pixels may be a view of the script's own array.
    return ImageView(np.array(sample, dtype=np.uint8, order="C"), layout, lo, hi, stride)
