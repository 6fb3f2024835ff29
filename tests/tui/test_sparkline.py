"""The inspector's histogram sparkline: bins merged into fewer cells keep the shape."""

from __future__ import annotations

import pytest

from tvis_tui.widgets.sparkline import sparkline


@pytest.mark.parametrize("width", [12, 16, 7])
def test_a_flat_histogram_stays_flat_in_any_width(width):
    assert str(sparkline([10] * 32, width=width)) == "█" * width


def test_an_empty_bin_is_a_gap_and_a_small_one_still_shows():
    assert str(sparkline([0, 1, 0, 100], width=4)) == " ▁ █"


def test_merging_keeps_where_the_mass_is():
    counts = [0] * 32
    counts[31] = 50  # everything at the top of the range
    line = str(sparkline(counts, width=12))
    assert line == " " * 11 + "█"
    assert str(sparkline([], width=12)) == "" and str(sparkline([0] * 32, width=12)) == " " * 12
