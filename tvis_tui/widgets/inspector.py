"""The inspector: the current call's inputs, outputs and gradients as a table."""

from __future__ import annotations

from typing import Any, Callable

from rich.markup import escape
from rich.text import Text
from textual.widgets import DataTable

from tvis_tui.messages import ValuesRequested
from tvis_tui.store import CallRecord, Slot
from tvis_tui.text import cut
from tvis_tui.widgets.format import number, shape, short_path
from tvis_tui.widgets.row_table import RowTable
from tvis_tui.widgets.sparkline import sparkline

COLUMNS = ("name", "shape", "nan/inf", "histogram", "min", "max", "mean", "std", "norm", "zeros",
           "dtype", "device")
"""What tells a bad tensor apart comes first, so it shows in a narrow pane."""
OPTIMIZER_COLUMNS = ("name", "nan/inf", "norm", "Δ/w", "histogram", "shape", "min", "max", "mean", "std",
                     "zeros", "dtype", "device")
"""An optimizer step's rows are its parameters, named at length: what tells a bad step
apart (a gradient's norm, growing step after step without zero_grad; an update's size
against its weight) comes before their histograms, which it kept out of view at 120
columns; their shapes, known from the model, come after."""
NUMBERS = {"min", "max", "mean", "std", "norm", "zeros", "Δ/w"}
"""Columns of right-aligned numbers: their headers align right too, over the digits."""


def headers(columns: tuple[str, ...]) -> list[Text]:
    return [Text(c, justify="right") if c in NUMBERS else Text(c) for c in columns]


EXACT = ("min", "max")
"""Figures an integer tensor holds as values: shown in full, not to four digits."""


def _is_integer(dtype: str | None) -> bool:
    return bool(dtype) and dtype.startswith(("int", "uint", "bool"))


PATH_WIDTH = 24
"""A slot's path in the name column, its last parts kept (`…blocks.0.conv1.weight`): an
optimizer's parameters, named from their model, held the figures out of view at 120
columns; the values view and Enter's notices name it whole."""
NOTE_WIDTH = 30
"""An optimizer row (`lr group 0  0.1  momentum 0.9`) is cut to its tensors' widest name,
or this: its lr reads (Enter shows the sentence whole)."""
REPR_WIDTH = 24
"""A plain value's repr, in the shape column, is cut here: a long one (a config's repr, the
slot cap's note) widened the column and pushed every figure of the tensors out of view.
Enter on the row shows it whole."""


def slot_cells(slot: Slot, repr_width: int = REPR_WIDTH, columns: tuple[str, ...] = COLUMNS) -> list[Text]:
    """One table row in `columns`: a tensor's summary, or a plain value's repr (cut at
    `repr_width`) in the column after its name."""
    path = short_path(slot.path, PATH_WIDTH)
    name = Text(slot.role if slot.path == slot.role else f"{slot.role} {path}", no_wrap=True)
    if not slot.is_tensor:
        value = Text(cut(slot.repr or "", repr_width), style="dim", no_wrap=True)
        return [name, value, *[Text("")] * (len(columns) - 2)]
    if slot.has_values:
        name.append(" ⏎", style="dim")
    cells = {"name": name, **_tensor_cells(slot)}
    return [cells.get(column, Text("")) for column in columns]


def _tensor_cells(slot: Slot) -> dict[str, Text]:
    stats = slot.stats
    bad = stats.nonfinite if stats else 0
    cells = {
        "shape": Text(shape(slot.shape)),
        "nan/inf": Text(f"{stats.nan}/{stats.posinf + stats.neginf}" if stats else "",
                        style="bold red" if bad else "dim"),
        "histogram": sparkline(slot.hist, width=12),
        **{f: Text(number(getattr(stats, f, None), integer=f in EXACT and _is_integer(slot.dtype)),
                   justify="right") for f in ("min", "max", "mean", "std", "norm")},
        # A gradient norm that grows step after step (no zero_grad), a ReLU's dead share.
        "zeros": Text(_share(stats.zeros, stats.numel) if stats else "", justify="right"),
        "dtype": Text(slot.dtype or ""),
        "device": Text(slot.device or ""),
    }
    if slot.ratio is not None:  # an optimizer update: how far the step moved the weight
        cells["Δ/w"] = Text(f"{slot.ratio:.2g}", style="cyan", justify="right")
    return cells


def note_name(note: Slot, width: int) -> Text:
    """An optimizer's row read from its extra, its sentence after its name, cut at `width`."""
    name = Text(f"{note.role} {note.path}", no_wrap=True)
    if note.repr:
        name.append(f"  {note.repr}", style="dim")
    name.truncate(width, overflow="ellipsis")
    return name


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.3g}%" if whole else ""


def optimizer_rows(call: CallRecord) -> list[Slot]:
    """An optimizer step's learning rates and the parameters it left alone (no gradient),
    as plain rows under its slots (they live in the call's `extra`, not in slots)."""
    if call.kind != "optimizer":
        return []
    lrs = call.extra.get("lrs") or []
    hyper = call.extra.get("hyper") or []
    rows = [Slot("lr", i, f"group {i}", repr=number(lr) + _settings(hyper[i] if i < len(hyper) else None))
            for i, lr in enumerate(lrs)]
    frozen = call.extra.get("no_grad_frozen")
    rows += _named_rows(call.extra, "no_grad", "no grad", lambda name: _why_no_grad(name, frozen))
    # No zero_grad since the last step: this step applies that step's gradient again.
    rows += _named_rows(call.extra, "not_zeroed", "not zeroed", lambda _: "holds the last step's gradient too")
    rows += _named_rows(call.extra, "not_stepped", "no optimizer",
                        lambda _: "has a gradient; no optimizer steps it")
    return rows


