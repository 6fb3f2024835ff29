"""Telling whether the process that records a run is still that process.

A run killed without closing (SIGKILL, OOM killer, power loss) still says "running" on
disk. Its pid alone cannot tell: pids are reused, and on a busy box another process soon
holds it, so the run would read "running" forever. The pid's start time (Linux: field 22
of /proc/PID/stat, clock ticks since boot) together with the boot's id names one process
for good."""

from __future__ import annotations

import os
from pathlib import Path


def identity(pid: int) -> str | None:
    """`<boot id>:<start ticks>` of process `pid`, or None where the system does not tell
    (not Linux, no /proc, the process gone)."""
    return _identity(_stat(pid))


def _identity(fields: list[str]) -> str | None:
    """identity() from the process's stat fields (`_stat`)."""
    if len(fields) <= 19:
        return None
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None
    return f"{boot}:{fields[19]}"


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat from its third field (the state) on; [] where there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    # The command name (field 2) may hold spaces and parentheses: count from its end.
    return stat[stat.rfind(")") + 2:].split()


def alive(pid: object, recorded_identity: object = None) -> bool:
    """Whether process `pid` exists and, where the run recorded its identity, is that
    process and not a later one given the same pid."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # someone else's process: it exists
    fields = _stat(pid)  # read once: the TUI asks every second while a run records
    if fields[:1] == ["Z"]:
        return False  # ended, and its parent has not reaped it yet
    if not isinstance(recorded_identity, str):
        return True  # a run recorded before identities were, or off Linux
    now = _identity(fields)
    return now is None or now == recorded_identity
