"""The step view's sample pane: each recorded sample as the data pipeline made it, its
images drawn in the terminal, and how the drawing method is chosen."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from conftest import SAMPLES, write_step
from pilot import opened, press
from screen_text import screen_text
from textual.app import App, ComposeResult
from textual_image.widget import HalfcellImage

from tvis_tui.errors import TvisError
from tvis_tui.screens.step_view import StepScreen
from tvis_tui.store import RunWriter
from tvis_tui.store.samples import put_batch, put_sample
from tvis_tui.widgets import picture
from tvis_tui.widgets.sample_pane import SamplePane, sample_parts


def test_parts_follow_the_pipeline_and_name_repeats():
    parts = sample_parts(SAMPLES[0])
    assert [p.label for p in parts] == ["transform input (Compose)", "0:ToTensor", "1:Normalize",
                                        "item[0]", "item[1]"]
    assert [p.pixels is not None for p in parts] == [True, True, True, False, False]
    # What black and white stand for, where the image was stretched from its own range.
    assert parts[0].note == "uint8 [8, 8, 3]" and parts[1].note == "float32 [3, 8, 8]"
    assert parts[2].note == "float32 [3, 8, 8]  -2.1 (black) to 2.6 (white)"
    assert parts[3].note == "same as 1:Normalize"  # the item is the pipeline's output: not drawn twice
    assert parts[4].note == "0"
    flip = copy.deepcopy(SAMPLES[0])  # a stage that returned its input (a flip that did not flip)
    stages = flip["transforms"][0]["stages"]
    stages.insert(1, {"name": "1:RandomFlip", "value": stages[0]["value"]})
    assert [p.note for p in sample_parts(flip)][2] == "unchanged from 0:ToTensor"


def test_parts_write_text_tokens_and_small_tensors():
    parts = sample_parts(SAMPLES[1])
    assert [(p.label, p.text) for p in parts] == [
        ("item['text']", "the dog barked"), ("item['label']", None), ("CharTok.encode", "the dog barked")]
    assert parts[2].note == "5 ids  5 6 7 0 8"
    ids = np.array([3, 1, 4], dtype="<i8")
    small = {"kind": "tensor", "shape": [3], "dtype": "int64", "values_dtype": "int64", "values": ids.tobytes()}
    big = {"kind": "tensor", "shape": [4096], "dtype": "float32", "values": None,
           "stats": {"min": -1.5, "max": 2.0, "mean": 0.25}}
    many = np.arange(100, dtype="<i8")
    long = {"kind": "tensor", "shape": [100], "dtype": "int64", "values_dtype": "int64", "values": many.tobytes()}
    parts = sample_parts({"item": {"kind": "list", "items": [[0, small], [1, big], [2, long]]}})
    assert [(p.note, p.text) for p in parts[:2]] == [("int64 [3]", "3 1 4"),
                                                     ("float32 [4096]  -1.5 to 2, mean 0.25", None)]
    assert parts[2].note == "int64 [100], the first 64" and parts[2].text.endswith(" 62 63 …")


async def test_step_view_draws_the_selected_sample(healthy_run):
    async with opened(healthy_run, 10, size=(120, 40)) as pilot:  # a call of step 1
        await press(pilot, "p")
        assert isinstance(pilot.app.screen, StepScreen)
        pane = pilot.app.screen.query_one(SamplePane)
        text = screen_text(pilot.app)
        assert "sample 12 (#0)" in text and "1:Normalize" in text
        assert "▀" * 8 in text  # the 8 x 8 picture in half blocks: 8 cells wide
        assert len(pane.query(HalfcellImage)) == 3  # raw, after ToTensor, after Normalize
        await press(pilot, "j")
        text = screen_text(pilot.app)
        assert "sample 7 (#1)" in text and "the dog barked" in text and "▀" not in text
        await press(pilot, "j")
        text = screen_text(pilot.app)
        assert "sample 3 (#2)" in text
        assert "not described: tvis describes the first 2 samples of each batch" in _pane(text)
        await press(pilot, "right_square_bracket")  # step 2: no batch recorded, no pane
        assert not pane.display and "sample 12" not in screen_text(pilot.app)


async def test_a_step_without_predictions_still_lists_its_samples(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_batch(w, {"seq": 1, "step": 1, "indices": [12, 7, 3], "size": 3, "detailed": 2})
        for sample in SAMPLES:
            put_sample(w, 1, sample)
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "samples (no predictions recorded for step 1)" in text and "sample 12 (#0)" in text
        await press(pilot, "end")
        assert "sample 3 (#2)" in screen_text(pilot.app)


def _pane(text: str) -> str:
    """The sample pane's words in reading order, however its lines wrapped."""
    return " ".join(" ".join(line.split("││")[1].strip("│ ").split()) for line in text.splitlines()
                    if "││" in line)


class _OnePicture(App[None]):
    def compose(self) -> ComposeResult:
        pixels = np.zeros((2, 2, 3), np.uint8)
        pixels[0, :, 0] = 255  # red above
        pixels[1, :, 2] = 255  # blue below
        yield picture.picture(pixels, 2)


async def test_half_blocks_draw_the_pixels_colors():
    app = _OnePicture()
    async with app.run_test(size=(10, 4)) as pilot:
        await pilot.pause()
        strip = app.screen.get_widget_at(0, 0)[0].render_line(0)
        cells = [s for s in strip if s.text == "▀"]
        assert len(cells) == 2
        for cell in cells:  # upper half red, lower half blue
            assert cell.style.color.triplet == (255, 0, 0) and cell.style.bgcolor.triplet == (0, 0, 255)


def test_an_unknown_drawing_method_is_one_line():
    with pytest.raises(TvisError, match="'sixels' is not a drawing method; use one of auto, sixel, kitty"):
        picture.choose("sixels")
