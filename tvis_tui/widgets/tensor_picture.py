"""A tensor's stored values as a picture (the values view's `d`).

An image-like tensor, with 1 or 3 channels before height and width (C, H, W) or 3 or 4
after them (H, W, C), draws the item the view's index picks, all its channels; any other
2-D view draws in grey (a complex one, its magnitude). Either way its smallest finite value is black and its largest
white (NaN/Inf black too). A weight matrix, an attention map or a mask reads at a glance,
and a batch whose channels a `reshape` scrambled (where `permute` belonged) shows stripes
where the sample showed a square (sweep O).
"""

from __future__ import annotations

import numpy as np

from tvis_tui.widgets.format import number


def tensor_picture(array: np.ndarray, index: tuple[int | slice, ...]) -> tuple[np.ndarray, str] | None:
    """(uint8 H x W x C pixels, a line saying what they show) for the values `array[index]`
    shows; None where there is no picture to draw (a view of one dimension). Complex
    values draw their magnitude: the real part alone would hide half of each."""
    magnitude = np.iscomplexobj(array)
    if magnitude:
        array = np.abs(array)
    item = _image_item(array, index)
    if item is not None:
        pixels, layout = item
    elif array[index].ndim == 2:
        pixels, layout = array[index][:, :, None], "grey"
    else:
        return None
    scaled, lo, hi = _to_bytes(pixels)
    of = " of |z|" if magnitude else ""
    return scaled, f"{layout}{of}: {number(lo)} black, {number(hi)} white"


def _image_item(array: np.ndarray, index: tuple[int | slice, ...]) -> tuple[np.ndarray, str] | None:
    """The whole image the view is a slice of (H x W x C), whichever two of its dimensions
    the view shows, when the last three dimensions are an image's and every dimension
    before them is indexed by a number."""
    if array.ndim < 3 or array[index].ndim != 2:
        return None
    lead = index[:array.ndim - 3]
    if not all(isinstance(i, int) for i in lead):
        return None
    item = array[tuple(lead)]
    first, last = item.shape[0] in (1, 3), item.shape[-1] in (3, 4)
    if first and not last:
        return np.moveaxis(item, 0, -1), f"{item.shape[0]} channel{'s' if item.shape[0] > 1 else ''} (C, H, W) {_where(lead)}"
    if last and not first:
        return item, f"{item.shape[-1]} channels (H, W, C) {_where(lead)}"
    return None  # (3, H, 3): which is the channels is not known


def _where(lead: tuple[int | slice, ...]) -> str:
    return f"of item [{', '.join(map(str, lead))}]" if lead else "of the image"


def _to_bytes(pixels: np.ndarray) -> tuple[np.ndarray, float, float]:
    values = pixels.astype(np.float64)
    finite = np.isfinite(values)
    if not finite.any():
        return np.zeros(pixels.shape, np.uint8), 0.0, 0.0
    lo, hi = float(values[finite].min()), float(values[finite].max())
    span = hi - lo if hi > lo else 1.0
    scaled = np.where(finite, (values - lo) / span * 255, 0)
    return np.clip(np.rint(scaled), 0, 255).astype(np.uint8), lo, hi
