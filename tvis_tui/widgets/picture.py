"""Drawing a recorded image in the terminal with textual-image, by a method chosen once.

textual-image asks the terminal what it can draw (sixel, kitty's graphics protocol, the
cell size in pixels) when it is first imported: it writes a query and reads the answer
from stdin. Once Textual owns the terminal, Textual reads stdin and the answer would
arrive as key presses, so `tvis tui` calls `choose` before `App.run()`. Where stdout is not
a terminal (tests, a pipe) nothing is asked and the import is harmless.

Methods: "auto" (what the terminal says it supports: sixel, then kitty's protocol, else
colored half blocks), or one of them named, for a terminal that answers wrongly (a
multiplexer passing the query on to a terminal it cannot draw on for it).
"""

from __future__ import annotations

import os
import sys
import termios
import time
from typing import TYPE_CHECKING

from tvis_tui.errors import TvisError

if TYPE_CHECKING:  # the CLI reads METHODS for every command: nothing heavy at import
    import numpy as np
    from textual.widget import Widget

METHODS = ("auto", "sixel", "kitty", "halfcell")
ENV = "TVIS_IMAGES"
"""Sets the method when `tvis tui --images` is not given."""

_chosen: type[Widget] | None = None


def default_method() -> str:
    return os.environ.get(ENV, "auto") or "auto"


def checked_method(method: str) -> str:
    """`method`, if it is one; else a TvisError that says which are."""
    if method not in METHODS:
        raise TvisError(f"images: {method!r} is not a drawing method; use one of {', '.join(METHODS)}"
                        f" (from --images or {ENV})")
    return method


def choose(method: str) -> None:
    """Import textual-image (asking the terminal, once) and draw with `method` from now on."""
    global _chosen
    checked_method(method)
    asks = "textual_image.renderable" not in sys.modules
    from textual_image import widget

    if asks:
        _drop_typed_ahead()
    _chosen = {"auto": widget.Image, "sixel": widget.SixelImage, "kitty": widget.TGPImage,
               "halfcell": widget.HalfcellImage}[method]


def _drop_typed_ahead() -> None:
    """textual-image stops reading the terminal's answer at the first byte that is not
    part of it: a key typed while tvis started. The answer then waits behind it, and
    Textual would read it as key presses (a search opened with "2c" typed in it). What
    was typed ahead is dropped with it."""
    try:
        fd = sys.__stdin__.fileno()
        if os.isatty(fd):
            time.sleep(0.05)  # an answer still on its way
            termios.tcflush(fd, termios.TCIFLUSH)
    except (AttributeError, ValueError, OSError, termios.error):
        pass  # no terminal: nothing was asked


def picture(pixels: np.ndarray, width: int) -> Widget:
    """A widget drawing `pixels` (uint8 H x W x C, C = 1, 3 or 4) `width` cells wide, its
    height following the image's aspect. Half blocks unless `choose` said otherwise."""
    import numpy as np
    from PIL import Image as PILImage

    if _chosen is None:
        choose("halfcell")
    assert _chosen is not None
    channels = pixels.shape[2]
    # uint8 H x W reads as mode L, H x W x 3 as RGB, H x W x 4 as RGBA.
    image = PILImage.fromarray(np.ascontiguousarray(pixels[:, :, 0] if channels == 1 else pixels))
    widget = _chosen(image)
    # Both sides in cells: with a fixed width and an auto height, textual-image sizes the
    # height from the width the widget had at its last layout, 0 rows at the first one.
    widget.styles.width = width
    widget.styles.height = rows(pixels.shape[0], pixels.shape[1], width)
    return widget


def rows(height_px: int, width_px: int, width: int) -> int:
    """Rows that keep the image's aspect `width` cells wide, in this terminal's cells."""
    cell_width, cell_height = _cell_size()
    return max(1, round(width * cell_width * height_px / max(width_px, 1) / cell_height))


def fitted_cells(height_px: int, width_px: int, wanted: int, room_height: int) -> int:
    """`wanted` cells wide, or narrower until the picture's height fits `room_height` rows
    (a 1024 x 40 spectrogram drawn whole)."""
    cells = wanted
    while cells > 1 and rows(height_px, width_px, cells) > max(room_height, 1):
        cells -= 1
    return cells


def _cell_size() -> tuple[int, int]:
    """The terminal cell's size in pixels as textual-image measured it (what its
    renderers scale by); its module is private, so a later release may move it."""
    try:
        from textual_image._terminal import get_cell_size
    except ImportError:
        return 10, 20  # textual-image's own default (a VT340's cell)
    cell = get_cell_size()
    return cell.width, cell.height
