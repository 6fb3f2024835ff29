"""The source pane: the recorded snapshot of the current call's file, on the call line.

A Line-API view: only the visible lines are coloured and drawn. Lines that produced
tensors carry their recorded shapes at the right edge when the run holds them; a line too
long to show beside its shapes is cut (`…`) rather than its shapes, and ←/→ scroll the
code sideways under a fixed gutter.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.cells import cell_len
from rich.segment import Segment
from rich.text import Text
from textual.binding import Binding
from textual.cache import LRUCache
from textual.geometry import Size
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tvis_tui.text import printable
from tvis_tui.widgets.highlight import Highlighter


class SourcePane(ScrollView, can_focus=True):
    """`▶` marks the line the current call was made from; `›` the line cursor that
    "run to cursor" uses (moved with the arrow keys while the pane has focus)."""

    BINDINGS = [
        Binding("up,k", "move(-1)", "Line up", show=False),
        Binding("down,j", "move(1)", "Line down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("left,h", "sideways(-1)", "Scroll the code left", show=False),
        Binding("right,l", "sideways(1)", "Scroll the code right", show=False),
    ]
    SIDEWAYS = 8
    """Columns one press of ←/→ scrolls the code."""
    COMPONENT_CLASSES = {"source-pane--current", "source-pane--cursor", "source-pane--gutter",
                         "source-pane--shape"}

    cursor_line = reactive(0)
    column = reactive(0)
    """How many columns of code are scrolled out of view on the left."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.path = ""
        self.line = 0
        self.shapes: Mapping[int, str] = {}
        self._highlighter: Highlighter | None = None
        self._cache: dict[str, Highlighter] = {}
        self._note = ""
        # Lines drawn, by everything they show: a step moves the marks and scrolls, and
        # the other lines on screen are drawn as before.
        self._drawn: LRUCache[tuple[str, int, int, int, str, str | None], Strip] = LRUCache(1024)

    def show(self, path: str, text: str | None, line: int, shapes: Mapping[int, str] | None = None,
             note: str = "") -> None:
        """Show `path` (its snapshot `text`) on `line` (1-based); `shapes` maps line -> shape;
        `note` follows the file's name in the title."""
        if path != self.path:  # sideways scrolling stays while stepping through one file
            self.column = 0
        self.path, self.line, self.shapes = path, line, shapes or {}
        self.border_title = Text(f"{printable(path.rsplit('/', 1)[-1])}:{line}{note}" if path else "source")
        if text is None:
            self._highlighter = None
            self._note = f"source not recorded: {path}:{line}" if path else "no call site recorded"
            self.virtual_size = Size(0, 2)
        else:
            if path not in self._cache:
                self._cache = {path: Highlighter(text, path), **dict(list(self._cache.items())[:7])}
            self._highlighter = self._cache[path]
            self.virtual_size = Size(0, len(self._highlighter.lines))
        self.set_reactive(SourcePane.cursor_line, line)
        if self.size.height:
            self._center(line)
        else:  # not laid out yet: scroll once it is, or the offset gets clamped to 0
            self.call_after_refresh(self._center, line)
        self.refresh()

    def _center(self, line: int) -> None:
        height = max(1, self.scrollable_content_region.height)
        self.scroll_to(y=max(0, line - 1 - height // 2), animate=False, immediate=True, force=True)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        index = int(self.scroll_y) + y
        if self._highlighter is None:
            text = Text(self._note.split(": ", 1)[y] if y < len(self._note.split(": ", 1)) else "",
                        style="dim italic")
        elif index >= len(self._highlighter.lines):
            return Strip.blank(width, self.rich_style)
        else:
            number = index + 1
            marker = "▶" if number == self.line else ("›" if number == self.cursor_line else " ")
            key = (self.path, number, width, self.column, marker, self.shapes.get(number))
            strip = self._drawn.get(key)
            if strip is None:
                strip = self._strip(self._line(number, marker, width), width)
                self._drawn.set(key, strip)
            return strip
        return self._strip(text, width)

    def _strip(self, text: Text, width: int) -> Strip:
        text.truncate(width, pad=True)
        return Strip(Segment.apply_style(text.render(self.app.console), self.rich_style), width)

    def notify_style_update(self) -> None:
        self._drawn.clear()  # a theme changed: every line is drawn again
        super().notify_style_update()

    def _line(self, number: int, marker: str, width: int) -> Text:
        assert self._highlighter is not None
        digits = len(str(len(self._highlighter.lines)))
        gutter = Text(f"{marker}{number:>{digits}} ", style=self.get_component_rich_style("source-pane--gutter"))
        code = self._highlighter.line(number - 1)[self.column:]
        shape = self.shapes.get(number)
        note = Text(f"  # {shape}" if shape else "", style=self.get_component_rich_style("source-pane--shape"))
        room = width - gutter.cell_len
        if note.cell_len and code.cell_len > room - note.cell_len:
            # The shapes are what this pane is for: the code is cut first, down to half
            # the pane; past that the shapes are cut too.
            fits = _code_room(room, note.cell_len)
            code.truncate(max(0, fits - 1))
            code.append("…", style="dim")
            if note.cell_len > room - fits:
                note.truncate(max(0, room - fits - 1))
                note.append("…")
        text = gutter + code
        if note.cell_len:
            text.append(" " * max(0, width - text.cell_len - note.cell_len))
            text.append_text(note)
        if number == self.line:
            text.stylize(self.get_component_rich_style("source-pane--current"))
        elif number == self.cursor_line:
            text.stylize(self.get_component_rich_style("source-pane--cursor"))
        return text

    def watch_cursor_line(self, line: int) -> None:
        self._keep_in_view(line)
        self.refresh()

    def on_resize(self) -> None:
        """A smaller window may leave the source cursor below it: bring it back."""
        self.call_after_refresh(lambda: self._keep_in_view(self.cursor_line))

    def _keep_in_view(self, line: int) -> None:
        height = max(1, self.scrollable_content_region.height)
        top = int(self.scroll_y)
        if not top < line <= top + height:
            self.scroll_to(y=max(0, line - 1 - height // 2), animate=False, immediate=True, force=True)

    def action_move(self, delta: int) -> None:
        if self._highlighter is not None:
            self.cursor_line = max(1, min(len(self._highlighter.lines), self.cursor_line + delta))

    def action_sideways(self, direction: int) -> None:
        if self._highlighter is not None:
            self.column = max(0, min(self.column + direction * self.SIDEWAYS, self._last_column()))

    def _last_column(self) -> int:
        """The first column that brings the end of every line into view, beside its shapes."""
        assert self._highlighter is not None
        lines = self._highlighter.lines
        room = self.scrollable_content_region.width - (len(str(len(lines))) + 2)
        last = 0
        for number, line in enumerate(lines, 1):
            shape = self.shapes.get(number)
            fits = _code_room(room, cell_len(f"  # {shape}")) if shape else room
            if cell_len(line) > fits:
                column = max(0, len(line) - fits)
                while cell_len(line[column:]) > fits:  # wide characters take two cells
                    column += 1
                last = max(last, column)
        return last

    def watch_column(self, column: int) -> None:
        self.border_subtitle = f"from column {column + 1}  ← →" if column else ""
        self.refresh()

    def action_page(self, direction: int) -> None:
        self.action_move(direction * max(1, self.scrollable_content_region.height - 1))


def _code_room(room: int, note_cells: int) -> int:
    """Cells of code shown beside a shapes note in `room` cells: all but the note, but at
    least half of them."""
    return max(room - note_cells, room // 2)
