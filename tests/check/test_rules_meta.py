"""Every rule is documented the same way, and docs/rules.md is generated from those docs."""

from __future__ import annotations

from pathlib import Path

import pytest

from tvis_tui.check import docs
from tvis_tui.check.findings import Category, Severity
from tvis_tui.check.registry import all_rules
from tvis_tui.check.source import SourceFile, parse

from .labels import cases, expected

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_rule_is_fully_described(rule):
    doc = rule.doc()
    assert doc.missing_sections() == [], f"{rule.id} docstring lacks sections"
    assert rule.title and not rule.title.endswith(".")
    assert isinstance(rule.severity, Severity) and isinstance(rule.category, Category)
    module_file = Path(__import__(rule.__module__, fromlist=["x"]).__file__).name
    assert module_file.startswith(rule.id.lower() + "_"), "file name must start with the id"
    for section in ("Example", "Use instead"):
        parsed = parse(doc.sections[section].encode(), "doc")
        assert isinstance(parsed, SourceFile), f"{rule.id} {section} is not valid Python"


@pytest.mark.parametrize("rule", all_rules(), ids=lambda r: r.id)
def test_rule_has_true_positive_and_look_alike_cases(rule):
    fixture_cases = [c for c in cases() if c.name.startswith(rule.id + "_")]
    assert fixture_cases, f"no tests/check/fixtures/{rule.id}_*.py"
    hits = [label for c in cases() for label in expected(c) if label[2] == rule.id]
    assert len(hits) >= 3, f"{rule.id} needs several true positives"


def test_docs_rules_md_is_up_to_date():
    current = (ROOT / "docs" / "rules.md").read_text(encoding="utf-8")
    assert current == docs.markdown(all_rules()), (
        "regenerate: .venv/bin/tvis check --list-rules --format markdown > docs/rules.md")
