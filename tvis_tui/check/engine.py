"""Running rules over files: collect paths, parse, build the project, run, suppress."""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from tvis_tui.check.config import CheckConfig
from tvis_tui.check.context import Context
from tvis_tui.check.findings import FileProblem, Finding, Severity
from tvis_tui.check.project import FileModel, Project
from tvis_tui.check.rule import Rule
from tvis_tui.check.source import SourceFile, file_kind, load, parse
from tvis_tui.errors import TvisError

SKIPPED_DIRS = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})
"""Folders never searched for .py files (besides hidden ones): caches and installed code."""


@dataclass
class CheckResult:
    findings: list[Finding] = field(default_factory=list)
    problems: list[FileProblem] = field(default_factory=list)
    files_checked: int = 0


def collect_files(paths: Sequence[str],
                  unreadable: list[FileProblem] | None = None) -> list[tuple[Path, str]]:
    """(path, display path) for every .py file named or under a named folder, sorted; a
    folder that cannot be listed is added to `unreadable` (its files were not checked, and
    saying nothing would read as "no findings there")."""
    found: dict[str, Path] = {}

    def skipped(exc: OSError) -> None:
        if unreadable is not None:
            unreadable.append(FileProblem(str(exc.filename),
                                          f"cannot read folder: {exc.strerror or exc}"))
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            found[raw] = path
        elif path.is_dir():
            for folder, dirs, files in os.walk(path, onerror=skipped):
                dirs[:] = sorted(d for d in dirs
                                 if not d.startswith(".") and d not in SKIPPED_DIRS)
                for name in files:
                    if name.endswith(".py"):
                        full = Path(folder) / name
                        found[str(full)] = full
        else:
            raise TvisError(f"{raw}: {why_unusable(raw)}")
    return [(path, display) for display, path in sorted(found.items())]


def why_unusable(raw: str) -> str:
    """Why a named path is neither a file nor a folder to check, in words."""
    try:
        mode = os.stat(raw).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "symbolic link loop"
        if exc.errno == errno.ENOENT and os.path.lexists(raw):
            return "broken symbolic link (its target does not exist)"
        if exc.errno == errno.ENOENT:
            return "no such file or folder"
        return f"cannot read: {exc.strerror or exc}"
    return f"not a regular file ({file_kind(mode)})"


def check_sources(sources: list[SourceFile], rules: Sequence[type[Rule]],
                  config: CheckConfig | None = None) -> CheckResult:
    """Run `rules` over parsed files as one project (cross-file call graph included)."""
    config = config or CheckConfig()
    result = CheckResult(files_checked=len(sources))
    files = [FileModel(source) for source in sources]
    project = Project(files)
    for fm in files:
        for rule in rules:
            try:
                found = list(rule().check(Context(project, fm, rule)))
            except RecursionError:
                result.problems.append(FileProblem(fm.path, f"{rule.id} gave up: code nested "
                                                            "too deeply to analyse", fails=False))
                continue
            except Exception as exc:  # a bug in one rule must not hide every other finding
                result.problems.append(FileProblem(
                    fm.path, f"internal error in {rule.id}: {type(exc).__name__}: {exc} "
                             "(please report it)", fails=False))
                continue
            for finding in found:
                if fm.source.suppressions.silences(finding.rule, finding.line):
                    continue
                override = config.severity.get(finding.rule)
                result.findings.append(replace(finding, severity=override) if override
                                       else finding)
    result.findings = sorted_findings(set(result.findings))
    return result


def check_paths(paths: Sequence[str], rules: Sequence[type[Rule]],
                config: CheckConfig | None = None) -> CheckResult:
    """Check files and folders; unreadable or unparsable files become per-file problems."""
    sources: list[SourceFile] = []
    problems: list[FileProblem] = []
    for path, display in collect_files(paths, problems):
        loaded = load(path, display)
        (problems if isinstance(loaded, FileProblem) else sources).append(loaded)
    result = check_sources(sources, rules, config)
    result.problems = problems + result.problems
    return result


def check_text(code: str, rules: Sequence[type[Rule]], path: str = "<string>") -> CheckResult:
    """Check one snippet of source (tests, editors)."""
    loaded = parse(code.encode("utf-8"), path)
    if isinstance(loaded, FileProblem):
        return CheckResult(problems=[loaded])
    return check_sources([loaded], rules)


def sorted_findings(findings) -> list[Finding]:
    """By file, then position, then rule id: the order every output format uses."""
    return sorted(findings, key=lambda f: (f.path, f.line, f.column, f.rule))


def at_or_above(findings: list[Finding], threshold: Severity) -> list[Finding]:
    return [f for f in findings if f.severity.rank >= threshold.rank]


def exit_code(result: CheckResult, fail_on: Severity) -> int:
    """1 when a finding at or above `fail_on` exists or a file could not be parsed."""
    failing = at_or_above(result.findings, fail_on) or any(p.fails for p in result.problems)
    return 1 if failing else 0
