"""Where the next training iteration begins: the head of the loop the optimizer stepped in.

A step's optimizers have all stepped, but its iteration goes on: a scheduler step, a
print of the loss, a metric, a decoded sample, an evaluation every N steps. Those report
on the step just taken, so the step ends only when the loop around the `optimizer.step()`
call comes back to its head: the target of its backward jump, where `for` draws the next
item and `while` tests again; or leaves the loop (a `break`, an exception caught
outside). The loop is the innermost one, at the call, of the nearest user frame that
holds one (`main()`'s `for batch in loader:`, also when the step is taken
inside a `train_step()` it calls). A line tracer on that one frame watches for the head;
if the frame returns first (the loop was its last), that ends the step too.

Where no user frame holds a loop, or a library frame lies between the step and the user's
loop (a trainer's `fit()` runs the real training loop), the step ends at once, as it
always did: nothing tells where that iteration ends. The recorder also ends a pending step
when the DataLoader iterator that fed it draws again, or a new backward() begins.

Known limits: a loop in C between the step and the user's loop (`map(train_step, ...)`)
leaves no frame, so the loop around it is taken, and the step ends at the next backward()
or batch instead. The loop is the innermost one around the call, unless it goes over the
optimizers (`for opt in optimizers: opt.step()`, `rebinds`): then the loop around that one
(`enclosing_loop`). When the innermost is some other inner loop of the iteration (a
generator that yields after the step), the step ends at that loop's head, and calls after
it go to the next step. With
`--steps N`, a `while` loop whose body starts with `try:` is stopped at that line's NOP,
which no handler of the frame covers: the `finally` and `with` exits around the loop do
not run (raising a line later would hand tvis's stop to the body's own `except:`).
"""

from __future__ import annotations

import bisect
import dis
import re
from dataclasses import dataclass
from functools import lru_cache
from types import CodeType, FrameType
from weakref import CallableProxyType, ProxyType, ReferenceType
from typing import Any, Callable

from tvis_tui.record.frame_locals import frame_locals

Loops = Callable[[CodeType], "tuple[tuple[int, int], ...] | None"]
"""The (first, last) bytecode offsets of each loop of a user code object; None for code
that is not the user's."""


class LoopHead:
    """Calls `reached` once, when `frame` comes back to the head of the loop spanning
    bytecode offsets `loop`, leaves that loop (a `break`, an exception caught outside it)
    or returns, and `then` right after; `on_error` False: not when an exception leaves
    the loop (to a handler, a `finally`, a `with` exit outside it) or the frame, and never
    after. Any local tracer the frame had goes on receiving every event, after the step
    has ended: the head's line (`for x, y in loader:` binding the next batch) belongs to
    the next step."""

    def __init__(self, frame: FrameType, loop: tuple[int, int], reached: Callable[[], None],
                 then: Callable[[], None] = lambda: None, on_error: bool = True) -> None:
        self.head, self.last = loop
        self.reached: Callable[[], None] | None = reached
        self._then = then
        self._on_error = on_error
        self._raised = False  # an exception was raised or passed through since the last line
        self._previous: Any = frame.f_trace
        frame.f_trace = self.event

    def event(self, frame: FrameType, event: str, arg: Any) -> Any:
        """`then` runs after the frame's own tracer saw the event (it may raise to stop
        the script there: the line before the head is reported by then), at the head's
        line only: a "return" may be a generator's yield, its consumer's code still to run.
        An exception raised here also turns the thread's tracing off (CPython's rule for a
        trace function that raises): tvis raises only to stop recording."""
        reached = self.reached
        arrived = reached is not None and (
            event == "return" or (event == "line" and self._left_body(body_offset(frame.f_code, frame.f_lasti))))
        if arrived and not self._on_error and (self._raised if event == "line" else not _leaves_normally(frame)):
            arrived, self.reached = False, None  # left by an exception: the step is unfinished
        if event == "exception":
            self._raised = True
        elif event == "line":
            self._raised = False
        if arrived:
            self.reached = None
            reached()
        previous = self._previous
        if previous is not None:
            self._previous = previous(frame, event, arg)
        if arrived and event == "line":  # not at a return: a generator's yield is one
            self._then()
        return self.event if self.reached is not None else self._previous

    def _left_body(self, offset: int) -> bool:
        return offset == self.head or not self.head <= offset <= self.last

    def cancel(self) -> None:
        """Stop watching: a later event calls nothing (the frame's own tracer still runs)."""
        self.reached = None


_LEAVING = frozenset(dis.opmap[name] for name in ("RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE")
                     if name in dis.opmap)


