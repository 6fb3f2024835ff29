"""Where the next training iteration begins: the head of the loop the optimizer stepped in.

A step's optimizers have all stepped, but its iteration goes on: a scheduler step, a
print of the loss, a metric, a decoded sample, an evaluation every N steps. Those report
on the step just taken, so the step ends only when the loop around the `optimizer.step()`
call comes back to its head: the target of its backward jump, where `for` draws the next
item and `while` tests again. The loop is the innermost one, at the call, of the nearest
user frame that holds one (`main()`'s `for batch in loader:`, also when the step is taken
inside a `train_step()` it calls). A line tracer on that one frame watches for the head;
if the frame returns first (the loop was its last), that ends the step too.

Where no user frame holds a loop (a library's training loop), the step ends at once, as
it always did: nothing tells where that iteration ends.
"""

from __future__ import annotations

from types import CodeType, FrameType
from typing import Any, Callable

Loops = Callable[[CodeType], "tuple[tuple[int, int], ...] | None"]
"""The (first, last) bytecode offsets of each loop of a user code object; None for code
that is not the user's."""


class LoopHead:
    """Calls `reached` once, when `frame` comes back to bytecode offset `head` or returns.
    Any local tracer the frame had goes on receiving every event."""

    def __init__(self, frame: FrameType, head: int, reached: Callable[[], None]) -> None:
        self.head = head
        self.reached: Callable[[], None] | None = reached
        self._previous: Any = frame.f_trace
        frame.f_trace = self.event

    def event(self, frame: FrameType, event: str, arg: Any) -> Any:
        previous = self._previous
        if previous is not None:
            self._previous = previous(frame, event, arg)
        reached = self.reached
        if reached is not None and (event == "return" or (event == "line" and frame.f_lasti == self.head)):
            self.reached = None
            reached()
        return self.event if self.reached is not None else self._previous

    def cancel(self) -> None:
        """Stop watching: a later event calls nothing (the frame's own tracer still runs)."""
        self.reached = None


def loop_head(frame: FrameType | None, loops: Loops) -> tuple[FrameType, int] | None:
    """The nearest frame from `frame` outward that is inside a loop of user code, and the
    bytecode offset of that loop's head (of the innermost loop, when loops nest)."""
    while frame is not None:
        spans = loops(frame.f_code)
        if spans:
            here = frame.f_lasti
            around = [(first, last) for first, last in spans if first <= here <= last]
            if around:
                first, _ = min(around, key=lambda span: span[1] - span[0])
                return frame, first
        frame = frame.f_back
    return None
