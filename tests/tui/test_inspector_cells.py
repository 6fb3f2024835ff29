"""Inspector rows: what each cell of a tensor's summary says."""

from __future__ import annotations

from tvis_tui.store import Slot, TensorStats
from tvis_tui.widgets.inspector import COLUMNS, slot_cells


def _cells(dtype: str, lo: float, hi: float) -> dict[str, str]:
    slot = Slot("input", 0, "args[0]", shape=(4, 8), dtype=dtype, device="cpu",
                stats=TensorStats(numel=32, min=lo, max=hi, mean=(lo + hi) / 2, std=1.5))
    return dict(zip(COLUMNS, (cell.plain for cell in slot_cells(slot))))


def test_integer_tensors_show_min_and_max_in_full():
    cells = _cells("int32", -2147483648.0, 2147483647.0)
    assert (cells["min"], cells["max"]) == ("-2147483648", "2147483647")
    assert _cells("int64", 0.0, 50256.0)["max"] == "50256"  # a token id, not 5.026e+04


def test_float_tensors_keep_four_significant_digits():
    cells = _cells("float32", -2147483648.0, 50256.0)
    assert (cells["min"], cells["max"], cells["std"]) == ("-2.147e+09", "5.026e+04", "1.5")


def test_a_slot_named_like_its_role_is_named_once():
    named = {(role, path): slot_cells(Slot(role, 0, path, repr="1"))[0].plain
             for role, path in [("per_sample", "per_sample"), ("per_sample", "kept"), ("update", "Net.fc.weight")]}
    assert list(named.values()) == ["per_sample", "per_sample kept", "update Net.fc.weight"]


def test_a_tensor_shows_its_norm_and_its_share_of_zeros():
    # A gradient norm growing step after step says zero_grad is missing; a ReLU output's
    # zeros say how much of it is dead (sweep M: the store had both, the table neither).
    slot = Slot("grad", 0, "out", shape=(4, 8), dtype="float32", device="cpu",
                stats=TensorStats(numel=32, min=0.0, max=2.0, mean=0.5, std=0.7, norm=4.123, zeros=24))
    cells = dict(zip(COLUMNS, (cell.plain for cell in slot_cells(slot))))
    assert (cells["norm"], cells["zeros"]) == ("4.123", "75%")
    empty = Slot("output", 0, "out", shape=(0,), dtype="float32", device="cpu", stats=TensorStats(numel=0))
    assert dict(zip(COLUMNS, (c.plain for c in slot_cells(empty))))["zeros"] == ""
