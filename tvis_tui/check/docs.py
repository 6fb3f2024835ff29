"""`tvis check --explain` and docs/rules.md, both generated from the rule docstrings."""

from __future__ import annotations

from typing import Sequence

from tvis_tui.check.rule import SECTIONS, Rule

CODE_SECTIONS = ("Example", "Use instead")
"""Sections whose body is Python code (fenced in Markdown)."""


def explain(rule: type[Rule]) -> str:
    doc = rule.doc()
    lines = [f"{rule.id}: {rule.title}",
             f"severity: {rule.severity.value}    category: {rule.category.value}", ""]
    if doc.summary and doc.summary != rule.title:
        lines += [doc.summary, ""]
    for name in SECTIONS:
        body = doc.sections.get(name)
        if body:
            lines += [f"{name}:", *("    " + line if line else "" for line in body.splitlines()),
                      ""]
    return "\n".join(lines).rstrip() + "\n"


def rule_table(rules: Sequence[type[Rule]]) -> str:
    width = max((len(r.title) for r in rules), default=5)
    rows = [f"{'id':<6} {'severity':<8} {'category':<16} title"]
    rows += [f"{r.id:<6} {r.severity.value:<8} {r.category.value:<16} {r.title}" for r in rules]
    return "\n".join(row[: 34 + width] for row in rows) + "\n"


def markdown(rules: Sequence[type[Rule]]) -> str:
    """The whole rules reference as Markdown (docs/rules.md)."""
    out = ["# tvis check rules", "",
           "Generated from the rule docstrings by `tvis check --list-rules --format markdown`;",
           "do not edit by hand.", "",
           "| id | title | severity | category |", "|---|---|---|---|"]
    out += [f"| [{r.id}](#{r.id.lower()}) | {r.title} | {r.severity.value} | "
            f"{r.category.value} |" for r in rules]
    for rule in rules:
        doc = rule.doc()
        out += ["", f"## {rule.id}", "", f"**{rule.title}** — {rule.severity.value}, "
                f"{rule.category.value}", ""]
        if doc.summary and doc.summary != rule.title:
            out += [doc.summary, ""]
        for name in SECTIONS:
            body = doc.sections.get(name)
            if body and name in CODE_SECTIONS:
                out += [f"### {name}", "", "```python", body, "```", ""]
            elif body:
                out += [f"### {name}", "", body, ""]
    return "\n".join(out).rstrip() + "\n"
