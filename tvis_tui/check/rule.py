"""The Rule base class and the parsing of a rule's docstring into its documentation."""

from __future__ import annotations

import inspect
import re
import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Iterator

from tvis_tui.check.findings import Category, Finding, Severity

if TYPE_CHECKING:
    from tvis_tui.check.context import Context

SECTIONS = ("What it does", "Why is this bad", "Example", "Use instead", "Known limits")
RULE_ID = re.compile(r"^TV\d{3}$")


class Rule:
    """Subclass once per file in `tvis_tui/check/rules/`; see that package's docstring."""

    id: ClassVar[str]
    title: ClassVar[str]
    severity: ClassVar[Severity]
    category: ClassVar[Category]
    fix: ClassVar[str | None] = None
    """The suggested fix shown in JSON output when a finding does not give its own."""

    def check(self, ctx: "Context") -> Iterator[Finding]:
        raise NotImplementedError

    @classmethod
    def doc(cls) -> "RuleDoc":
        return RuleDoc.parse(cls)


@dataclass(frozen=True)
class RuleDoc:
    """A rule's write-up: the summary line and the five sections of its docstring."""

    rule: type[Rule]
    summary: str
    sections: dict[str, str]

    @classmethod
    def parse(cls, rule: type[Rule]) -> "RuleDoc":
        raw = inspect.cleandoc(rule.__doc__ or "")
        summary, _, rest = raw.partition("\n")
        sections: dict[str, str] = {}
        current = None
        lines: list[str] = []
        for line in rest.splitlines():
            heading = line.strip().rstrip(":").rstrip("?")
            if heading in SECTIONS and line.strip().endswith((":", "?:")):
                if current is not None:
                    sections[current] = _dedent(lines)
                current, lines = heading, []
            elif current is not None:
                lines.append(line)
        if current is not None:
            sections[current] = _dedent(lines)
        return cls(rule, summary.strip(), sections)

    def missing_sections(self) -> list[str]:
        return [name for name in SECTIONS if not self.sections.get(name, "").strip()]


def _dedent(lines: list[str]) -> str:
    return textwrap.dedent("\n".join(lines)).strip("\n")
