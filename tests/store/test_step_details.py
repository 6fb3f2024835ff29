"""What a step record says beyond its numbers (store/step_details.py): read off the record
as the recorder wrote it, and nothing from a record that does not say it."""

from __future__ import annotations

import math

import pytest

from tvis_tui.store import StepRecord
from tvis_tui.store.step_details import chance_loss


def _step(reduction: str = "mean", seq: int = 12) -> StepRecord:
    return StepRecord(step=1, first_seq=1, last_seq=20, loss=1.0,
                      extra={"per_sample_loss": {"seq": seq, "reduction": reduction, "count": 8}})


@pytest.mark.parametrize("loss, kind, classes, expected", [
    ("CrossEntropyLoss", "classes", 10, (math.log(10), "ln 10: every class alike")),
    ("F.nll_loss", "classes", 3, (math.log(3), "ln 3: every class alike")),
    ("F.cross_entropy", "tokens", 65, (math.log(65), "ln 65: every class alike")),  # a char LM
    ("BCEWithLogitsLoss", "labels", 5, (math.log(2), "ln 2: every score 0.5")),  # multi-label
    ("F.binary_cross_entropy", "classes", 2, (math.log(2), "ln 2: every score 0.5")),  # a score per sample
])
def test_the_chance_level_of_each_class_loss(loss, kind, classes, expected):
    prediction = {"kind": kind, "loss": loss, "loss_seq": 12, "classes": classes}
    assert chance_loss(prediction, _step()) == expected


@pytest.mark.parametrize("prediction, step", [
    ({"kind": "classes", "loss": "CrossEntropyLoss", "loss_seq": 12, "classes": 4}, _step("sum")),
    ({"kind": "classes", "loss": "CrossEntropyLoss", "loss_seq": 12, "classes": 4}, _step(seq=30)),  # another call's
    ({"kind": "classes", "loss": "FocalLoss", "loss_seq": 12, "classes": 4}, _step()),
    ({"kind": "classes", "loss": "CrossEntropyLoss", "loss_seq": 12}, _step()),  # a run before `classes`
    ({"kind": "tokens", "loss": "CrossEntropyLoss", "loss_seq": 12, "classes": "65"}, _step()),  # damaged
    ({"kind": "labels", "loss": "CrossEntropyLoss", "loss_seq": 12, "classes": 5}, _step()),
    (None, _step()),
    ({"kind": "classes", "loss": "CrossEntropyLoss", "loss_seq": 12, "classes": 4},
     StepRecord(step=1, first_seq=1, last_seq=2)),  # no per-sample loss: its reduction is not known
])
def test_no_chance_level_where_the_loss_is_not_a_known_mean(prediction, step):
    assert chance_loss(prediction, step) is None
