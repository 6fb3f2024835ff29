"""The VRAM verdict as `tvis check --gpu NAME` findings (rule TV900), one per training script.

    vram_findings(["train.py"], "a100-40gb") -> [
        {"path": "train.py", "line": 42, "column": 5, "end_column": 30, "rule": "TV900",
         "severity": "error" | "warning" | "info", "category": "memory",
         "message": "does not fit on NVIDIA A100 40GB: ..."},
    ]

Files without a model or a training step give no finding, nor do files that cannot be read
or parsed (the checker reports those itself); one the estimator fails on gives an info
finding that says so. An unknown GPU name raises TvisError with a
one-line message. No torch import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings
from tvis_tui.vram.gpus import GIB, find_gpu
from tvis_tui.vram.source import UnreadableScript, line_span
from tvis_tui.vram.suggest import suggest
from tvis_tui.vram.verdict import Verdict

RULE = "TV900"
SEVERITY = {"does not fit": "error", "tight": "warning", "fits": "info"}


def vram_findings(paths: Iterable[str | Path], gpu: str) -> list[dict]:
    target = find_gpu(gpu)
    findings = []
    for path in paths:
        try:
            result = estimate(path, Settings(bf16=target.bf16))
        except UnreadableScript:
            continue
        except Exception as exc:  # a bug in the estimate must not hide every other finding
            findings.append(_finding(path, 1, "info", f"no estimate: internal error in the VRAM "
                                     f"estimator: {type(exc).__name__}: {exc} (please report it)"))
            continue
        facts = result.facts
        if facts.no_model is not None or facts.model is None and not facts.optimizers:
            continue
        verdict = Verdict(target, result.peak_bytes)
        message = (f"{verdict.word} on {target.name}: estimated peak "
                   f"{result.peak_bytes / GIB:.1f} GiB of {target.usable_bytes / GIB:.1f} GiB "
                   f"usable ({result.confidence} confidence)")
        if not verdict.fits:
            fixes = suggest(result, target.usable_bytes, bf16=target.bf16)
            if fixes:
                message += (f"; biggest saving: {fixes[0].change} (saves "
                            f"{fixes[0].saves_bytes / GIB:.1f} GiB)")
        findings.append(_finding(path, facts.forward_line or facts.model_line or 1,
                                 SEVERITY[verdict.word], message))
    return findings


def _finding(path: str | Path, line: int, severity: str, message: str) -> dict:
    column, end_column = line_span(Path(path), line)
    return {"path": str(path), "line": line, "column": column, "end_column": end_column,
            "rule": RULE, "severity": severity, "category": "memory", "message": message}
