"""The status line under the panes: where the selected call is and what it took."""

from __future__ import annotations

from tvis_tui.store import CallRecord
from tvis_tui.widgets.status_line import status_text


def test_the_status_line_shows_a_calls_backward_time():
    call = CallRecord(seq=3, parent=0, depth=1, step=2, phase="forward", kind="module", name="slow",
                      duration_ns=104_000, extra={"backward_ns": 30_250_000})
    text = status_text("run", call, 16, None, "ok").plain
    assert "call 3 of 16  104 µs  backward 30.2 ms" in text
    plain = status_text("run", CallRecord(seq=2, parent=0, depth=0, step=1, phase="forward", kind="module",
                                          name="a", duration_ns=5_000), 16, None, "ok").plain
    assert "backward" not in plain


def test_a_call_that_raised_puts_its_message_first_with_no_blank_before_it():
    call = CallRecord(seq=16, parent=0, depth=0, step=3, phase="forward", kind="module", name="head",
                      error="RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert status_text("run", call, 16, None, "crashed").plain.startswith(
        "[crashed]  call 16 of 16  raised: RuntimeError: mat1 and mat2")


def test_an_optimizer_step_with_parameters_that_got_no_gradient_says_how_many():
    # A frozen head: its rows in the inspector sit below the fold at 80x24 (sweep M).
    call = CallRecord(seq=13, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer", name="Adam",
                      duration_ns=288_000, extra={"no_grad": ["head.weight", "head.bias"], "no_grad_count": 2})
    assert "call 13 of 16  2 params got no gradient  288 µs" in status_text("run", call, 16, None, "ok").plain
    one = CallRecord(seq=13, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer", name="Adam",
                     duration_ns=288_000, extra={"no_grad": ["head.bias"], "no_grad_count": 1})
    assert "1 param got no gradient" in status_text("run", one, 16, None, "ok").plain


def test_frozen_parameters_are_counted_apart_from_those_backward_did_not_reach():
    def status(missing: int, frozen: int) -> str:
        extra = {"no_grad": ["p"] * missing, "no_grad_count": missing, "no_grad_frozen_count": frozen}
        call = CallRecord(seq=13, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer", name="Adam",
                          duration_ns=288_000, extra=extra)
        return status_text("run", call, 16, None, "ok").plain

    assert "call 13 of 16  3 params got no gradient  2 frozen  288 µs" in status(5, 2)
    assert "call 13 of 16  200 frozen  288 µs" in status(200, 200)
    assert "got no gradient" not in status(200, 200)


def test_a_call_that_cut_the_graph_says_so_and_the_step_missing_gradients_points_there():
    # `return (...).detach()` in a helper mid-model: the encoder gets no gradient (sweep O).
    from tvis_tui.store import StepRecord
    cut = CallRecord(seq=5, parent=1, depth=1, step=1, phase="forward", kind="function", name="standardize",
                     duration_ns=341_000, extra={"user": True, "graph_cut": True})
    step = StepRecord(step=1, first_seq=1, last_seq=16, loss=1.1,
                      extra={"graph_cuts": [[5, "standardize"], [7, "accuracy"]]})
    assert "call 5 of 48  output cut from the graph (its input requires grad)  341 µs" in \
        status_text("run", cut, 48, step, "ok").plain
    opt = CallRecord(seq=16, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer", name="SGD",
                     duration_ns=165_000, extra={"no_grad": ["encoder.0.weight", "encoder.0.bias"],
                                                 "no_grad_count": 2})
    assert "2 params got no gradient (graph cut at standardize, call 5?)  165 µs" in \
        status_text("run", opt, 48, step, "ok").plain
    # Every parameter reached, or no cut recorded: nothing about a cut.
    whole = CallRecord(seq=16, parent=0, depth=0, step=1, phase="optimizer", kind="optimizer", name="SGD")
    assert "graph cut" not in status_text("run", whole, 48, step, "ok").plain
    damaged = StepRecord(step=1, first_seq=1, last_seq=16, extra={"graph_cuts": [["5", 5], 3]})
    assert "2 params got no gradient  165 µs" in status_text("run", opt, 48, damaged, "ok").plain


def test_a_recurrent_layer_fed_its_batch_as_time_says_how_it_read_it():
    call = CallRecord(seq=3, parent=2, depth=1, step=1, phase="forward", kind="module", name="lstm",
                      type="LSTM", duration_ns=57_600_000,
                      extra={"config": "4, 32", "batch_dim_mismatch": {"batch_first": False, "shape": [64, 30, 4],
                                                                        "batch": 64}})
    assert ("call 3 of 14  batch_first=False, but the batch (64) is dim 0 of [64, 30, 4]: read as 30 sequences "
            "of 64 steps  57.6 ms") in status_text("run", call, 14, None, "ok").plain
    damaged = CallRecord(seq=3, parent=2, depth=1, step=1, phase="forward", kind="module", name="lstm",
                         extra={"batch_dim_mismatch": {"shape": [64, 30]}})
    assert "batch_first" not in status_text("run", damaged, 14, None, "ok").plain
