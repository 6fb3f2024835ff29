"""Writing a CheckResult: text like ruff, JSON, and SARIF 2.1.0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import quote

from tvis_tui import __version__
from tvis_tui.check.engine import CheckResult
from tvis_tui.check.findings import Finding, Severity
from tvis_tui.check.rule import Rule

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render_text(result: CheckResult, line_of: Callable[[str, int], str]) -> str:
    """`path:line:col: TV001 message`, then the source line and a caret under the span."""
    out: list[str] = []
    for problem in result.problems:
        out.append(f"{problem.path}:{problem.line}:{problem.column}: E000 {problem.message}")
    for f in result.findings:
        out.append(f"{f.path}:{f.line}:{f.column}: {f.rule} [{f.severity.value}] {f.message}")
        source = line_of(f.path, f.line).expandtabs(1)
        if source.strip():
            single = f.end_line == f.line
            width = f.end_column - f.column if single else len(source) - f.column + 1
            out.append(f"    {source}")
            out.append("    " + " " * (f.column - 1) + "^" * max(1, width))
    count = len(result.findings)
    summary = f"{count} finding{'s' if count != 1 else ''} in {result.files_checked} " \
              f"file{'s' if result.files_checked != 1 else ''}"
    if result.problems:
        summary += f"; {len(result.problems)} file{'s' if len(result.problems) != 1 else ''} " \
                   "could not be checked"
    out.append(summary)
    return "\n".join(out)


def render_json(result: CheckResult) -> str:
    return json.dumps({
        "findings": [f.to_json() for f in result.findings],
        "problems": [{"path": p.path, "line": p.line, "column": p.column, "message": p.message}
                     for p in result.problems],
        "files_checked": result.files_checked,
    }, indent=2)


def render_sarif(result: CheckResult, rules: Sequence[type[Rule]]) -> str:
    """One SARIF run; rules carry their title, help text and default level."""
    index = {rule.id: i for i, rule in enumerate(rules)}
    driver = {
        "name": "tvis", "version": __version__,
        "rules": [_sarif_rule(rule) for rule in rules],
    }
    results = [_sarif_result(f, index) for f in result.findings]
    notifications = [{
        "level": "error", "message": {"text": p.message},
        "locations": [_location(p.path, p.line, p.column, p.line, p.column + 1)],
    } for p in result.problems]
    run: dict = {"tool": {"driver": driver}, "results": results}
    if notifications:
        run["invocations"] = [{"executionSuccessful": True,
                               "toolExecutionNotifications": notifications}]
    return json.dumps({"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}, indent=2)


def _sarif_rule(rule: type[Rule]) -> dict:
    doc = rule.doc()
    return {
        "id": rule.id, "name": rule.__name__,
        "shortDescription": {"text": rule.title},
        "fullDescription": {"text": doc.sections.get("What it does", rule.title)},
        "help": {"text": doc.sections.get("Why is this bad", rule.title)},
        "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        "properties": {"category": rule.category.value},
    }


def _sarif_result(f: Finding, index: dict[str, int]) -> dict:
    entry = {
        "ruleId": f.rule, "level": _SARIF_LEVEL[f.severity], "message": {"text": f.message},
        "locations": [_location(f.path, f.line, f.column, f.end_line, f.end_column)],
        "properties": {"category": f.category.value, "fix": f.fix},
    }
    if f.rule in index:
        entry["ruleIndex"] = index[f.rule]
    return entry


def _location(path: str, line: int, column: int, end_line: int, end_column: int) -> dict:
    local = Path(path)
    # A URI reference, as SARIF asks: `dir with space/ü.py` is `dir%20with%20space/%C3%BC.py`.
    uri = local.as_uri() if local.is_absolute() else quote(local.as_posix())
    return {"physicalLocation": {
        "artifactLocation": {"uri": uri},
        "region": {"startLine": line, "startColumn": column,
                   "endLine": end_line, "endColumn": end_column},
    }}
