"""The table of runs that `tvis ls` prints (a Rich renderable, reusable elsewhere)."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from tvis_tui.store.runs import UNREADABLE, RunSummary
from tvis_tui.text import printable

_STATUS_STYLE = {"ok": "green", "stopped": "yellow", "crashed": "bold red", "running": "cyan",
                 UNREADABLE: "bold magenta"}


def human_bytes(n: int) -> str:
    unit, scale = byte_unit(n)
    return f"{n} B" if unit == "B" else f"{n / scale:.1f} {unit}"


def byte_unit(n: int) -> tuple[str, int]:
    """The unit `human_bytes` writes `n` in (B up to GiB), and its size in bytes."""
    unit, scale = "B", 1
    for bigger in ("KiB", "MiB", "GiB"):
        if n < scale * 1024:
            break
        unit, scale = bigger, scale * 1024
    return unit, scale


def runs_table(runs: list[RunSummary]) -> Table:
    """One row per run; an unreadable run's reason goes below (see `unreadable_notes`),
    since it would widen the script column for every row."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for name, justify in [("run", "left"), ("script", "left"), ("started", "left"),
                          ("steps", "right"), ("calls", "right"), ("size", "right"),
                          ("status", "left")]:
        table.add_column(name, justify=justify, no_wrap=True)
    for run in runs:
        known = run.status != UNREADABLE
        table.add_row(
            Text(printable(run.path.name)),
            Text(printable(run.script)),
            Text(run.started.replace("T", " ")[:19]),
            Text(str(run.steps) if known else "-"),
            Text(str(run.calls) if known else "-"),
            Text(human_bytes(run.size_bytes)),
            Text(run.status_text, style=_STATUS_STYLE.get(run.status, "")),
        )
    return table


def unreadable_notes(runs: list[RunSummary]) -> list[Text]:
    """`<run>: <why it cannot be read>` for each unreadable run (plain Text: no markup)."""
    return [Text(printable(f"{run.path.name}: {run.reason}")) for run in runs if run.status == UNREADABLE]
