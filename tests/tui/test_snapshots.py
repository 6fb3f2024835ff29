"""SVG snapshots of the main layouts at 80x24 and 160x48, with the environment pinned.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`
and look at the SVGs before committing them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pilot import press, settle

from tvis_tui.app import make_app

SIZES = [(80, 24), (160, 48)]

# name -> (run fixture, start call, keys pressed after opening)
LAYOUTS = {
    "debugger": ("healthy_run", 10, []),
    "nan_call": ("healthy_run", 36, []),
    "crashed": ("crashed_run", None, []),
    "exception": ("crashed_run", None, ["x"]),
    "help": ("healthy_run", 1, ["question_mark"]),
    "values": ("healthy_run", 10, ["v"]),
    "step_view": ("healthy_run", 10, ["p"]),
    "picker": ("runs_dir", None, []),
}


@pytest.fixture(autouse=True)
def pinned_environment(monkeypatch, runs_dir):
    for name in ("NO_COLOR", "TEXTUAL_THEME", "COLORTERM", "TMUX"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    # Paths on screen are relative to here, so the snapshots do not hold a tmp path.
    monkeypatch.chdir(runs_dir.parent)


@pytest.mark.parametrize("size", SIZES, ids=[f"{w}x{h}" for w, h in SIZES])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layout(snap_compare, request, layout, size):
    fixture, start, keys = LAYOUTS[layout]
    path: Path = request.getfixturevalue(fixture)
    app = make_app(path.relative_to(Path.cwd()) if fixture != "runs_dir" else Path(path.name), start=start)

    async def run_before(pilot) -> None:
        await settle(pilot)
        await press(pilot, *keys)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
