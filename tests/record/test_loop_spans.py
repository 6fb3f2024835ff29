"""Which loop holds a line, and where its head is reached again, for the shapes a training
loop takes around try/except: loop_head.py reads bytecode, and 3.11, 3.12 and 3.13 lay
out except clauses differently (3.12 moves them to the end of the code). The same
results are expected on each (scripts/test_python.sh runs these under another Python)."""

from __future__ import annotations

import sys
import textwrap

import pytest

from tvis_tui.record.loop_head import LoopHead, body_offset, loop_head, loop_spans

FILE = "<loop case>"


class E(Exception):
    pass


def _run(source: str, call: str = "f()") -> list[str]:
    """Run `source` with a trace function on (LoopHead hooks into frames' local tracers):
    step(tag) notes the loop around its caller and watches for that loop's head; probe(tag)
    notes whether its caller's line is inside a loop."""
    log: list[str] = []

    def loops(code):
        return loop_spans(code) if code.co_filename == FILE else None

    def step(tag=""):
        frame = sys._getframe(1)
        found = loop_head(frame, loops)
        if found is None:
            log.append(f"step{tag}@{frame.f_lineno}: no loop")
            return
        held, span = found
        log.append(f"step{tag}@{frame.f_lineno}")
        LoopHead(held, span, lambda: log.append(f"head@{held.f_lineno}"))

    def probe(tag=""):
        frame = sys._getframe(1)
        here = body_offset(frame.f_code, frame.f_lasti)
        inside = any(first <= here <= last for first, last in loops(frame.f_code))
        log.append(f"probe{tag}@{frame.f_lineno}: {'in' if inside else 'out'}")

    def boom():
        raise E

    names = {"step": step, "probe": probe, "boom": boom, "E": E, "asyncio": __import__("asyncio")}
    exec(compile(textwrap.dedent(source), FILE, "exec"), names)
    sys.settrace(lambda *args: None)
    try:
        eval(call, names)
    finally:
        sys.settrace(None)
    return log


CASES = {
    # 3.12 jumps back from the except clause to the line after the try: no loop's head.
    "call after a try": ("""
        def f():
            for i in range(2):
                try:
                    step(i)
                except E:
                    pass
                probe()
            probe('after')
        """, ["step0@5", "probe@8: in", "head@3", "step1@5", "probe@8: in", "head@3", "probeafter@9: out"]),
    "except falls through": ("""
        def f():
            for i in range(2):
                try:
                    step(i)
                    if i == 0: boom()
                except E:
                    probe()
                x = i
        """, ["step0@5", "probe@8: in", "head@3", "step1@5", "head@3"]),
    "except breaks": ("""
        def f():
            for i in range(3):
                try:
                    step(i)
                    boom()
                except E:
                    probe()
                    break
            probe('after')
        """, ["step0@5", "probe@8: in", "head@10", "probeafter@10: out"]),
    "training loop inside an except clause": ("""
        def f():
            try:
                boom()
            except E:
                for i in range(2):
                    step(i)
                    probe()
            probe('after')
        """, ["step0@7", "probe@8: in", "head@6", "step1@7", "probe@8: in", "head@6", "probeafter@9: out"]),
    "retry loop": ("""
        def f():
            n = 0
            while True:
                try:
                    n += 1
                    step(n)
                    if n < 3: boom()
                    break
                except E:
                    probe()
        """, ["step1@7", "probe@11: in", "head@5", "step2@7", "probe@11: in", "head@5", "step3@7", "head@9"]),
    "loop after an async for": ("""
        class Items:
            def __init__(self): self.n = 0
            def __aiter__(self): return self
            async def __anext__(self):
                self.n += 1
                if self.n > 1: raise StopAsyncIteration
                return self.n
        async def f():
            async for _ in Items():
                pass
            for i in range(2):
                step(i)
                probe()
            probe('after')
        """, ["step0@13", "probe@14: in", "head@12", "step1@13", "probe@14: in", "head@12", "probeafter@15: out"]),
    "loop after a try that always raises": ("""
        def f():
            try:
                raise E
            except E:
                pass
            for i in range(2):
                step(i)
            probe('after')
        """, ["step0@8", "head@7", "step1@8", "head@7", "probeafter@9: out"]),
}


@pytest.mark.parametrize("name", CASES)
def test_the_loop_around_a_step_and_its_head(name):
    source, expected = CASES[name]
    call = "asyncio.run(f())" if "async def f" in source else "f()"
    assert _run(source, call) == expected
