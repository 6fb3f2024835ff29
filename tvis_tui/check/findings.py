"""What a check reports: severities, categories, findings and per-file problems."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Severity(str, Enum):
    """How costly a finding is; `--fail-on` compares by `rank`."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"

    @property
    def rank(self) -> int:
        return _RANKS[self]

    @classmethod
    def parse(cls, text: str) -> "Severity":
        from tvis_tui.errors import TvisError

        try:
            return cls(text.lower())
        except ValueError:
            names = ", ".join(s.value for s in cls)
            raise TvisError(f"unknown severity {text!r} (choose from {names})") from None


_RANKS = {Severity.INFO: 0, Severity.WARNING: 1, Severity.ERROR: 2}


class Category(str, Enum):
    """What kind of cost a rule guards against."""

    CONVERGENCE = "convergence bug"
    MEMORY_LEAK = "memory leak"
    WASTED_COMPUTE = "wasted compute"
    REPRODUCIBILITY = "reproducibility"
    CORRECTNESS = "correctness"
    MEMORY = "memory"
    """Does not fit in GPU memory (the VRAM estimator's findings)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem at one place. Lines and columns are 1-based; end_column is exclusive."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    rule: str
    category: Category
    severity: Severity
    message: str
    fix: str | None = None

    def to_json(self) -> dict:
        return {
            "path": self.path, "line": self.line, "column": self.column,
            "end_line": self.end_line, "end_column": self.end_column,
            "rule": self.rule, "category": self.category.value,
            "severity": self.severity.value, "message": self.message, "fix": self.fix,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Finding":
        """A finding from its JSON form; end_line/end_column/fix may be missing."""
        line, column = int(data["line"]), int(data.get("column", 1))
        return cls(
            path=str(data["path"]), line=line, column=column,
            end_line=int(data.get("end_line", line)),
            end_column=int(data.get("end_column", column + 1)),
            rule=str(data["rule"]), category=Category(data.get("category", "correctness")),
            severity=Severity.parse(str(data.get("severity", "warning"))),
            message=str(data["message"]), fix=data.get("fix"),
        )


@dataclass(frozen=True, slots=True)
class FileProblem:
    """A file that could not be checked (unreadable, not UTF-8, too large, syntax error)."""

    path: str
    message: str
    line: int = 1
    column: int = 1
    fails: bool = True
    """Whether it makes `tvis check` exit 1 (a syntax error does; a skipped huge file and
    a rule giving up on one file do not: the user's code is not at fault)."""
