"""The values view's `d`: a tensor's stored values as a picture, in colour where the tensor
is image-like, else in grey, smallest value black and largest white."""

from __future__ import annotations

import numpy as np
import pytest
from pilot import ValuesApp, press, settle
from screen_text import screen_text
from textual.app import App

from tvis_tui.store import CallRecord, RunReader, RunWriter, Slot
from tvis_tui.widgets.tensor_picture import tensor_picture

ALL = slice(None)

# Two 2 x 2 RGB images, channels first: red over blue, then all green.
IMAGES = np.zeros((2, 3, 2, 2), np.float32)
IMAGES[0, 0, 0, :] = 1.0
IMAGES[0, 2, 1, :] = 1.0
IMAGES[1, 1] = 1.0


def test_an_image_like_tensor_draws_the_whole_image_the_view_is_in():
    pixels, note = tensor_picture(IMAGES, (0, 1, ALL, ALL))  # the view: channel 1 of image 0
    assert note == "3 channels (C, H, W) of item [0]: 0 black, 1 white"
    assert pixels.tolist() == [[[255, 0, 0]] * 2, [[0, 0, 255]] * 2]
    hwc = np.moveaxis(IMAGES, 1, -1)  # (N, H, W, C), as a numpy pipeline holds them
    pixels, note = tensor_picture(hwc, (1, 0, ALL, ALL))
    assert note.startswith("3 channels (H, W, C) of item [1]") and pixels.tolist() == [[[0, 255, 0]] * 2] * 2


def test_any_other_view_draws_in_grey_and_nan_is_black():
    mask = np.tril(np.ones((3, 3), bool))  # a causal mask: a triangle at a glance
    pixels, note = tensor_picture(mask, (ALL, ALL))
    assert note == "grey: 0 black, 1 white" and pixels[:, :, 0].tolist() == [[255, 0, 0], [255, 255, 0],
                                                                                  [255, 255, 255]]
    weights = np.array([[-2.0, np.nan], [0.0, 2.0]])
    pixels, note = tensor_picture(weights, (ALL, ALL))
    assert note == "grey: -2 black, 2 white" and pixels[:, :, 0].tolist() == [[0, 0], [128, 255]]
    assert tensor_picture(np.full((2, 2), np.inf), (ALL, ALL))[0].tolist() == [[[0]] * 2] * 2
    assert tensor_picture(np.arange(4.0), (ALL,)) is None  # one dimension: no picture
    ambiguous = np.zeros((3, 4, 3))  # channels first or last: not known, so the view in grey
    assert tensor_picture(ambiguous, (0, ALL, ALL))[1].startswith("grey")




@pytest.fixture
def reader(tmp_path) -> RunReader:
    with RunWriter(tmp_path / "run") as w:
        w.put_call(CallRecord(seq=1, parent=0, depth=0, step=1, phase="forward", kind="module", name="conv"))
        tensors = {"args[0]": IMAGES, "bias": np.arange(4, dtype=np.float32)}
        w.put_slots(1, [(Slot("input", i, name, shape=a.shape, dtype=str(a.dtype), values_dtype=a.dtype.str),
                         a.tobytes()) for i, (name, a) in enumerate(tensors.items())])
        w.close(status="ok")
    with RunReader(tmp_path / "run") as reader:
        yield reader


def _top_and_bottom(app: App) -> tuple[set, set]:
    """The colours of the picture's top pixel row and of its bottom one (half blocks: the
    upper halves of its first line of cells, the lower halves of its last)."""
    picture = app.screen.query_one("#values-picture").children[1]
    first, last = picture.render_line(0), picture.render_line(picture.size.height - 1)
    return ({tuple(s.style.color.triplet) for s in first if s.text == "▀"},
            {tuple(s.style.bgcolor.triplet) for s in last if s.text == "▀"})


def test_a_complex_view_draws_its_magnitude_and_says_so():
    """Sweep R: it drew the real part, a picture of half the values, saying nothing."""
    values = np.array([[3 + 4j, 0], [-5j, 1j]], dtype=np.complex64)
    pixels, note = tensor_picture(values, (ALL, ALL))
    assert note == "grey of |z|: 0 black, 5 white"
    assert pixels[:, :, 0].tolist() == [[255, 0], [255, 51]]


async def test_d_draws_the_values_and_walks_the_items_with_plus(reader):
    app = ValuesApp(reader, next(s for s in reader.slots(1) if s.path == "args[0]"))
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        await press(pilot, "d")
        assert "3 channels (C, H, W) of item [0]: 0 black, 1 white" in screen_text(app)
        assert _top_and_bottom(app) == ({(255, 0, 0)}, {(0, 0, 255)})  # red over blue
        await press(pilot, "plus")
        assert "of item [1]" in screen_text(app) and _top_and_bottom(app) == ({(0, 255, 0)}, {(0, 255, 0)})
        await press(pilot, "d")  # the numbers again
        assert "of item" not in screen_text(app) and "[1, 0, :, :]" in screen_text(app)


async def test_a_view_of_one_dimension_says_it_has_no_picture(reader):
    app = ValuesApp(reader, next(s for s in reader.slots(1) if s.path == "bias"))
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        await press(pilot, "d")
        assert [n.message for n in app._notifications] == ["a picture needs two dimensions: this view has one"]
        assert app.screen.query_one("#values").display