def _leaves_normally(frame: FrameType) -> bool:
    """Whether a frame that is leaving returns or yields, rather than lets an exception
    out (the trace's "return" event passes None for both): it stands on a return or
    yield instruction."""
    return frame.f_code.co_code[frame.f_lasti] in _LEAVING


def rebinds(frame: FrameType, loop: tuple[int, int], optimizer: Any) -> bool:
    """Whether the `for` loop goes over optimizers: its target holds `optimizer`, in a
    list, tuple or dict, or as an attribute of what it holds, two deep (`for opt in
    optimizers:`, `for model, opt in members:`, `for agent in agents:` with
    `agent.policy.optimizer`); or its body indexes a list, tuple or dict with the target
    and finds `optimizer` there (`for i in range(len(opts)): opts[i].step()`,
    `self.optimizers[name]`). A critic's `for _ in range(k):` does neither."""
    targets = _target_names(frame.f_code, loop[0])
    if any(_holds(_bound(frame, op, name), optimizer, depth=2) for op, name in targets):
        return True
    names = {name: op for op, name in targets}
    return any(_item(_container(frame, path), _bound(frame, names[key], key)) is optimizer
               for path, key in _subscripts(frame.f_code, *loop) if key in names)


def _bound(frame: FrameType, op: str, name: str) -> Any:
    return (frame.f_globals if op == "STORE_GLOBAL" else frame_locals(frame)).get(name)


def _container(frame: FrameType, path: tuple[str, ...]) -> Any:
    """What a name and its attributes (`self.optimizers`) hold, read as _holds reads."""
    value = frame_locals(frame).get(path[0], frame.f_globals.get(path[0]))
    for attribute in path[1:]:
        value = own_attributes(value).get(attribute)
    return value


def _item(container: Any, key: Any) -> Any:
    kind = type(container)
    if (kind is list or kind is tuple) and type(key) is int and -len(container) <= key < len(container):
        return container[key]
    if kind is dict:
        return dict.get(container, key) if type(key) in (int, str) else None
    return None


_LOADS = ("LOAD_FAST", "LOAD_NAME", "LOAD_GLOBAL", "LOAD_DEREF")


@lru_cache(maxsize=256)
def _subscripts(code: CodeType, first: int, last: int) -> tuple[tuple[tuple[str, ...], str], ...]:
    """(container path, index name) of each `name[.attr...][index]` in the loop's body:
    the loads just before a subscript."""
    found = set()
    ins = _instructions(code)
    for k, (opname, _, offset) in enumerate(ins):
        if opname != "BINARY_SUBSCR" or not first <= offset <= last or k < 2:
            continue
        index, path, j = ins[k - 1], [], k - 2
        while j >= 0 and ins[j][0] == "LOAD_ATTR":
            path.insert(0, ins[j][1])
            j -= 1
        if index[0] in _LOADS and j >= 0 and ins[j][0] in _LOADS:
            found.add(((ins[j][1], *path), index[1]))
    return tuple(sorted(found))


_STORES = ("STORE_FAST", "STORE_DEREF", "STORE_NAME", "STORE_GLOBAL")
"""The instructions that bind a name (not an attribute or an item)."""


@lru_cache(maxsize=256)
def _target_names(code: CodeType, head: int) -> tuple[tuple[str, str], ...]:
    """(store opcode, name) of what the `for` loop whose FOR_ITER is at `head` binds."""
    names: list[tuple[str, str]] = []
    instructions = iter(_instructions(code))
    for opname, _, offset in instructions:
        if offset == head:
            break
    else:
        return ()
    if opname != "FOR_ITER":
        return ()
    for opname, argval, _ in instructions:
        if opname.startswith("STORE_"):
            names.append((opname, argval))
        elif opname not in ("UNPACK_SEQUENCE", "UNPACK_EX"):
            break
    return tuple(n for n in names if n[0] in _STORES)


@lru_cache(maxsize=256)
def _bound_names(code: CodeType, first: int, last: int) -> tuple[tuple[str, str], ...]:
    """(store opcode, name) of every name bound between bytecode offsets first and last."""
    return tuple({(opname, argval) for opname, argval, offset in _instructions(code)
                  if first <= offset <= last and opname in _STORES})


_PAIR = re.compile(r"^(.+?)_((?:LOAD|STORE)_.+)$")


