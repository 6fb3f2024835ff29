"""Driving the app headless: open a run at a call, press keys, wait for the panes."""

from __future__ import annotations

import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import AsyncIterator, Callable

from textual.app import App
from textual.pilot import Pilot

from tvis_tui.app import make_app
from tvis_tui.screens.values import ValuesScreen
from tvis_tui.store import RunReader, Slot


async def settle(pilot: Pilot) -> None:
    """Let key handlers, store-reading workers and the messages they post all finish."""
    for _ in range(3):
        await pilot.pause()
        await pilot.app.workers.wait_for_complete()
    await pilot.pause()


@asynccontextmanager
async def opened(path: Path, start: int | None = None, size: tuple[int, int] = (120, 36)) -> AsyncIterator[Pilot]:
    app = make_app(path, start=start)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        yield pilot


async def press(pilot: Pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


async def until(pilot: Pilot, done: Callable[[], bool], timeout: float = 10.0) -> None:
    """Settle until `done()` holds: for what follows a message posted after the keys were
    handled (the run list read again once a run's reader has closed), late on a busy machine."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the app never got there"
        await settle(pilot)


class ValuesApp(App):
    """Just the values screen, over one slot of call 1 of a run."""

    def __init__(self, reader: RunReader, slot: Slot) -> None:
        super().__init__()
        self.reader, self.slot = reader, slot

    def on_mount(self) -> None:
        self.push_screen(ValuesScreen(self.reader, 1, self.slot))
