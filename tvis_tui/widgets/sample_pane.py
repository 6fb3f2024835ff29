"""One recorded sample as the script made it: the raw value a dataset transform received,
the value after each stage of it, the item the dataset returned, and its tokenizer calls.
Images are drawn (picture.py); text, scalars and small tensors are written out; anything
else is named by its type, shape and range."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from tvis_tui.store.samples import array, image
from tvis_tui.widgets.format import number, shape
from tvis_tui.widgets.picture import picture

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
    named: list[tuple[str, Any]] = []
    after_stage: set[int] = set()  # positions in `named` of a stage's output
    for call in sample.get("transforms", []):
        attr, name = call.get("attr", "transform"), call.get("name", "")
        named.append((f"{attr} input ({name})" if name else f"{attr} input", call.get("input")))
        stages = call.get("stages", [])
        named += [(stage.get("name", "stage"), stage.get("value")) for stage in stages]
        after_stage.update(range(len(named) - len(stages), len(named)))
        if "output" in call:
            named.append((f"{attr} output", call["output"]))
    item = sample.get("item")
    if isinstance(item, dict) and item.get("kind") in ("tuple", "list", "dict"):
        named += [(f"item[{key!r}]" if isinstance(key, str) else f"item[{key}]", value)
                  for key, value in item.get("items", [])]
    elif item is not None:
        named.append(("item", item))
    for call in sample.get("tokens", []):
        named.append((f"{call.get('tokenizer', 'tokenizer')}.{call.get('method', '')}",
                      {"kind": "tokens", **call}))
    parts: list[Part] = []
    for i, (label, value) in enumerate(named):
        earlier = next((name for name, seen in named[:i] if seen == value), None)
        if earlier is not None and isinstance(value, dict):
            # A stage that returned its input: the transform did nothing to this sample.
            unchanged = i in after_stage and earlier == named[i - 1][0]
            same = f"unchanged from {earlier}" if unchanged else f"same as {earlier}"
            parts.append(Part(label, same))
        else:
            parts.append(_part(label, value))
    return parts


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
    if pixels is not None:
        return Part(label, about + _drawn_range(value["image"]), pixels=pixels)
    values = array(value)
    integer = values is not None and values.dtype.kind in "biu"
    if values is not None and values.size <= (SHOWN_INTEGERS if integer else SHOWN_VALUES):
        return Part(label, about, text=" ".join(number(float(v), integer=integer) for v in values.reshape(-1)))
    if integer:
        shown = " ".join(str(int(v)) for v in values.reshape(-1)[:SHOWN_INTEGERS])
        return Part(label, about + f", the first {SHOWN_INTEGERS}", text=shown + " …")
    stats = value.get("stats") or {}
    if stats.get("min") is not None:
        about += f"  {number(stats['min'])} to {number(stats['max'])}, mean {number(stats.get('mean'))}"
    return Part(label, about)


def _drawn_range(view: dict[str, Any]) -> str:
    """What black and white stand for, when it is not the usual 0-255 or 0-1."""
    lo, hi = view.get("lo"), view.get("hi")
    if (lo, hi) in ((0.0, 255.0), (0.0, 1.0)) or lo is None or hi is None:
        return ""
    return f"  {number(lo)} (black) to {number(hi)} (white)"


def _tokens(label: str, call: dict[str, Any]) -> Part:
    ids = call.get("ids")
    shown = " ".join(map(str, ids[:SHOWN_VALUES])) if isinstance(ids, list) else ""
    more = " …" if call.get("n_ids", 0) > SHOWN_VALUES else ""
    text = call.get("text")
    return Part(label, f"{call.get('n_ids', 0)} ids  {shown}{more}",
                text=text if isinstance(text, str) else " | ".join(text) if isinstance(text, list) else None)


class SamplePane(VerticalScroll):
    """The sample of the selected row; `show` replaces what it holds."""

    def show(self, title: str, sample: dict[str, Any] | None, why_not: str = "") -> None:
        self.border_title = title
        self.remove_children()
        if sample is None:
            self.mount(Static(Text(why_not, style="dim italic")))
            return
        widgets = []
        for part in sample_parts(sample):
            widgets.append(Static(Text(part.label, style="bold"), classes="part-label"))
            widgets.append(Static(Text(part.note, style="dim"), classes="part-note"))
            if part.pixels is not None:
                widgets.append(picture(part.pixels, self._cells(part.pixels)))
            if part.text is not None:
                widgets.append(Static(Text(part.text), classes="part-text"))
        self.mount_all(widgets)
        self.scroll_home(animate=False)

    def _cells(self, pixels: np.ndarray) -> int:
        room = max(self.scrollable_content_region.width - 1, MIN_PICTURE_CELLS)
        return max(min(pixels.shape[1], MAX_PICTURE_CELLS, room), MIN_PICTURE_CELLS)