@lru_cache(maxsize=256)
def _instructions(code: CodeType) -> tuple[tuple[str, Any, int], ...]:
    """(opname, argval, offset) of `code`'s instructions, in the forms these readers know
    across Python versions: 3.13's pairs (`LOAD_FAST_LOAD_FAST`, `STORE_FAST_STORE_FAST`)
    as two, 3.14's `LOAD_FAST_BORROW` as LOAD_FAST and its subscript (`BINARY_OP []`) as
    BINARY_SUBSCR."""
    out: list[tuple[str, Any, int]] = []
    for ins in dis.get_instructions(code):
        pair = _PAIR.match(ins.opname)
        if pair and isinstance(ins.argval, tuple) and len(ins.argval) == 2:
            parts = list(zip(pair.groups(), ins.argval))
        elif ins.opname == "BINARY_OP" and ins.argrepr == "[]":
            parts = [("BINARY_SUBSCR", None)]
        elif ins.opname == "CACHE":
            continue
        else:
            parts = [(ins.opname, ins.argval)]
        out += [("LOAD_FAST" if op.startswith("LOAD_FAST") else op, arg, ins.offset) for op, arg in parts]
    return tuple(out)


@lru_cache(maxsize=256)
def bound_in_loops(code: CodeType) -> frozenset[str]:
    """The names code binds inside its loops (loop variables, what each pass rebinds)."""
    return frozenset(name for span in loop_spans(code) for _, name in _bound_names(code, *span))


_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)


def loop_spans(code: CodeType) -> tuple[tuple[int, int], ...]:
    """(first, last) bytecode offsets of each loop: its head (a backward jump's target)
    and the last backward jump to it. Every backward jump counts (`while cond:` ends with
    a conditional one on 3.11), except JUMP_BACKWARD_NO_INTERRUPT (`await` and `yield
    from` loop on it, not the user) and one from an except clause to the code after its
    `try` (3.12 moves except clauses to the end of the code and jumps back from there: no
    loop's head). An except clause's jump back to a head at or before its `try` (a retry,
    a `continue`) ends that loop's span no later than the `try` does, as the clause stands
    at its `try` (`body_offset`)."""
    return _flow(code).spans


def body_offset(code: CodeType, offset: int) -> int:
    """Where the instruction at `offset` stands in the code as written: at `offset`, or,
    for an except clause that 3.12 and later move to the end of the code, at the start of
    the `try` body it handles, so that it lies in the loops that body lies in (a loop
    inside the clause keeps its own offsets). A frame inside a call stands past its CALL
    instruction, on the CALL's inline caches (3.11)."""
    flow = _flow(code)
    if not flow.origins or offset < flow.starts[0]:
        return offset
    return flow.origins.get(flow.starts[bisect.bisect_right(flow.starts, offset) - 1], offset)


@dataclass(frozen=True)
class _Flow:
    starts: list[int]  # the instructions' offsets, in order
    origins: dict[int, int]  # an except clause's instruction -> the start of its `try`
    spans: tuple[tuple[int, int], ...]


_FLOWS: dict[int, tuple[CodeType, _Flow]] = {}
"""By id: hashing a code object reads all its bytecode (~250 us for a long module on
3.12), and body_offset runs on each line of the frame watched for its loop's head. The
code is kept with it, so that its id is not reused."""

MAX_FLOWS = 4096


def _flow(code: CodeType) -> _Flow:
    cached = _FLOWS.get(id(code))
    if cached is not None and cached[0] is code:
        return cached[1]
    if len(_FLOWS) >= MAX_FLOWS:
        _FLOWS.clear()
    flow = _analyse(code)
    _FLOWS[id(code)] = (code, flow)
    return flow


def _analyse(code: CodeType) -> _Flow:
    instructions = list(dis.get_instructions(code))
    index = {ins.offset: i for i, ins in enumerate(instructions)}
    entries = [e for e in dis.Bytecode(code).exception_entries if e.target in index]
    # An `async for` ends through its StopAsyncIteration handler: the code after the loop
    # runs from END_ASYNC_FOR, as after any loop.
    seeds = [0] + [index[e.target] for e in entries if instructions[index[e.target]].opname == "END_ASYNC_FOR"]
    warm = _reached(instructions, index, seeds, set())
    handled: dict[int, tuple[int, int]] = {}  # cold instruction -> (start, end) of its `try`
    for entry in entries:
        for i in _reached(instructions, index, [index[entry.target]], warm):
            handled.setdefault(instructions[i].offset, (entry.start, entry.end))
    handled = {offset: _first_try(handled, rng) for offset, rng in handled.items()}
    last: dict[int, int] = {}
    for i, ins in enumerate(instructions):
        if not (ins.opcode in _JUMPS and isinstance(ins.argval, int) and ins.argval < ins.offset
                and ins.opname != "JUMP_BACKWARD_NO_INTERRUPT"):
            continue
        head, source = ins.argval, ins.offset
        if i not in warm and index.get(head) in warm:  # from an except clause
            start, end = handled.get(source, (head - 1, 0))
            if head > start:
                continue  # to the code after its `try`
            source = end - 1
        last[head] = max(last.get(head, 0), source)
    # One span per head: a `continue` or an except clause jumps back to it as well.
    spans = sorted(last.items())
    # Loops nest or are apart. A span that overlaps a later one without holding it is the
    # same `while` loop: 3.11 tests the condition at the top and again at the bottom,
    # which jumps back to the body; a `continue` jumps to the top test. The bottom's
    # span is the loop: a `continue` leaves it for the top test, the next pass.
    spans = [span for span in spans if not any(span[0] < other[0] <= span[1] < other[1] for other in spans)]
    inside_clauses = [(h, t) for h, t in spans if index[h] not in warm]
    origins = {offset: rng[0] for offset, rng in handled.items()
               if not any(h <= offset <= t for h, t in inside_clauses)}
    return _Flow([ins.offset for ins in instructions], origins, tuple(spans))


