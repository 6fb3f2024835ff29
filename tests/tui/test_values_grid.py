"""The values grid draws any view the values screen hands it, empty ones included; on screen
its columns fit their widest value, ←/→ move a column, the last row can be reached, and
slices are labelled with the tensor's own indices."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pilot import ValuesApp, press, settle
from screen_text import screen_text
from textual.app import App, ComposeResult

from tvis_tui.store import CallRecord, RunReader, RunWriter, Slot
from tvis_tui.widgets.values_grid import ValuesGrid

SIZE = (80, 16)
"""Title, column header, 12 rows, horizontal scrollbar, footer."""

WIDE_INTS = np.array([[2**63 - 1, -(2**31), -(2**63), 1, 2, 3]] * 2 + [[7] * 6], dtype=np.int64)
TALL = np.arange(40 * 20, dtype=np.int64).reshape(40, 20)
FLOATS = np.arange(5 * 30, dtype=np.float64).reshape(5, 30) * 1.5
CUBE = np.arange(6 * 3 * 4, dtype=np.int64).reshape(6, 3, 4)
EMPTY = np.zeros((0, 3, 0), dtype=np.float32)
TENSORS = {"wide_ints": WIDE_INTS, "tall": TALL, "floats": FLOATS, "cube": CUBE, "empty": EMPTY}


class GridApp(App):
    def compose(self) -> ComposeResult:
        yield ValuesGrid(id="grid")




@pytest.fixture(scope="module")
def reader(tmp_path_factory) -> RunReader:
    """One call whose outputs are TENSORS, values stored, written through the real writer."""
    path: Path = tmp_path_factory.mktemp("values") / "run"
    with RunWriter(path) as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="m"))
        w.put_slots(1, [(Slot("output", i, name, shape=a.shape, dtype=str(a.dtype), values_dtype=a.dtype.str),
                         a.tobytes()) for i, (name, a) in enumerate(TENSORS.items())])
        w.close(status="ok")
    reader = RunReader(path)
    yield reader
    reader.close()


async def opened_values(reader: RunReader, name: str, *keys: str) -> list[str]:
    """The screen's lines after opening the values of TENSORS[name] and pressing `keys`."""
    slot = next(s for s in reader.slots(1) if s.path == name)
    app = ValuesApp(reader, slot)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await press(pilot, *keys)
        return screen_text(app).splitlines()


def right_edges(line: str) -> list[int]:
    """Where each whitespace-separated word of `line` ends."""
    edges, inside = [], False
    for x, char in enumerate(line + " "):
        if inside and char == " ":
            edges.append(x)
        inside = char != " "
    return edges


def typed(text: str) -> list[str]:
    """Keys that replace the slice prompt's text with `text` and submit it."""
    return ["i", *["backspace"] * 20, *text, "enter"]


@pytest.mark.parametrize("view, shape", [
    (np.zeros((0, 8)), (0, 8)), (np.zeros((0,)), (0, 1)), (np.zeros((5, 0)), (5, 0)),
    (np.arange(3), (3, 1)), (np.float32(2.5), (1, 1)),
])
async def test_views_of_any_shape_are_drawn(view, shape):
    async with GridApp().run_test(size=(60, 12)) as pilot:
        grid = pilot.app.query_one(ValuesGrid)
        grid.show(np.asarray(view))
        await pilot.pause()
        assert grid.matrix.shape == shape


async def test_wide_integers_sit_under_their_column_labels(reader):
    lines = await opened_values(reader, "wide_ints")
    header, row = lines[1], lines[2]
    assert row.split() == ["0", "9223372036854775807", "-2147483648", "-9223372036854775808"]  # the rest past the edge
    # Each value ends where its column label ends: no value spills into its neighbour.
    assert right_edges(header) == right_edges(row)[1:]
    assert right_edges(lines[4])[1:] == right_edges(header)  # the row of 7s lines up too


async def test_arrows_move_one_column_per_key_press(reader):
    assert (await opened_values(reader, "floats", "right"))[1].split()[0] == "1"
    assert (await opened_values(reader, "floats", "right", "right", "right", "left"))[1].split()[0] == "2"


async def test_the_last_column_is_whole_when_scrolled_fully_right(reader):
    lines = await opened_values(reader, "floats", *["right"] * 40)
    assert lines[1].split()[-1] == "29"
    assert lines[2].split()[-1] == f"{FLOATS[0, 29]:.4g}"
    assert right_edges(lines[1]) == right_edges(lines[2])[1:]


