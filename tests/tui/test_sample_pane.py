"""The step view's sample pane: each recorded sample as the data pipeline made it, its
images drawn in the terminal, and how the drawing method is chosen."""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from conftest import PREDICTIONS, RAW, SAMPLES, image_value, tensor_slot, write_step
from pilot import opened, press
from screen_text import screen_text
from textual.app import App, ComposeResult
from textual_image.widget import HalfcellImage

from tvis_tui.errors import TvisError
from tvis_tui.screens.step_view import StepScreen
from tvis_tui.store import RunWriter, StepRecord
from tvis_tui.store.samples import put_batch, put_prediction, put_sample
from tvis_tui.widgets import picture
from tvis_tui.widgets.row_table import RowTable
from tvis_tui.widgets.sample_pane import SamplePane, picture_cells, sample_parts


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


def test_statistics_alone_never_claim_a_stage_did_nothing():
    """Past the byte cap (or with --capture summary) a flip keeps shape, dtype and every
    statistic: equal descriptions then say nothing about equal values."""
    stats_only = {"kind": "tensor", "shape": [3, 224, 224], "dtype": "float32", "values": None,
                  "stats": {"min": 0.0, "max": 1.0, "mean": 0.5}}
    sample = {"transforms": [{"attr": "transform", "name": "Compose", "input": stats_only,
                              "stages": [{"name": "0:RandomHorizontalFlip", "value": dict(stats_only)}]}],
              "item": {"kind": "dict", "items": [["label", {"kind": "scalar", "value": 1}],
                                                 ["weight", {"kind": "scalar", "value": 1}]]}}
    notes = [p.note for p in sample_parts(sample)]
    assert notes == ["float32 [3, 224, 224]  0 to 1, mean 0.5"] * 2 + ["1", "1"]


def test_nested_items_are_spread_and_empty_images_are_named():
    view = image_value(RAW, "HWC", 0.0, 255.0, kind="ndarray", shape=[8, 8, 3], dtype="uint8")
    empty = {"kind": "image", "mode": "RGB", "size": [5, 0],
             "image": {"shape": [0, 5, 3], "data": b"", "layout": "PIL RGB", "lo": 0.0, "hi": 255.0,
                       "stride": 1}}
    item = {"kind": "tuple", "items": [[0, {"kind": "tuple", "items": [[0, view], [1, empty]]}],
                                       [1, {"kind": "scalar", "value": 3}]]}
    parts = sample_parts({"item": item})
    assert [p.label for p in parts] == ["item[0][0]", "item[0][1]", "item[1]"]
    assert parts[0].pixels is not None and parts[1].pixels is None
    assert parts[1].note == "PIL RGB image 5 x 0  (an empty image)"


def test_pictures_fit_the_pane_and_keep_their_aspect():
    assert picture_cells(8, 8, 40, 20) == 8  # a cell per pixel column...
    assert picture_cells(28, 28, 40, 20) == 28
    assert picture_cells(224, 224, 40, 30) == 32  # ...up to 32 cells
    assert picture_cells(224, 224, 20, 30) == 20  # and the pane's width
    assert picture_cells(1024, 40, 40, 20) == 1  # a tall spectrogram: its height fits the pane
    assert picture.rows(1024, 40, picture_cells(1024, 40, 40, 20)) <= 20
    assert picture.rows(0, 0, 8) == 1  # an empty image is no division by zero


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
    decoded = sample_parts({"item": {**small, "decoded": "dog", "tokenizer": "CharTok"}})[0]
    assert (decoded.note, decoded.text) == ("int64 [3]  CharTok text", "'dog'\n3 1 4")


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
        assert "samples (no class or token predictions to decode in step 1)" in text and "sample 12 (#0)" in text
        # A regression loss has no classes to predict, but each sample's loss says which
        # ones the model got worst (here only the worst two were kept).
        table = pilot.app.screen.query_one(RowTable)
        assert [c.label.plain for c in table.ordered_columns] == ["#", "sample", "loss"]
        assert [[str(cell) for cell in table.get_row_at(r)] for r in range(3)] == [
            ["0", "12", "0.25"], ["1", "7", "2.5"], ["2", "3", ""]]
        await press(pilot, "end")
        assert "sample 3 (#2)" in screen_text(pilot.app)