_ENDS_FLOW = frozenset({"JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT",
                        "RETURN_VALUE", "RETURN_CONST", "RAISE_VARARGS", "RERAISE"})
"""Instructions the next one does not follow (it is reached, if at all, another way)."""


def _reached(instructions: list[dis.Instruction], index: dict[int, int], seeds: list[int],
             skip: set[int]) -> set[int]:
    """Indices of the instructions running from `seeds` reaches by falling through and
    jumping, never by raising, leaving out `skip`. From the start: all but the except
    clauses, `with` exits and the exception paths of `finally` blocks."""
    reached: set[int] = set()
    todo = list(seeds)
    while todo:
        i = todo.pop()
        if i in reached or i in skip or i >= len(instructions):
            continue
        reached.add(i)
        ins = instructions[i]
        if ins.opcode in _JUMPS and ins.argval in index:
            todo.append(index[ins.argval])
        if ins.opname not in _ENDS_FLOW:
            todo.append(i + 1)
    return reached


def _first_try(handled: dict[int, tuple[int, int]], rng: tuple[int, int]) -> tuple[int, int]:
    """The `try` a chain of handlers began at: a clause's own cleanup is handled too."""
    seen = set()
    while rng[0] in handled and rng[0] not in seen:
        seen.add(rng[0])
        rng = handled[rng[0]]
    return rng


def _holds(value: Any, target: Any, depth: int) -> bool:
    """By type and identity only: nothing of the script's runs (a dead weakref.proxy
    raises on any other touch)."""
    if value is target:
        return True
    kind = type(value)
    if kind is list or kind is tuple:
        return any(item is target for item in value)
    if kind is dict:
        return any(item is target for item in list(value.values()))
    if depth == 0:
        return False
    return any(_holds(v, target, depth - 1) for v in list(own_attributes(value).values()))


def own_attributes(value: Any) -> dict[str, Any]:
    """The instance's own attributes (its __dict__), read without running any of its code
    (no property, no __getattr__; a dead weakref.proxy raises on any other touch)."""
    kind = type(value)
    if kind in (ProxyType, CallableProxyType) or issubclass(kind, ReferenceType):
        return {}
    try:
        attributes = object.__getattribute__(value, "__dict__")
    except Exception:
        return {}
    return attributes if type(attributes) is dict else {}


def enclosing_loop(frame: FrameType, loop: tuple[int, int], loops: Loops
                   ) -> tuple[FrameType, tuple[int, int]] | None:
    """The loop around `loop` (the iteration, where `loop` goes over the optimizers): the
    innermost one of `frame` that spans it, else the caller's as `loop_head` finds it
    (`update_all()` stepping them, called from the training loop); None past user code."""
    spans = loops(frame.f_code) or ()
    around = [s for s in spans if s != loop and s[0] <= loop[0] and loop[1] <= s[1]]
    if around:
        return frame, min(around, key=lambda span: span[1] - span[0])
    caller = frame.f_back
    if caller is None or loops(caller.f_code) is None:
        return None
    return loop_head(caller, loops)


def loop_head(frame: FrameType | None, loops: Loops) -> tuple[FrameType, tuple[int, int]] | None:
    """The nearest user frame from `frame` outward that is inside a loop, and that loop's
    (head, last) bytecode offsets (the innermost loop, when loops nest). Library frames
    before the first user frame (torch's optimizer wrappers) are passed over; one after it
    ends the search: that library runs the training loop (a trainer's `fit()`), and a
    user loop further out (a sweep over learning rates) is not the iteration."""
    seen_user_code = False
    while frame is not None:
        spans = loops(frame.f_code)
        if spans is None:
            if seen_user_code:
                return None
        else:
            seen_user_code = True
            here = body_offset(frame.f_code, frame.f_lasti)
            around = [(first, last) for first, last in spans if first <= here <= last]
            if around:
                return frame, min(around, key=lambda span: span[1] - span[0])
        frame = frame.f_back
    return None
