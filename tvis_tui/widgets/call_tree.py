"""The call tree: a Line-API view over `CallRows`, drawing only the visible rows."""

from __future__ import annotations

from dataclasses import dataclass

from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tvis_tui.store import CallRecord
from tvis_tui.widgets.call_rows import Row
from tvis_tui.widgets.format import duration, phase_style


def row_label(row: Row, width: int | None = None) -> Text:
    """What a row says: a glyph for its state, then what it stands for, in `width` cells
    if given. A call that does not fit keeps its duration and flags: its class goes first,
    then its qualified name loses its start (`…layers.0.self_attn`, not `encoder.layer`);
    a bare index (`2`, a root Sequential's child) keeps what fits of its class."""
    glyph = ("▾ " if row.expanded else "▸ ") if row.expandable else "  "
    text = Text("  " * row.depth + glyph, no_wrap=True, overflow="ellipsis")
    kind = row.key[0]
    if kind == "step":
        text.append(f"step {row.key[1]}", style="bold")
        if row.unfinished:
            text.append("  unfinished", style="dim italic")
        if row.loss is not None:
            text.append(f"  loss {row.loss}", style="dim")
    elif kind == "phase" and row.span is not None:
        text.append(row.span.phase, style=phase_style(row.span.phase))
        text.append(f"  #{row.span.first_seq}-{row.span.last_seq}", style="dim")
    elif kind == "more":
        text.append("… more calls (enter)", style="dim italic")
    elif row.call is not None:
        text += _call_label(row.call, None if width is None else width - text.cell_len, row.nonfinite_grad)
    if width is not None:
        text.truncate(width, overflow="ellipsis")
    return text


MIN_NAME = 10
"""Characters of a call's name kept before its duration gives way."""


def _call_label(call: CallRecord, width: int | None, nonfinite_grad: bool = False) -> Text:
    name = call.name or call.type
    kind = f" {call.type}" if call.type and call.type != call.name else ""
    tail = Text()
    if call.nonfinite_output:
        tail.append(" NaN/Inf", style="bold red")
    elif nonfinite_grad:
        tail.append(" NaN/Inf grad", style="bold red")
    if call.error:
        tail.append(" ✗ raised", style="bold red")  # a glyph too: NO_COLOR shows no red
    took = f"  {duration(call.duration_ns)}"
    # The time goes before the name would be cut to a few characters (a NaN/Inf row at 80
    # columns read `…or`: the name is what a NaN hunt needs).
    if width is None or width - tail.cell_len - len(took) >= min(len(name), MIN_NAME):
        tail.append(took, style="dim")
    if width is not None:
        room = width - tail.cell_len
        if len(name) + len(kind) > room:
            # A root container's index (`2`) says little without its class: shortened, kept.
            left = room - len(name)
            kind = kind[:left - 1] + "…" if name.isdigit() and left >= 4 else ""
        if len(name) > room:
            name = "…" + name[len(name) - max(room, 2) + 1:]
    text = Text(name, style="bold red" if call.error else "")
    text.append(kind, style="dim")
    return text + tail


class CallTree(ScrollView, can_focus=True):
    """Steps, phases and calls. Moving the cursor asks the screen to select that call."""

    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump_row(0)", "First row", show=False),
        Binding("end", "jump_row(-1)", "Last row", show=False),
        Binding("enter,space", "toggle", "Expand/collapse", show=False),
        Binding("right,l", "expand", "Expand", show=False),
        Binding("left,h", "collapse", "Collapse or go to parent row", show=False),
    ]

    cursor = reactive(0, always_update=True)

    @dataclass
    class RowChosen(Message):
        """The user put the cursor on a row that stands for call `seq`."""

        seq: int

    @dataclass
    class ToggleRequested(Message):
        """Expand (or collapse) row `index`: the screen does the store reads in a worker."""

        index: int
        expand: bool

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.rows: tuple[Row, ...] = ()
        # Lines drawn, by (row, cursor on it, width): a step moves the cursor and scrolls,
        # and the other rows on screen are the very rows drawn before (CallRows keeps them).
        self._drawn: LRUCache[tuple[int, bool, int], tuple[Row, Strip]] = LRUCache(1024)

    def show(self, rows: tuple[Row, ...], cursor: int | None) -> None:
        """Draw `rows`, with the cursor on row `cursor` (kept in view)."""
        self.rows = rows
        self.virtual_size = Size(0, len(rows))
        if cursor is not None:
            self.set_reactive(CallTree.cursor, cursor)
            if self.size.height:
                self._scroll_cursor_into_view()
            else:
                self.call_after_refresh(self._scroll_cursor_into_view)
        self.refresh()

    def on_resize(self) -> None:
        """A smaller window may leave the cursor below it: bring it back (once laid out)."""
        self.call_after_refresh(self._scroll_cursor_into_view)

    def _scroll_cursor_into_view(self) -> None:
        height = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_y)
        if self.cursor < top or self.cursor >= top + height:
            self.scroll_to(y=max(0, self.cursor - height // 3), animate=False, immediate=True, force=True)

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.scrollable_content_region.width
        if index >= len(self.rows):
            return Strip.blank(width, self.rich_style)
        row, on_cursor = self.rows[index], index == self.cursor
        key = (id(row), on_cursor, width)
        drawn = self._drawn.get(key)
        if drawn is None:  # the cache holds the row too: no other row can take its id
            drawn = (row, self._draw(row, on_cursor, width))
            self._drawn.set(key, drawn)
        return drawn[1]

    def _draw(self, row: Row, on_cursor: bool, width: int) -> Strip:
        # The cursor is a glyph as well as a colour, so it shows with NO_COLOR too.
        label = Text("▶" if on_cursor else " ", style="bold") + row_label(row, width - 1)
        label.truncate(width, pad=True)
        if on_cursor:
            label.stylize(self.get_component_rich_style("call-tree--cursor"))
        segments = Segment.apply_style(label.render(self.app.console), self.rich_style)
        return Strip(segments, width).crop(0, width)

    def notify_style_update(self) -> None:
        self._drawn.clear()  # a theme changed: every line is drawn again
        super().notify_style_update()

    COMPONENT_CLASSES = {"call-tree--cursor"}

    def watch_cursor(self, cursor: int) -> None:
        if not self.rows:
            return
        self._scroll_cursor_into_view()
        self.refresh()
        seq = self.rows[cursor].seq
        if seq is not None:
            self.post_message(self.RowChosen(seq))

    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.scrollable_content_region.height - 1))

    def action_jump_row(self, index: int) -> None:
        if self.rows:
            self.cursor = index % len(self.rows)

    def action_toggle(self) -> None:
        if self.rows:
            row = self.rows[self.cursor]
            self.post_message(self.ToggleRequested(self.cursor, not row.expanded))

    def action_expand(self) -> None:
        if self.rows and not self.rows[self.cursor].expanded:
            self.post_message(self.ToggleRequested(self.cursor, True))

    def action_collapse(self) -> None:
        if not self.rows:
            return
        row = self.rows[self.cursor]
        if row.expanded:
            self.post_message(self.ToggleRequested(self.cursor, False))
            return
        parent = next((i for i in range(self.cursor - 1, -1, -1) if self.rows[i].depth < row.depth), None)
        if parent is not None:
            self.cursor = parent
