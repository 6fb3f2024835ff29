"""`[tool.tvis.check]` in the nearest pyproject.toml: select, ignore, severity overrides."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from tvis_tui.check.findings import Severity
from tvis_tui.errors import TvisError

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, published as `tomli`
    import tomli as tomllib

KEYS = {"select", "ignore", "severity", "fail-on"}


@dataclass
class CheckConfig:
    """Settings from pyproject.toml; `path` is where they came from (None: defaults)."""

    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    severity: dict[str, Severity] = field(default_factory=dict)
    fail_on: Severity | None = None
    path: Path | None = None


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in `start` (a file's folder, or a folder) or above it."""
    try:
        folder = start.resolve()
    except (OSError, RuntimeError):  # a symlink loop (RuntimeError before Python 3.13)
        folder = Path(os.path.abspath(start))
    if not folder.is_dir():
        folder = folder.parent
    for candidate in (folder, *folder.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate / "pyproject.toml"
    return None


def load_config(start: Path) -> CheckConfig:
    path = find_pyproject(start)
    if path is None:
        return CheckConfig()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise TvisError(f"{path}: cannot read pyproject.toml: {exc}") from None
    table = data.get("tool", {}).get("tvis", {}).get("check", {})
    if not isinstance(table, dict):
        raise TvisError(f"{path}: [tool.tvis.check] must be a table")
    unknown = sorted(set(table) - KEYS)
    if unknown:
        raise TvisError(f"{path}: unknown key {unknown[0]!r} in [tool.tvis.check] "
                        f"(known: {', '.join(sorted(KEYS))})")
    config = CheckConfig(path=path)
    if "select" in table:
        config.select = _id_list(path, "select", table["select"])
        if not config.select:  # would run no rule and pass every file
            raise TvisError(f"{path}: select = [] names no rule; leave it out to run them all")
    config.ignore = _id_list(path, "ignore", table.get("ignore", []))
    severities = table.get("severity", {})
    if not isinstance(severities, dict):
        raise TvisError(f"{path}: severity must be a table like {{TV001 = \"error\"}}")
    config.severity = {key.upper(): _severity(path, value) for key, value in severities.items()}
    if "fail-on" in table:
        config.fail_on = _severity(path, table["fail-on"])
    return config


def _id_list(path: Path, key: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise TvisError(f"{path}: {key} must be a list of rule ids like [\"TV001\"]")
    return [v.upper() for v in value]


def _severity(path: Path, value: object) -> Severity:
    try:
        return Severity.parse(str(value))
    except TvisError as exc:
        raise TvisError(f"{path}: {exc}") from None
