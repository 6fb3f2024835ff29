"""Run folders: naming new ones, finding existing ones, and their one-line summaries."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tvis_tui.errors import TvisError
from tvis_tui.store import layout
from tvis_tui.store.reader import RunReader

STATUSES = ("ok", "stopped", "crashed", "running")


def new_run_path(out_dir: str | os.PathLike[str], script: str, name: str | None = None,
                 now: datetime | None = None) -> Path:
    """`<out>/<name>` or `<out>/<YYYYmmdd-HHMMSS>-<script stem>`, made unique with -2, -3..."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = Path(out_dir) / (name or f"{stamp}-{Path(script).stem or 'run'}")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def is_run(path: Path) -> bool:
    return (path / layout.DATA_FILE).is_file()


@dataclass(frozen=True)
class RunSummary:
    """What `tvis ls` and the run picker show about one run."""

    path: Path
    script: str
    started: str
    steps: int
    calls: int
    size_bytes: int
    status: str


def run_status(meta: dict) -> str:
    """ok / stopped / crashed, or running while the recording process is alive.

    A run whose recorder died without closing it (SIGKILL, power loss) still says
    "running" on disk; it is reported as stopped once its process is gone.
    """
    status = meta.get("status", "running")
    if status != "running":
        return status if status in STATUSES else "stopped"
    if meta.get("host") == socket.gethostname() and _pid_alive(meta.get("pid")):
        return "running"
    return "stopped"


def _pid_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def summarize(path: Path) -> RunSummary:
    with RunReader(path) as reader:
        meta = reader.meta()
        calls = reader.call_count()
    size = sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    return RunSummary(
        path=path,
        script=str(meta.get("script", "?")),
        started=str(meta.get("started_at", "?")),
        steps=int(meta.get("steps_recorded", 0) or 0),
        calls=calls,
        size_bytes=size,
        status=run_status(meta),
    )


def find_runs(directory: str | os.PathLike[str]) -> list[RunSummary]:
    """Runs directly inside `directory` (or the directory itself if it is a run), newest
    first. Folders that are not runs are skipped; unreadable runs raise TvisError."""
    root = Path(directory)
    if not root.exists():
        raise TvisError(f"{root}: no such directory")
    if is_run(root):
        return [summarize(root)]
    if not root.is_dir():
        raise TvisError(f"{root}: not a directory of runs")
    runs = [summarize(p) for p in sorted(root.iterdir()) if p.is_dir() and is_run(p)]
    runs.sort(key=lambda r: (r.started, r.path.name), reverse=True)
    return runs
