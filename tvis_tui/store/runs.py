"""Run folders: naming new ones, finding existing ones, and their one-line summaries."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tvis_tui.errors import TvisError
from tvis_tui.store import layout, processes
from tvis_tui.store.reader import RunReader

STATUSES = ("ok", "stopped", "crashed", "running")


def claim_run_path(out_dir: str | os.PathLike[str], script: str, name: str | None = None,
                   now: datetime | None = None) -> Path:
    """Create and return a new empty folder `<out>/<name>` or
    `<out>/<YYYYmmdd-HHMMSS>-<script stem>`, made unique with -2, -3... Creating it is
    what claims it: processes starting together (the ranks of one torchrun job) get a
    folder each, never one store between them."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    base = Path(out_dir) / (name or f"{stamp}-{Path(script).stem or 'run'}")
    base.parent.mkdir(parents=True, exist_ok=True)
    path, n = base, 1
    while True:
        try:
            path.mkdir()
            return path
        except FileExistsError:
            n += 1
            path = base.with_name(f"{base.name}-{n}")


def is_run(path: Path) -> bool:
    """Whether `path` holds a run's data file (OSError where it cannot be looked into)."""
    return (path / layout.DATA_FILE).is_file()


def readable_run(path: Path) -> bool:
    """`is_run`, a folder that cannot be looked into (someone else's, on a shared
    machine) a one-line TvisError."""
    try:
        return is_run(path)
    except OSError as exc:
        raise TvisError(f"{path}: cannot be read ({exc.strerror or exc})") from None


UNREADABLE = "unreadable"
"""The status of a run folder whose store cannot be read; its `reason` says why."""


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
    reason: str = ""
    """Why the run is unreadable (status UNREADABLE), without the run's path."""
    incomplete: bool = False
    """Writes to the store failed while recording (a full disk): part of the run is missing."""

    @property
    def status_text(self) -> str:
        return f"{self.status}, incomplete" if self.incomplete else self.status


def run_status(meta: dict) -> str:
    """ok / stopped / crashed, or running while the recording process is alive.

    A run whose recorder died without closing it (SIGKILL, power loss) still says
    "running" on disk; it is reported as stopped once its process is gone.
    """
    status = meta.get("status", "running")
    if status != "running":
        return status if status in STATUSES else "stopped"
    if meta.get("host") == socket.gethostname() and processes.alive(meta.get("pid"),
                                                                     meta.get("process")):
        return "running"
    return "stopped"


def stop_reason(meta: dict) -> str | None:
    """Why a stopped run stopped, in a few words (None when it did not stop, or the
    run does not say)."""
    if run_status(meta) != "stopped":
        return None
    if meta.get("stopped_by") == "KeyboardInterrupt":
        return "Ctrl-C"
    if meta.get("status", "running") == "running":
        return "recorder killed"
    return None


def incomplete_reason(meta: dict) -> str | None:
    """"store incomplete" when writes to the store failed while recording, else None."""
    return "store incomplete" if meta.get("incomplete") else None


def summarize(path: Path) -> RunSummary:
    """The run's summary; raises TvisError (one line) when its store cannot be read.

    Calls are the records stored. Steps are the recorder's final `steps_recorded` when it
    closed the run, else the step records stored: a run that did not end cleanly (killed,
    still recording) never wrote that count."""
    with RunReader(path) as reader:
        meta = reader.meta()
        steps = _final_steps(meta)
        if steps is None:
            steps = reader.complete_steps()
        calls = reader.stored_calls()
    return RunSummary(
        path=path,
        script=str(meta.get("script", "?")),
        started=str(meta.get("started_at", "?")),
        steps=steps,
        calls=calls,
        size_bytes=_folder_bytes(path),
        status=run_status(meta),
        incomplete=bool(meta.get("incomplete")),
    )


def _final_steps(meta: dict) -> int | None:
    """`steps_recorded` as the recorder wrote it on closing the run, or None (also when
    writes failed: it counts steps that may not have reached the store)."""
    steps = meta.get("steps_recorded")
    if meta.get("status", "running") == "running" or not isinstance(steps, int) or meta.get("incomplete"):
        return None
    return steps


def _folder_bytes(path: Path) -> int:
    try:
        return sum(f.stat().st_size for f in path.iterdir() if f.is_file())
    except OSError:
        return 0


def _unreadable(path: Path, reason: str) -> RunSummary:
    """A row for a run that cannot be read, so that one bad run does not hide the others."""
    return RunSummary(path=path, script="?", started="?", steps=0, calls=0,
                      size_bytes=_folder_bytes(path), status=UNREADABLE, reason=reason)


def _summary_or_unreadable(path: Path) -> RunSummary:
    try:
        return summarize(path)
    except TvisError as exc:
        return _unreadable(path, str(exc).removeprefix(f"{path}: "))
    except OSError as exc:  # a folder we may not look into
        return _unreadable(path, f"unreadable run ({exc.strerror or exc})")


def _may_be_run(path: Path) -> bool:
    try:
        return path.is_dir() and is_run(path)
    except OSError:
        return True  # cannot look inside: list it (as unreadable) rather than hide it


def _run_folders(root: Path) -> list[Path]:
    try:
        return [p for p in sorted(root.iterdir()) if _may_be_run(p)]
    except OSError as exc:
        raise TvisError(f"{root}: cannot list runs ({exc.strerror or exc})") from None


def find_runs(directory: str | os.PathLike[str]) -> list[RunSummary]:
    """Runs directly inside `directory` (or the directory itself if it is a run), newest
    first, then the unreadable ones (status "unreadable"). Folders that are not runs are
    skipped. A `directory` that is itself a run raises TvisError when it is unreadable."""
    root = Path(directory)
    if not root.exists():
        raise TvisError(f"{root}: no such directory")
    if readable_run(root):
        return [summarize(root)]
    if not root.is_dir():
        raise TvisError(f"{root}: not a directory of runs{_data_file_hint(root)}")
    runs = [_summary_or_unreadable(p) for p in _run_folders(root)]
    good = sorted((r for r in runs if r.status != UNREADABLE),
                  key=lambda r: (r.started, r.path.name), reverse=True)
    # Unreadable runs after the others, by name: the picker's first row (Enter) stays
    # the newest run, and a bad run has no start time to sort by.
    return good + [r for r in runs if r.status == UNREADABLE]


def _data_file_hint(path: Path) -> str:
    """For `tvis ls RUN/data.mdb`: name the folder that is the run."""
    if path.name == layout.DATA_FILE and is_run(path.parent):
        return f" (a file; the run is {path.parent})"
    return " (a file)" if path.is_file() else ""
