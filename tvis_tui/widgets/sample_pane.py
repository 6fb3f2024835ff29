"""One recorded sample as the script made it: the raw value a dataset transform received,
the value after each stage of it, the item the dataset returned, and its tokenizer calls.
Images are drawn (picture.py); text, scalars and small tensors are written out; anything
else is named by its type, shape and range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.text import Text
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widget import Widget
from textual.widgets import Static

from tvis_tui.store.samples import array, image
from tvis_tui.widgets.format import number, shape
from tvis_tui.widgets.picture import fitted_cells, picture

MAX_PICTURE_CELLS = 32
"""Widest picture in cells; a small image is drawn one cell per pixel column, at most this."""

MIN_PICTURE_CELLS = 8

SHOWN_VALUES = 16
"""Values of a small float tensor written out (a target vector, a few features)."""

SHOWN_INTEGERS = 64
"""Values of an integer tensor written out (labels, a sequence of token ids)."""

TEXT_CHARS = 400


@dataclass(frozen=True)
class Part:
    """One value of a sample, ready to show: a label, a line about it, and an image or a
    text when it has one."""

    label: str
    note: str
    pixels: np.ndarray | None = None
    text: str | None = None


def sample_parts(sample: dict[str, Any]) -> list[Part]:
    """What the pane shows for one sample record (store/samples.py), in the order the data
    went: transforms first, then the item; a value met before is named, not drawn again."""
    named, after_stage = _named_values(sample)
    parts: list[Part] = []
    for i, (label, value) in enumerate(named):
        earlier = next((name for name, seen in named[:i] if seen == value), None) if _exact(value) else None
        if earlier is None:
            parts.append(_class_named(_part(label, value), value, sample.get("target_class")))
        elif i in after_stage and earlier == named[i - 1][0]:
            # A stage that returned its input: the transform did nothing to this sample.
            parts.append(Part(label, f"unchanged from {earlier}"))
        else:
            parts.append(Part(label, f"same as {earlier}"))
    return parts


def _class_named(part: Part, value: Any, target: Any) -> Part:
    """A label the size of one integer that is the sample's target class, with the class's
    name beside it, as the predictions table names it (`target_class`: [index, name], set
    by the step view from the step's predictions)."""
    if not (isinstance(target, list) and len(target) == 2 and isinstance(value, dict)):
        return part
    index, name = target
    if value.get("kind") == "scalar":
        one = value.get("value")
    else:
        values = array(value) if value.get("kind") in ("tensor", "ndarray") else None
        one = int(values.reshape(-1)[0]) if values is not None and values.size == 1 and values.dtype.kind in "iu" else None
    if type(one) is not int or one != index:
        return part
    if part.text is not None:
        return Part(part.label, part.note, part.pixels, f"{part.text}  ({name})")
    return Part(part.label, f"{part.note}  ({name})", part.pixels, part.text)


def _named_values(sample: dict[str, Any]) -> tuple[list[tuple[str, Any]], set[int]]:
    """(label, value description) in the order the data went, and the positions of
    transform stages' outputs among them."""
    named: list[tuple[str, Any]] = []
    after_stage: set[int] = set()
    for call in sample.get("transforms", []):
        attr, name = call.get("attr", "transform"), call.get("name", "")
        named.append((f"{attr} input ({name})" if name else f"{attr} input", call.get("input")))
        stages = call.get("stages", [])
        named += [(stage.get("name", "stage"), stage.get("value")) for stage in stages]
        after_stage.update(range(len(named) - len(stages), len(named)))
        if "output" in call:
            named.append((f"{attr} output", call["output"]))
    if sample.get("item") is not None:
        named += _items("item", sample["item"])
    for call in sample.get("tokens", []):
        # A call for the whole batch (in its collate_fn) shows this sample's row of it.
        row = f" (batch row {call['row']})" if "row" in call else ""
        named.append((f"{call.get('tokenizer', 'tokenizer')}.{call.get('method', '')}{row}",
                      {"kind": "tokens", **call}))
    return named, after_stage


def _items(label: str, value: Any, depth: int = 0) -> list[tuple[str, Any]]:
    """A tuple, list or dict item spread into its members (two levels: `((a, b), y)`)."""
    if not (isinstance(value, dict) and value.get("kind") in ("tuple", "list", "dict")) or depth >= 2:
        return [(label, value)]
    out: list[tuple[str, Any]] = []
    for key, member in value.get("items", []):
        out += _items(f"{label}[{key!r}]" if isinstance(key, str) else f"{label}[{key}]", member, depth + 1)
    return out


def _exact(value: Any) -> bool:
    """Whether two equal descriptions of this value mean equal values: they hold the
    values themselves, or a whole-resolution image of them. Statistics alone (values past
    the byte cap, `--capture summary`) are the same for a flipped or recoloured image."""
    if not isinstance(value, dict):
        return False
    if value.get("kind") == "text" or value.get("values") is not None:
        return True
    view = value.get("image")
    return isinstance(view, dict) and view.get("data") is not None and view.get("stride") == 1


def _part(label: str, value: Any) -> Part:
    if not isinstance(value, dict):
        return Part(label, "not recorded")
    kind = value.get("kind")
    if kind == "text":
        length = value.get("length", len(value.get("text", "")))
        return Part(label, f"text, {length} characters", text=value.get("text", "")[:TEXT_CHARS])
    if kind == "tokens":
        return _tokens(label, value)
    if kind == "scalar":
        return Part(label, repr(value.get("value")))
    if kind == "bytes":
        return Part(label, f"{value.get('length')} bytes")
    if kind in ("tuple", "list", "dict"):
        return Part(label, f"{kind} of {value.get('length', 0)}")
    if kind in ("tensor", "ndarray", "image"):
        return _array_part(label, value)
    return Part(label, str(value.get("repr", kind)))


def _array_part(label: str, value: dict[str, Any]) -> Part:
    if value.get("kind") == "image":
        about = f"PIL {value.get('mode', '')} image {' x '.join(map(str, value.get('size', [])))}"
    else:
        about = f"{value.get('dtype', '')} {shape(tuple(value.get('shape', ())))}"
    pixels = image(value)
    if pixels is not None and pixels.size == 0:
        return Part(label, about + "  (an empty image)")
    if pixels is not None:
        return Part(label, about + _drawn_range(value["image"]), pixels=pixels)
    values = array(value)
    if values is not None and values.dtype.kind == "c":
        values = None  # complex: the statistics say more than the real parts would
    if values is not None and values.dtype.kind in "biu":  # ids and labels in full, exactly
        shown, more = _listed([int(v) for v in values.reshape(-1)[:SHOWN_INTEGERS + 1]])
        about += f", the first {SHOWN_INTEGERS}" if more else ""
        decoded = value.get("decoded")
        if isinstance(decoded, str):  # token ids: the text first, as the tokenizer reads them
            return Part(label, f"{about}  {value.get('tokenizer', 'tokenizer')} text",
                        text=f"{decoded[:TEXT_CHARS]!r}\n{shown}{more}")
        return Part(label, about, text=shown + more)
    if values is not None and values.size <= SHOWN_VALUES:
        return Part(label, about, text=" ".join(number(float(v)) for v in values.reshape(-1)))
    stats = value.get("stats") or {}
    if stats.get("min") is not None:
        about += f"  {number(stats['min'])} to {number(stats['max'])}, mean {number(stats.get('mean'))}"
    return Part(label, about)


def _listed(values: list[Any]) -> tuple[str, str]:
    """The first SHOWN_INTEGERS values, and " …" when there are more."""
    return " ".join(map(str, values[:SHOWN_INTEGERS])), " …" if len(values) > SHOWN_INTEGERS else ""


def _drawn_range(view: dict[str, Any]) -> str:
    """What black and white stand for, when it is not the usual 0-255 or 0-1."""
    lo, hi = view.get("lo"), view.get("hi")
    if (lo, hi) in ((0.0, 255.0), (0.0, 1.0)) or lo is None or hi is None:
        return ""
    return f"  {number(lo)} (black) to {number(hi)} (white)"


def _tokens(label: str, call: dict[str, Any]) -> Part:
    ids = call.get("ids")
    shown = _listed(ids)[0] if isinstance(ids, list) else ""
    more = " …" if call.get("n_ids", 0) > SHOWN_INTEGERS else ""  # n_ids: every id, batched too
    text = call.get("text")
    return Part(label, f"{call.get('n_ids', 0)} ids  {shown}{more}",
                text=text if isinstance(text, str) else " | ".join(text) if isinstance(text, list) else None)


class SamplePane(VerticalScroll):
    """The sample of the selected row; `show` replaces what it holds."""

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._shown: tuple[str, dict[str, Any] | None, str] | None = None
        self._width = 0  # the content width the pictures were sized for

    def show(self, title: str, sample: dict[str, Any] | None, why_not: str = "") -> None:
        if self._shown == (title, sample, why_not):
            return  # a table refill highlights the row already shown
        self._shown = (title, sample, why_not)
        self.border_title = title
        self.remove_children()
        self._width = self.scrollable_content_region.width
        if sample is None:
            self.mount(Static(Text(why_not, style="dim italic")))
            return
        self.mount_all(self._widgets(sample_parts(sample)))
        self.scroll_home(animate=False)

    def _widgets(self, parts: list[Part]) -> list[Widget]:
        widgets: list[Widget] = []
        room = self.scrollable_content_region
        for part in parts:
            widgets.append(Static(Text(part.label, style="bold"), classes="part-label"))
            widgets.append(Static(Text(part.note, style="dim"), classes="part-note"))
            if part.pixels is not None:
                height, width = part.pixels.shape[:2]
                cells = picture_cells(height, width, room.width - 1, room.height - 1)
                widgets.append(picture(part.pixels, cells))
            if part.text is not None:
                widgets.append(Static(Text(part.text), classes="part-text"))
        return widgets

    def on_resize(self) -> None:
        """Pictures are sized in cells when shown: size them again for the new width."""
        if self._shown is not None and self.scrollable_content_region.width != self._width:
            shown, self._shown = self._shown, None
            self.show(*shown)


def picture_cells(height_px: int, width_px: int, room_width: int, room_height: int) -> int:
    """How many cells wide to draw a sample's picture: a cell per pixel column, at least
    MIN_PICTURE_CELLS and at most MAX_PICTURE_CELLS, within the pane (`fitted_cells`)."""
    wanted = min(max(width_px, MIN_PICTURE_CELLS), MAX_PICTURE_CELLS, max(room_width, MIN_PICTURE_CELLS))
    return fitted_cells(height_px, width_px, wanted, room_height)
