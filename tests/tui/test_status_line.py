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
