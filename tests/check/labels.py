"""The `# expect: TV001` convention shared by the fixture tests and scripts/score_check.py.

A case is one .py file, or a folder of .py files checked together as one project, under
tests/check/fixtures/ or tests/check/corpus/. Each `# expect: ID[,ID]` comment marks a line on
which a finding of that rule must start; every other finding is a false positive.
`# known-miss: ID` marks a real bug the rule does not find yet: the tests accept either
outcome, and scripts/score_check.py counts it as a false negative until it is found.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).parent
CASE_ROOTS = (HERE / "fixtures", HERE / "corpus")
_EXPECT = re.compile(r"#\s*expect:\s*([A-Z0-9_,\s]+)")
_KNOWN_MISS = re.compile(r"#\s*known-miss:\s*([A-Z0-9_,\s]+)")

Label = tuple[str, int, str]  # (path, line, rule id)


def cases() -> list[Path]:
    """Every case: top-level .py files and folders in the case roots, sorted."""
    found: list[Path] = []
    for root in CASE_ROOTS:
        if root.is_dir():
            found += sorted(p for p in root.iterdir() if (p.suffix == ".py" or p.is_dir())
                            and not p.name.startswith(("_", ".")))
    return found


def case_files(case: Path) -> list[Path]:
    return sorted(case.rglob("*.py")) if case.is_dir() else [case]


def expected(case: Path) -> set[Label]:
    return _labels(case, _EXPECT)


def known_misses(case: Path) -> set[Label]:
    return _labels(case, _KNOWN_MISS)


def _labels(case: Path, marker: re.Pattern) -> set[Label]:
    labels: set[Label] = set()
    for path in case_files(case):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            match = marker.search(line)
            if match:
                for rule in match.group(1).replace(" ", "").split(","):
                    if rule:
                        labels.add((str(path), number, rule))
    return labels


def actual(case: Path, rules=None) -> set[Label]:
    """The findings of `tvis check` on the case, as labels (all rules unless given)."""
    from tvis_tui.check.engine import check_paths
    from tvis_tui.check.registry import all_rules

    result = check_paths([str(p) for p in case_files(case)], rules or all_rules())
    if result.problems:
        raise AssertionError(f"{case}: {result.problems[0].message}")
    return {(f.path, f.line, f.rule) for f in result.findings}