async def test_a_step_without_predictions_or_batch_lists_the_per_sample_losses(tmp_path):
    # Batches the script made itself (no DataLoader): the losses alone, by position.
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        w.put_slots(1, [tensor_slot("per_sample", 0, "per_sample", np.array([0.5, 1.5, 3.0], np.float32))])
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2) as pilot:
        await press(pilot, "p")
        table = pilot.app.screen.query_one(RowTable)
        assert [c.label.plain for c in table.ordered_columns] == ["#", "loss"]
        assert [[str(cell) for cell in table.get_row_at(r)] for r in range(3)] == [
            ["0", "0.5"], ["1", "1.5"], ["2", "3"]]
        assert not pilot.app.screen.query_one(SamplePane).display


def _run_with(path, samples: list[dict], predictions: dict | None = None, size: int = 2):
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_batch(w, {"seq": 1, "step": 1, "indices": list(range(40, 40 + size)), "size": size, "detailed": 2})
        for sample in samples:
            put_sample(w, 1, sample)
        if predictions is not None:
            put_prediction(w, predictions)
        w.close(status="ok", steps_recorded=1)
    return path


TOKEN_ROWS = [{"top": [["a", 0, 0.9]], "target": "a", "target_index": 0, "correct": True}] * 6


async def test_rows_per_token_are_not_taken_for_samples(tmp_path):
    """Logits flattened to (B*T, V) with no tokenizer found give a row per token: row 1 is
    not the batch's sample 1, and neither the table nor the pane may say it is (a run
    recorded before predictions kept their row count and first dimension cannot tell
    which sample it is)."""
    run = _run_with(tmp_path / "run", SAMPLES[:2], {"kind": "classes", "step": 1, "samples": TOKEN_ROWS})
    async with opened(run, 2) as pilot:
        await press(pilot, "p")
        text = _pane(screen_text(pilot.app))
        assert "which of the batch's 2 samples these prediction rows belong to is not known" in text
        assert "sample 40" not in text
        assert "  40" not in screen_text(pilot.app)  # no dataset index beside a token's row


async def test_rows_per_token_lead_to_the_sample_they_belong_to(tmp_path):
    record = {"kind": "classes", "step": 1, "rows": 6, "leading": 2, "samples": TOKEN_ROWS}
    run = _run_with(tmp_path / "run", SAMPLES[:2], record)
    async with opened(run, 2) as pilot:
        await press(pilot, "p")
        assert "sample 12 (#0), row 1 of its 3" in screen_text(pilot.app)  # the pane's title
        await press(pilot, "j", "j", "j", "j")  # the 5th row: the second sample's second token
        assert "sample 7 (#1), row 2 of its 3" in screen_text(pilot.app)
        table = [line for line in screen_text(pilot.app).splitlines() if "a 90%" in line]
        assert ["  40 " in line for line in table] == [True] * 3 + [False] * 3


async def test_rows_whose_first_dimension_is_not_the_batch_are_not_mapped(tmp_path):
    """(T, B) logits flattened time-major: 6 rows from 2 samples, but not 3 per sample in a row."""
    record = {"kind": "classes", "step": 1, "rows": 6, "leading": 3, "samples": TOKEN_ROWS}
    run = _run_with(tmp_path / "run", SAMPLES[:2], record)
    async with opened(run, 2) as pilot:
        await press(pilot, "p")
        assert ("which of the batch's 2 samples these prediction rows belong to is not known (the "
                "logits' first dimension is 3, not 2)") in _pane(screen_text(pilot.app))


async def test_pictures_are_sized_again_when_the_pane_resizes(tmp_path):
    big = np.zeros((64, 64, 3), np.uint8)
    sample = {"position": 0, "index": 40,
              "item": image_value(big, "HWC", 0.0, 255.0, kind="ndarray", shape=[64, 64, 3], dtype="uint8")}
    run = _run_with(tmp_path / "run", [sample], size=1)
    async with opened(run, 2, size=(160, 48)) as pilot:
        await press(pilot, "p")
        pane = pilot.app.screen.query_one(SamplePane)
        assert pane.query_one(HalfcellImage).styles.width.value == 32
        await pilot.resize_terminal(80, 24)
        await press(pilot)
        narrow = pane.query_one(HalfcellImage)
        assert narrow.region.right <= pane.content_region.right  # not cut at the pane's edge
        assert narrow.region.height <= pane.content_region.height
        await press(pilot, "tab")  # into the pane: j and k scroll it, as in every other pane
        await press(pilot, "j")
        assert pane.scroll_y == 1
        await press(pilot, "k")
        assert pane.scroll_y == 0


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


