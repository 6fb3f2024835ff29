"""The values view: one tensor's stored values, any dimension sliced, paged; `d` draws them."""

from __future__ import annotations

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from tvis_tui.errors import TvisError
from tvis_tui.screens.prompt import PromptScreen
from tvis_tui.store import RunReader, Slot
from tvis_tui.widgets.format import shape
from tvis_tui.widgets.picture import fitted_cells, picture
from tvis_tui.widgets.tensor_picture import tensor_picture
from tvis_tui.widgets.values_grid import ValuesGrid, default_index, format_index, parse_index, view_labels


MIN_PATH = 12
"""Characters of the slot's path the title keeps however narrow the screen."""


class ValuesScreen(Screen):
    HELP_SECTIONS = ("Values view",)  # help lists these first
    BINDINGS = [
        Binding("i,colon", "index", "slice", show=True, tooltip="Slice: choose the index of each dimension…"),
        Binding("plus,equals_sign", "shift(1)", "next", show=True,
                tooltip="Next index along the first indexed dimension"),
        Binding("minus", "shift(-1)", "prev", show=True, tooltip="Previous index along the first indexed dimension"),
        Binding("d", "picture", "picture", show=True,
                tooltip="Draw the values as a picture (an image-like tensor in colour), or the numbers again"),
        Binding("escape,q", "close", "back", show=True, tooltip="Back to the debugger"),
    ]

    def __init__(self, reader: RunReader, seq: int, slot: Slot) -> None:
        super().__init__()
        self.reader, self.seq, self.slot = reader, seq, slot
        self.array: np.ndarray | None = None
        self.index = default_index(len(slot.shape or ()))
        self.drawing = False  # a picture in place of the numbers (`d`)

    def compose(self) -> ComposeResult:
        yield Static(id="values-title")
        yield ValuesGrid(id="values")
        yield VerticalScroll(id="values-picture")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ValuesGrid).focus()
        self.load()

    @work(thread=True, exclusive=True)
    def load(self) -> None:
        try:
            array = self.reader.values(self.seq, self.slot)
        except TvisError as exc:  # this tensor's values are damaged: the rest of the run is not
            self.app.call_from_thread(self._damaged, str(exc))
            return
        self.app.call_from_thread(self._loaded, array)

    def _damaged(self, message: str) -> None:
        why = message.removeprefix(f"{self.reader.path}: ")  # the run is the one open
        self.query_one("#values-title", Static).update(Text(f"values damaged: {why}", style="bold red"))
        self.query_one(ValuesGrid).display = False

    def _loaded(self, array: np.ndarray | None) -> None:
        if array is None:
            self.query_one("#values-title", Static).update(Text("values were not stored", style="bold red"))
            return
        if array.size == 0:  # nothing to index or slice: a size-0 dimension holds no values
            self.query_one("#values-title", Static).update(
                Text(f"no values: a tensor of shape {shape(array.shape)} holds none", style="bold"))
            return
        self.array = array
        self._draw()

    def _draw(self) -> None:
        assert self.array is not None
        view = self.array[self.index]
        self.query_one("#values-title", Static).update(self._title(view))
        grid, pane = self.query_one(ValuesGrid), self.query_one("#values-picture", VerticalScroll)
        drawn = tensor_picture(self.array, self.index) if self.drawing else None
        if self.drawing and drawn is None:
            self.drawing = False
            has = "none: a single value" if view.ndim == 0 else "one"
            self.notify(f"a picture needs two dimensions: this view has {has}", severity="warning")
        grid.display, pane.display = drawn is None, drawn is not None
        if drawn is None:
            grid.show(view, *view_labels(self.index, self.array.shape))
            return
        pixels, note = drawn
        room = pane.content_size if pane.content_size.width else self.size
        # Four cells a pixel column at most (a 16-pixel image is no 120-cell wall), the pane's width.
        wanted = min(max(room.width - 2, 1), max(4 * pixels.shape[1], 16))
        cells = fitted_cells(pixels.shape[0], pixels.shape[1], wanted, room.height - 3)
        pane.remove_children()
        pane.mount(Static(Text(note, style="dim")), picture(pixels, cells))

    def action_picture(self) -> None:
        if self.array is not None and self.array.size:
            self.drawing = not self.drawing
            self._draw()

    def on_resize(self) -> None:
        if self.array is not None:  # the title only: redrawing the grid would scroll it home
            self.query_one("#values-title", Static).update(self._title(self.array[self.index]))

    def _title(self, view: np.ndarray) -> Text:
        """One line: what the values are, the index and the view's shape, then the tensor's
        dtype and shape (also in the inspector). The index is what changes as a person
        slices, so when the line is too long the dtype and shape go first, then the slot's
        path gives way from the left (a parameter's last names say most). A single value
        is written out exactly too: the grid rounds to 4 digits."""
        assert self.array is not None
        head = f"call #{self.seq}  {self.slot.role} "
        index = Text("  ")
        index.append(format_index(self.index, self.array.ndim), style="bold cyan")
        index.append(f" → {shape(view.shape)}", style="dim")
        if view.size == 1:
            index.append(f" = {view.reshape(())[()]}", style="bold")
        elif view.size == 0:  # `[1:0, :]`: the grid would show its column labels only
            index.append(" holds no values", style="bold yellow")
        path = self.slot.path
        width = self.query_one("#values-title", Static).content_size.width
        # One cell more: the "…" that says the dtype and shape were cut.
        room = max(width - len(head) - index.cell_len - 1, MIN_PATH)
        if room < len(path):
            path = "…" + path[len(path) - room + 1:]
        title = Text(head + path, style="bold", no_wrap=True, overflow="ellipsis")
        return title.append_text(index).append(f"  {self.slot.dtype} {shape(self.slot.shape)}")

    def action_index(self) -> None:
        if self.array is None:
            return
        ndim = self.array.ndim
        if ndim == 0:  # a loss, a count: its one value is in the title
            self.notify("a single value (0 dimensions): nothing to index", severity="warning")
            return

        def done(text: str | None) -> None:
            if text is None or self.array is None:
                return
            try:
                index = parse_index(text, self.array.shape)
            except ValueError as exc:
                self.notify(str(exc), severity="error", markup=False)
                return
            view = self.array[index]
            if view.ndim > 2:
                self.notify(f"the view shows 2 dimensions at most; this slice has {view.ndim}", severity="error")
                return
            self.index = index
            self._draw()

        current = format_index(self.index, ndim)[1:-1]
        self.app.push_screen(PromptScreen(f"Index for {shape(self.slot.shape)} (e.g. 0, :, 2:8, ...):", current), done)

    def action_shift(self, delta: int) -> None:
        """Step the first integer index, so +/- walks through channels or batch items."""
        if self.array is None:
            return
        for dim, item in enumerate(self.index):
            if isinstance(item, int):
                size = self.array.shape[dim]
                index = list(self.index)
                index[dim] = (item + delta) % size
                self.index = tuple(index)
                self._draw()
                return
        self.app.bell()

    def action_close(self) -> None:
        self.dismiss()