def _settings(group: Any) -> str:
    """A param group's settings that do something: nonzero numbers, flags set (Adam's
    betas and eps, SGD's momentum, a weight decay); zeros and unset flags say nothing."""
    if not isinstance(group, dict):
        return ""
    said = []
    for key, value in group.items():
        if value is True:
            said.append(key)
        elif type(value) in (int, float) and value != 0:
            said.append(f"{key} {number(value)}")
        elif isinstance(value, list) and value:
            said.append(f"{key} {', '.join(number(v) for v in value)}")
    return f"  {'  '.join(said)}" if said else ""


def _named_rows(extra: dict, key: str, role: str, why: Callable[[str], str]) -> list[Slot]:
    """A row per parameter `extra[key]` names, and one for those past the names listed."""
    names = extra.get(key) or []
    rows = [Slot(role, i, name, repr=why(name)) for i, name in enumerate(names)]
    more = extra.get(f"{key}_count", len(names)) - len(names)
    if more > 0:
        rows.append(Slot(role, len(names), f"… {more} more", repr=""))
    return rows


def _why_no_grad(name: str, frozen: list[str] | None) -> str:
    """Frozen on purpose, or left out of the loss by mistake: the fixes differ."""
    if frozen is None:  # recorded before runs said which
        return "no gradient: not updated"
    if name in frozen:
        return "requires_grad=False: not updated"
    return "no gradient (unused by the loss, or zeroed before the step): not updated"


def inspector_title(call: CallRecord | None) -> str:
    """"inspector", and the module's settings as its repr shows them
    (`Conv2d(3, 16, kernel_size=(3, 3), ...)`): a Dropout's p, an LSTM's batch_first."""
    config = call.extra.get("config") if call is not None else None
    if not isinstance(config, str) or not config:
        return "inspector"
    return escape(f"inspector  {call.type}({config})")  # type: ignore[union-attr]


class Inspector(RowTable):
    """Enter on a tensor whose values were stored opens them (`ValuesRequested`)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, fixed_columns=1)  # rows stay told apart when scrolled sideways
        self.seq = 0
        self.slots: list[Slot] = []
        self.notes: list[Slot] = []  # an optimizer step's rows, under its slots
        self.columns_shown = COLUMNS

    def on_mount(self) -> None:
        self.add_columns(*headers(self.columns_shown))

    def show(self, seq: int, slots: list[Slot], call: CallRecord | None = None) -> None:
        """The call's stored slots, then (for an optimizer step) rows read from its extra;
        only the stored slots can open a values view."""
        self.seq, self.slots = seq, slots
        self.notes = optimizer_rows(call) if call is not None else []
        self.border_title = inspector_title(call)
        # Stepping keeps the columns scrolled to in view (a gradient's std, step after
        # step); the widths change with the rows, and an optimizer step's columns come in
        # another order, so the column is kept by name, not the offset.
        in_view = self.columns_shown[self.first_column_in_view()] if self.scroll_x else None
        self.columns_shown = OPTIMIZER_COLUMNS if call is not None and call.kind == "optimizer" else COLUMNS
        # Columns too: their widths only grow, and one wide call would leave every later
        # call's table padded out past a narrow pane.
        self.clear(columns=True)
        self.add_columns(*headers(self.columns_shown))
        rows = [slot_cells(slot, columns=self.columns_shown) for slot in slots]
        for row in rows:
            self.add_row(*row)
        # An optimizer's rows never size a column: its settings (`0.1  momentum 0.9
        # nesterov`) widened one, and no gradient's figures were in view at 120 columns.
        width = max([NOTE_WIDTH, *(row[0].cell_len for row in rows)])
        for note in self.notes:
            self.add_row(note_name(note, width), *[""] * (len(self.columns_shown) - 1))
        if not slots and not self.notes:
            self.add_row(Text("no inputs or outputs recorded", style="dim italic"),
                         *[""] * (len(self.columns_shown) - 1))
        if in_view in self.columns_shown:  # not an optimizer's Δ/w, stepping to a module
            self.call_after_refresh(self.scroll_to_column, self.columns_shown.index(in_view))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.cursor_row >= len(self.slots):  # an optimizer's row: its sentence whole
            index = event.cursor_row - len(self.slots)
            if index < len(self.notes):  # not the "no inputs or outputs" row
                note = self.notes[index]
                self.notify(f"{note.role} {note.path}: {note.repr}", markup=False)
            return
        slot = self.slots[event.cursor_row]
        if slot.has_values:
            self.post_message(ValuesRequested(self.seq, slot))
        else:
            self.notify(_why_no_values(slot), severity="warning", markup=False)


REPR_SHOWN = 400
"""Of a plain value's repr in its notice (reprs are stored up to their own cap)."""


def _why_no_values(slot: Slot) -> str:
    if not slot.is_tensor:
        return f"{slot.path} is not a tensor: {cut(slot.repr or '', REPR_SHOWN)}"
    if any(size < 0 for size in slot.shape):
        return f"{slot.path} is a nested tensor (its rows differ in length): only its statistics are stored"
    if slot.stats is None:
        return (f"{slot.path} has no stored values or statistics (a meta or quantized tensor, "
                "or a sparse one too large to make dense)")
    return (f"only statistics of {slot.path} were stored: it is past the run's "
            "--max-tensor-bytes, or the run was recorded with --capture summary")