@pytest.mark.parametrize("keys", [["end"], ["pagedown"] * 4])  # both scroll animated
async def test_the_last_row_shows_when_scrolled_to_the_bottom(reader, keys):
    lines = await opened_values(reader, "tall", *keys)
    labels = [line.split()[0] for line in lines[2:14]]
    assert labels == [str(r) for r in range(28, 40)]


@pytest.mark.parametrize("name, index, rows, columns", [
    ("tall", "2:5, 3:6", ["2", "3", "4"], ["3", "4", "5"]),
    ("tall", "35:, 7", ["35", "36", "37", "38", "39"], ["7"]),  # a vector: one column, x[:, 7]
    ("tall", "-1", [str(c) for c in range(12)], ["39"]),  # one index of the leading dimension
    ("cube", "1:3, 0, :", ["1", "2"], ["0", "1", "2", "3"]),
    ("cube", "4, 1:3", ["1", "2"], ["0", "1", "2", "3"]),
])
async def test_slices_are_labelled_with_the_tensor_indices(reader, name, index, rows, columns):
    lines = await opened_values(reader, name, *typed(index))
    assert lines[1].split() == columns
    assert [line.split()[0] for line in lines[2:2 + len(rows)]] == rows



@pytest.mark.parametrize("width", range(78, 89))
async def test_no_value_is_cut_at_the_right_edge(width):
    """A value cut short reads as another number (-1.927e-05 as -1.9): whole columns only."""
    async with GridApp().run_test(size=(width, 8)) as pilot:
        pilot.app.query_one(ValuesGrid).show(np.full((3, 30), -1.927e-05))
        await pilot.pause()
        lines = screen_text(pilot.app).splitlines()
    header, row = lines[0].split(), lines[1].split()
    assert row[0] == "0" and set(row[1:]) == {"-1.927e-05"}
    assert len(row) == len(header) + 1



async def test_a_tensor_with_no_values_says_so_and_keys_do_nothing(reader):
    # (0, 3, 0): the first matrix's index (0,) would be past the end of the size-0 dimension.
    lines = await opened_values(reader, "empty", "plus", "minus", *typed("0"))
    assert "no values: a tensor of shape [0, 3, 0] holds none" in lines[0]


async def test_damaged_values_say_so_and_leave_the_app_running(tmp_path):
    """A slot whose values do not fill its shape ended the whole session with exit status
    2 when opened (sweep R): the rest of the run was readable."""
    from tvis_tui.store import CallRecord, RunReader, RunWriter, Slot

    with RunWriter(tmp_path / "run") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="fc"))
        values = np.arange(30, dtype=np.float32)
        w.put_slots(1, [(Slot("output", 0, "out", shape=(50, 6), dtype="float32", values_dtype="<f4"),
                         values.tobytes())])
        w.close(status="ok")
    with RunReader(tmp_path / "run") as reader:
        app = ValuesApp(reader, reader.slots(1)[0])
        async with app.run_test(size=(120, 20)) as pilot:
            await settle(pilot)
            text = screen_text(app)
            assert "values damaged: corrupt run" in text and "a malformed slot record, call 1" in text
            await press(pilot, "d", "i")  # nothing to draw or index: no crash either
            assert app.is_running and "values damaged:" in screen_text(app)


async def test_a_single_value_has_no_dimensions_to_draw_or_index(tmp_path):
    """A 0-d tensor (a loss): `d` said "this view has one" dimension and `i` offered an
    index, answering `0` with "1 indices for 0 dimensions" (sweep R)."""
    from tvis_tui.store import CallRecord, RunReader, RunWriter, Slot

    with RunWriter(tmp_path / "run") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="loss", kind="module", name="loss"))
        value = np.array(2.5, dtype=np.float32)
        w.put_slots(1, [(Slot("output", 0, "out", shape=(), dtype="float32", values_dtype="<f4"), value.tobytes())])
        w.close(status="ok")
    with RunReader(tmp_path / "run") as reader:
        app = ValuesApp(reader, reader.slots(1)[0])
        async with app.run_test(size=(100, 20)) as pilot:
            await settle(pilot)
            assert "= 2.5" in screen_text(app)
            await press(pilot, "d", "i")
            assert [n.message for n in app._notifications] == [
                "a picture needs two dimensions: this view has none: a single value",
                "a single value (0 dimensions): nothing to index"]
