"""TV035: `torch.load` without `map_location` or `weights_only`."""

from __future__ import annotations

from typing import Iterator

from tvis_tui.check.context import Context
from tvis_tui.check.findings import Category, Finding, Severity
from tvis_tui.check.rule import Rule

LOADERS = frozenset({"torch.load", "torch.serialization.load"})


class TorchLoadOptions(Rule):
    """`torch.load(path)` without `map_location` and/or `weights_only`.

    What it does:
        Finds calls of `torch.load` that pass neither `map_location` (second positional
        argument or keyword) nor `weights_only`, and says which is missing. Calls that
        pass `**kwargs` are skipped: the options may be in there.
    Why is this bad:
        Without `map_location`, tensors go back to the device they were saved from: a
        checkpoint written on `cuda:0` fails on a CPU-only machine, and in multi-GPU jobs
        every rank loads its copy onto GPU 0, which runs out of memory at resume time.
        Without `weights_only`, the result depends on the torch version: before 2.6 the
        file is unpickled with arbitrary code execution; from 2.6 on the default is
        `weights_only=True` and a checkpoint holding an optimizer config, a NumPy scalar or
        a whole model fails to load — typically when resuming a long run.
    Example:
        state = torch.load("checkpoint.pt")
    Use instead:
        state = torch.load("checkpoint.pt", map_location="cpu", weights_only=True)
    Known limits:
        Every call is reported, including loads that only ever run on one device.
        `torch.load` reached through another name (`load = torch.load`) is not followed.
    """

    id = "TV035"
    title = "torch.load without map_location / weights_only"
    severity = Severity.WARNING
    category = Category.CORRECTNESS
    fix = 'pass map_location="cpu" (or the target device) and weights_only=True'

    def check(self, ctx: Context) -> Iterator[Finding]:
        for call in ctx.calls_named("load"):
            if call.has_splat or ctx.qualname(call.func) not in LOADERS:
                continue
            missing = [option for option, present in (
                ("map_location", call.arg(1, "map_location") is not None),
                ("weights_only", "weights_only" in call.kwargs)) if not present]
            if missing:
                yield ctx.finding(call.node, f"`{ctx.text(call.func)}` without "
                                  f"{' and '.join(f'`{m}`' for m in missing)}: "
                                  + _consequence(missing),
                                  fix=_fix(missing))


def _consequence(missing: list[str]) -> str:
    parts = []
    if "map_location" in missing:
        parts.append("tensors return to the device they were saved on")
    if "weights_only" in missing:
        parts.append("what loads depends on the torch version (full unpickling before 2.6)")
    return "; ".join(parts)


def _fix(missing: list[str]) -> str:
    wanted = {"map_location": 'map_location="cpu"', "weights_only": "weights_only=True"}
    return "pass " + ", ".join(wanted[m] for m in missing)
