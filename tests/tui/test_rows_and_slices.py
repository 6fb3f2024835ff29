"""Unit tests without a terminal: the tree's paging over wide calls, and value slicing."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tvis_tui.screens.run_picker import SCRIPT_WIDTH, script_label
from tvis_tui.screens.stepping import Stepper
from tvis_tui.store import CallRecord, RunReader, RunWriter
from tvis_tui.widgets.call_rows import PAGE, CallRows, Row
from tvis_tui.widgets.call_tree import row_label
from tvis_tui.widgets.values_grid import format_index, parse_index

WIDE = 2 * PAGE + 50


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory):
    """One step: WIDE top-level data calls, then a forward call with WIDE children."""
    path = tmp_path_factory.mktemp("wide") / "run"
    with RunWriter(path) as w:
        seq = 0
        for _ in range(WIDE):
            seq += 1
            w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="data", kind="function", name="batch"))
        seq += 1
        parent = seq
        w.put_call(CallRecord(seq=seq, parent=0, depth=0, step=1, phase="forward", kind="module", name="model"))
        for i in range(WIDE):
            seq += 1
            w.put_call(CallRecord(seq=seq, parent=parent, depth=1, step=1, phase="forward", kind="module",
                                  name=f"layers.{i}"))
    reader = RunReader(path)
    yield reader
    reader.close()


def _call_seqs(rows) -> list[int]:
    return [r.key[1] for r in rows.rows if r.key[0] == "call"]


@pytest.mark.parametrize("target", [PAGE + 20, WIDE + 1 + PAGE + 20])
def test_reveal_loads_only_the_page_holding_the_call(wide_run, target):
    rows = CallRows(Stepper(wide_run))
    index = rows.reveal(target)
    assert rows.rows[index].key == ("call", target)
    assert len(rows.rows) < 2 * PAGE + 10  # never the whole level
    more = [r for r in rows.rows if r.key[0] == "more"]
    assert more and len(set(_call_seqs(rows))) == len(_call_seqs(rows))


def test_expanding_every_more_row_lists_each_child_once_in_order(wide_run):
    rows = CallRows(Stepper(wide_run))
    rows.reveal(WIDE + 1 + PAGE + 20)
    while (more := next((i for i, r in enumerate(rows.rows) if r.key[0] == "more"), None)) is not None:
        rows.expand(more)
    children = [s for s in _call_seqs(rows) if s > WIDE + 1]
    assert children == list(range(WIDE + 2, 2 * WIDE + 2))


def test_collapse_hides_the_subtree(wide_run):
    rows = CallRows(Stepper(wide_run))
    rows.reveal(WIDE + 5)
    model = rows.index(("call", WIDE + 1))
    rows.collapse(model)
    assert rows.index(("call", WIDE + 5)) is None and not rows.rows[model].expanded


def test_parse_index_takes_numbers_slices_and_ellipsis_only():
    assert parse_index("0, :, 2:8:2", (2, 3, 9, 9)) == (0, slice(None), slice(2, 8, 2))
    assert parse_index("[1]", (2, 2)) == (1,)
    assert parse_index("..., 3", (2, 3, 4)) == (slice(None), slice(None), 3)
    assert parse_index("1, ..., 0", (2, 3, 4)) == (1, slice(None), 0)
    assert parse_index("1, 2, ...", (2, 3)) == (1, 2)
    assert format_index((1, slice(2, None)), 3) == "[1, 2:, :]"
    arr = np.arange(24).reshape(2, 3, 4)
    assert arr[parse_index("1, :, -1", arr.shape)].tolist() == [15, 19, 23]


@pytest.mark.parametrize("text, reason", [
    ("__import__('os')", "bad index"),
    ("1, 2, 3", "3 indices for 2 dimensions [2, 3]"),
    ("1:2:3:4", "bad slice '1:2:3:4'"),
    ("::0", "the step cannot be 0"),
    ("a:3", "bad index 'a:3'"),
    ("99999999999999999999999", "bad index"),
    ("2", "index 2 is out of range for dimension 0 of size 2 (-2 to 1)"),
    ("0, -4", "index -4 is out of range for dimension 1 of size 3"),
    ("..., ...", "one ... at most"),
])
def test_bad_indices_say_why_in_one_line(text, reason):
    with pytest.raises(ValueError, match=re.escape(reason)) as caught:
        parse_index(text, (2, 3))
    assert "\n" not in str(caught.value)


def test_run_list_tells_two_train_py_scripts_apart():
    assert script_label("examples/char_lm/train.py") == "examples/char_lm/train.py"
    assert script_label("pkg.train") == "pkg.train"  # -m mode
    long = script_label("/home/me/projects/a_rather_long_project_name/vision/train.py")
    assert long == "…/vision/train.py" and len(long) <= SCRIPT_WIDTH
    assert script_label("/x/" + "y" * 40 + ".py") == "…/" + "y" * 40 + ".py"  # the name is never cut


def test_blanking_a_cut_column_counts_wide_characters_by_cell():
    from rich.segment import Segment
    from textual.strip import Strip

    from tvis_tui.widgets.row_table import _blank

    strip = Strip([Segment("ab"), Segment("日本語"), Segment("cd")])  # 2 + 6 + 2 cells
    cut = _blank(strip, 2, 10, "›", at_end=True)
    assert cut.cell_length == 10 and cut.text == "ab       ›"


def test_no_text_is_left_under_the_scrollbar_past_a_cut_column():
    """A terminal that repaints the table's lines without the scrollbar over them showed
    two letters of the cut column there ("›in" in a real tmux)."""
    from rich.segment import Segment
    from textual.strip import Strip

    from tvis_tui.widgets.row_table import _blank

    strip = Strip([Segment("0  blob 37%  ring 20%")])  # 21 cells; 19 in view, 2 under the scrollbar
    cut = _blank(strip, 3, 19, "›", at_end=True)
    assert cut.cell_length == 21 and cut.text == "0" + " " * 17 + "›  "


@pytest.mark.parametrize("text", ["--1", "²", "1_000", "0x10"])
def test_odd_numbers_are_refused_with_our_reason(text):
    with pytest.raises(ValueError, match="bad index"):
        parse_index(text, (4,))


def _call_row(name: str, type_: str, depth: int = 3, **fields) -> Row:
    call = CallRecord(seq=5, parent=4, depth=depth, step=1, phase="forward", kind="module",
                      name=name, type=type_, duration_ns=25_100_000, **fields)
    return Row(key=("call", 5), depth=depth, call=call)


def test_a_call_row_that_does_not_fit_keeps_its_duration_and_the_end_of_its_name_but_not_too_little():
    row = _call_row("encoder.layers.0.self_attn", "MultiheadAttention")
    assert row_label(row).plain == "        encoder.layers.0.self_attn MultiheadAttention  25.1 ms"
    assert row_label(row, 44).plain == "        encoder.layers.0.self_attn  25.1 ms"  # the class goes first
    assert row_label(row, 30).plain == "        ….0.self_attn  25.1 ms"
    flagged = _call_row("encoder.layers.0.self_attn", "MultiheadAttention", nonfinite_output=True)
    # Ten characters of the name before the duration: `…attn` does not name a layer.
    assert row_label(flagged, 30).plain == "        …s.0.self_attn NaN/Inf"
    assert row_label(flagged, 39).plain == "        …s.0.self_attn NaN/Inf  25.1 ms"
    assert all(len(row_label(row, w).plain) <= w for w in range(12, 70))


def test_a_bare_index_that_does_not_fit_keeps_what_fits_of_its_class():
    row = _call_row("2", "MaxPool2d", depth=1)  # a root Sequential's child
    assert row_label(row).plain == "    2 MaxPool2d  25.1 ms"
    assert row_label(row, 20).plain == "    2 MaxP…  25.1 ms"
    named = _call_row("features.2", "MaxPool2d", depth=1)
    assert row_label(named, 24).plain == "    features.2  25.1 ms"  # a name: the class goes first