async def test_predictions_from_nan_logits_say_so_instead_of_ranking_them(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        for step in (1, 2):
            write_step(w, step, np.random.default_rng(0))
        put_prediction(w, {"kind": "classes", "names": True, "classes": 2, "step": 1, "loss": "F.cross_entropy",
                           "samples": [{"top": [["cat", 0, 0.9], ["dog", 1, 0.1]], "target": "cat",
                                        "target_index": 0, "correct": True},
                                       {"top": [], "nonfinite": True, "target": "dog", "target_index": 1}]})
        put_prediction(w, {"kind": "tokens", "tokenizer": "CharTok", "step": 2, "loss": "F.cross_entropy",
                           "samples": [{"predicted": "aaa", "predicted_ids": [0, 0, 0], "target": "abc",
                                        "target_ids": [0, 1, 2], "accuracy": 1 / 3, "nonfinite": 2}]})
        w.close(status="ok", steps_recorded=2)
    async with opened(tmp_path / "run", 2) as pilot:
        await press(pilot, "p")
        assert "1 of 1 right  1 with NaN/Inf logits" in screen_text(pilot.app)
        rows = [line for line in screen_text(pilot.app).splitlines() if "cat" in line or "dog" in line]
        assert "cat 90%" in rows[0] and "✓" in rows[0]
        assert "NaN/Inf logits" in rows[1] and "%" not in rows[1] and "✗" not in rows[1]
        await press(pilot, "right_square_bracket")
        assert "NaN/Inf at 2" in screen_text(pilot.app)


async def test_one_token_predictions_show_a_space_or_newline_as_a_mark(tmp_path):
    rows = [{"predicted": p, "predicted_ids": [i], "target": t, "target_ids": [j], "accuracy": float(i == j)}
            for p, i, t, j in ((" ", 0, "a", 1), ("b", 2, "\n", 3), ("c d", 4, "c d", 4))]
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_prediction(w, {"kind": "tokens", "tokenizer": "itos", "step": 1, "loss": "F.cross_entropy",
                           "samples": rows})
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert re.search(r"0 +␣ +a +0%", text) and re.search(r"1 +b +⏎ +0%", text)
        assert re.search(r"2 +c d +c d +100%", text)  # spaces inside a text stay spaces


async def test_a_sample_of_a_split_names_its_index_in_the_full_dataset(tmp_path):
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_batch(w, {"seq": 1, "step": 1, "indices": [12, 7], "size": 2, "detailed": 2})
        put_sample(w, 1, {**SAMPLES[0], "base_index": 40})
        put_sample(w, 1, SAMPLES[1])
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        assert "sample 12 (#0; 40 before the split)" in screen_text(pilot.app)
        await press(pilot, "end")
        assert "sample 7 (#1)" in screen_text(pilot.app)


async def test_multi_label_predictions_show_every_label_said_and_the_target_set(tmp_path):
    from tvis_tui.screens.step_view import _class_cells

    rows = [{"top": [["red", 0, 0.9], ["big", 2, 0.7], ["shiny", 3, 0.6], ["wet", 4, 0.55], ["round", 1, 0.2]],
             "predicted": [0, 2, 3, 4], "target": "red, big, shiny, wet", "target_indices": [0, 2, 3, 4],
             "correct": True},
            {"top": [["round", 1, 0.6], ["red", 0, 0.1], ["big", 2, 0.05]], "predicted": [1],
             "target": "none", "target_indices": [], "correct": False}]
    async with opened(_labels_run(tmp_path / "run", rows, ["red", "round", "big", "shiny", "wet"]), 2,
                      size=(120, 40)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "predictions from BCEWithLogitsLoss  1 of 2 right" in text
        shown = [line for line in text.splitlines() if "red" in line and "%" in line]
        # All four labels said, though the table shows three classes otherwise; in index
        # order, as the target lists them, then their probabilities' range.
        assert "red, big, shiny, wet  55–90%" in shown[0] and "round" not in shown[0]
        assert "none" in shown[1] and "✗" in shown[1]
    _, said, others, _ = _class_cells(rows[0], labels=True)
    assert (said.plain, str(said.style), others.plain) == ("red, big, shiny, wet  55–90%", "bold", "")
    _, said, others, _ = _class_cells(rows[1], labels=True)
    assert (said.plain, others.plain, str(others.style)) == ("round  60%", "red 10%  big 5%", "dim")
    _, said, others, _ = _class_cells({"top": [["red", 0, 0.3]], "target": "none", "correct": True}, labels=True)
    assert (said.plain, others.plain) == ("none", "red 30%")


async def test_six_labels_said_leave_the_prediction_in_view_at_120_columns(tmp_path):
    # A model ending in a sigmoid before BCEWithLogitsLoss says every label (sweep O).
    top = [[str(i), i, 0.64 - 0.01 * i] for i in (2, 1, 4, 3, 5, 0)]
    rows = [{"top": top, "predicted": list(range(6)), "target": "0, 3, 4", "target_indices": [0, 3, 4],
             "correct": False}] * 3
    async with opened(_labels_run(tmp_path / "run", rows, [str(i) for i in range(6)]), 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        assert "0, 3, 4  ✗  0, 1, 2, 3, 4, 5  59–64%" in screen_text(pilot.app)


def _labels_run(path, rows: list[dict], labels: list[str]):
    """A run of one step whose predictions are multi-label `rows` over `labels`."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_prediction(w, {"kind": "labels", "names": not labels[0].isdigit(), "classes": len(labels),
                           "step": 1, "loss": "BCEWithLogitsLoss", "samples": rows})
        w.close(status="ok", steps_recorded=1)
    return path


def _pixel_rows(per_sample: int, samples: int, stored: int) -> dict:
    """Segmentation predictions: a row per pixel, sample after sample, the first stored."""
    rows = [{"top": [["road", 0, 0.8], ["car", 1, 0.2]], "target": "road" if r % 2 else "car",
             "target_index": int(r % 2 == 0), "correct": r % 2 == 1} for r in range(stored)]
    return {"kind": "classes", "names": True, "classes": 2, "step": 1, "loss": "CrossEntropyLoss",
            "rows": per_sample * samples, "leading": samples, "loss_seq": 1, "samples": rows}


async def test_pixel_rows_show_their_samples_loss_and_the_score_says_what_it_counts(tmp_path):
    # 2 images of 4 pixels: the per-sample loss has one value per image, not per row.
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        w.put_slots(1, [tensor_slot("per_sample", 0, "per_sample", np.array([0.5, 1.5], np.float32))])
        put_batch(w, {"seq": 1, "step": 1, "indices": [None, None], "size": 2, "detailed": 0})
        put_prediction(w, _pixel_rows(4, 2, 6))  # 6 of the 8 rows stored
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "3 of the first 6 rows right" in text
        table = pilot.app.screen.query_one(RowTable)
        losses = [table.get_row_at(r)[2].plain for r in range(6)]
        assert losses == ["0.5"] * 4 + ["1.5"] * 2
        assert [table.get_row_at(r)[1].plain for r in range(6)] == [""] * 6  # no index: not "None"


async def test_a_sample_shows_its_row_of_the_batchs_tokenizer_call(tmp_path):
    # HF style: the collate_fn tokenizes the batch's texts in one call.
    texts = {"position": 0, "index": 4, "item": {"kind": "text", "text": "a cat sat", "length": 9}}
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_batch(w, {"seq": 1, "step": 1, "indices": [4, 9], "size": 2, "detailed": 2,
                      "tokens": [{"tokenizer": "WordTok", "method": "__call__", "text": ["a cat sat", "a dog"],
                                  "ids": [1, 2, 3, 1, 4, 0], "n_ids": 6, "shape": [2, 3]}]})
        put_sample(w, 1, texts)
        put_sample(w, 1, {**texts, "position": 1, "index": 9, "item": {"kind": "text", "text": "a dog"}})
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(120, 40)) as pilot:
        await press(pilot, "p")
        pane = _pane(screen_text(pilot.app))
        assert "WordTok.__call__ (batch row 0) 3 ids 1 2 3" in pane
        await press(pilot, "end")
        pane = _pane(screen_text(pilot.app))
        assert "WordTok.__call__ (batch row 1) 3 ids 1 4 0" in pane


def _two_batch_run(path, validation_seq: int):
    """Step 1 draws its training batch (seq 5) and a validation batch; the training loss,
    whose predictions are shown, is call 11."""
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        put_batch(w, {"seq": validation_seq, "step": 1, "indices": [90, 91, 92], "size": 3, "detailed": 0})
        put_batch(w, {"seq": 5, "step": 1, "indices": [12, 7, 3], "size": 3, "detailed": 2})
        for sample in SAMPLES:
            put_sample(w, 5, sample)
        put_prediction(w, {**PREDICTIONS[1], "loss_seq": 11})
        w.close(status="ok", steps_recorded=1)
    return path


async def test_a_step_that_validates_after_its_loss_shows_the_samples_of_its_training_batch(tmp_path):
    # The validation after opt.step() draws its batch after the loss (sweep N).
    async with opened(_two_batch_run(tmp_path / "run", validation_seq=13), 2) as pilot:
        await press(pilot, "p")
        table = pilot.app.screen.query_one(RowTable)
        assert [str(table.get_row_at(r)[1]) for r in range(3)] == ["12", "7", "3"]
        assert "sample 12 (#0)" in screen_text(pilot.app)


async def test_a_batch_drawn_between_the_training_batch_and_its_loss_shows_no_samples(tmp_path):
    # A validation at the top of the loop body: which batch the loss saw is not certain,
    # and another batch's samples beside these losses would mislead (review).
    async with opened(_two_batch_run(tmp_path / "run", validation_seq=8), 2) as pilot:
        await press(pilot, "p")
        table = pilot.app.screen.query_one(RowTable)
        assert [str(table.get_row_at(r)[1]) for r in range(3)] == ["", "", ""]
        assert not pilot.app.screen.query_one(SamplePane).display


def _broadcast_run(path, broadcast: dict):
    with RunWriter(path) as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=14, loss=23.4,
                              extra={"per_sample_loss": {"seq": 12, "trains": True, "broadcast": broadcast}}))
        w.close(status="ok", steps_recorded=1)
    return path


async def test_a_loss_that_broadcast_its_input_against_its_target_says_so(tmp_path):
    broadcast = {"input": [32, 1], "target": [32], "shape": [32, 32]}
    async with opened(_broadcast_run(tmp_path / "run", broadcast), 2, size=(80, 24)) as pilot:
        await press(pilot, "p")
        assert "step 1  loss 23.4  loss input [32, 1] and target [32] broadcast to [32, 32]" in screen_text(pilot.app)


async def test_a_damaged_broadcast_record_is_left_out_not_a_crash(tmp_path):
    async with opened(_broadcast_run(tmp_path / "run", {"target": [32]}), 2, size=(80, 24)) as pilot:
        await press(pilot, "p")
        text = screen_text(pilot.app)
        assert "step 1  loss 23.4" in text and "broadcast" not in text


async def test_a_samples_class_label_is_named_as_the_table_names_it(healthy_run):
    # The label was a bare 0 beside a table that said `cat` (sweep N).
    async with opened(healthy_run, 10, size=(120, 90)) as pilot:  # tall: the label is last
        await press(pilot, "p")
        assert "item[1] 0 (cat)" in _pane(screen_text(pilot.app))
        await press(pilot, "down")
        assert "item['label'] 1 (dog)" in _pane(screen_text(pilot.app))


@pytest.mark.parametrize("made_by, said", [
    ({}, "softmax"),  # a run recorded before a sigmoid was told apart
    ({"probabilities_from": "softmax"}, "softmax"),
    ({"probabilities_from": "sigmoid"}, "sigmoid"),  # a model ending in nn.Sigmoid (sweep O)
])
async def test_a_loss_fed_probabilities_says_so(tmp_path, made_by, said):
    # softmax before CrossEntropyLoss: predictions look sensible, the loss barely moves (sweep N).
    with RunWriter(tmp_path / "run") as w:
        w.put_meta(script="train.py", argv=[], started_at="2026-12-01T10:00:00", status="running")
        write_step(w, 1, np.random.default_rng(0))
        summary = {"seq": 12, "count": 3, "trains": True, "probabilities": True, **made_by}
        w.put_step(StepRecord(step=1, first_seq=1, last_seq=14, loss=1.38, extra={"per_sample_loss": summary}))
        w.close(status="ok", steps_recorded=1)
    async with opened(tmp_path / "run", 2, size=(100, 24)) as pilot:
        await press(pilot, "p")
        assert f"step 1  loss 1.38  the loss was fed probabilities ({said} applied twice?)" in screen_text(pilot.app)
