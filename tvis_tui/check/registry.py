"""Finding the rules: every module in `tvis_tui.check.rules` defines one Rule subclass."""

from __future__ import annotations

import importlib
import pkgutil
from functools import lru_cache

from tvis_tui.check import rules as rules_package
from tvis_tui.check.rule import RULE_ID, Rule
from tvis_tui.errors import TvisError


@lru_cache(maxsize=1)
def all_rules() -> tuple[type[Rule], ...]:
    """Every rule, sorted by id. A module that defines no rule or a duplicate id is a bug in
    tvis itself, so it fails loudly here (and in the test suite) rather than being skipped."""
    found: dict[str, type[Rule]] = {}
    for info in pkgutil.iter_modules(rules_package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{rules_package.__name__}.{info.name}")
        defined = [obj for obj in vars(module).values()
                   if isinstance(obj, type) and issubclass(obj, Rule) and obj is not Rule
                   and obj.__module__ == module.__name__]
        if len(defined) != 1:
            raise RuntimeError(f"{module.__name__} must define exactly one Rule subclass")
        rule = defined[0]
        if not RULE_ID.match(getattr(rule, "id", "")) or rule.id in found:
            raise RuntimeError(f"{module.__name__}: rule id {getattr(rule, 'id', None)!r} "
                               "is malformed or already used")
        found[rule.id] = rule
    return tuple(found[key] for key in sorted(found))


def rule_by_id(rule_id: str) -> type[Rule]:
    for rule in all_rules():
        if rule.id == rule_id.upper():
            return rule
    raise TvisError(f"unknown rule {rule_id!r} (see `tvis check --list-rules`)")


def select_rules(select: list[str] | None, ignore: list[str]) -> list[type[Rule]]:
    """Rules whose id starts with a selected prefix (all when `select` is None) and with no
    ignored prefix. Every prefix must match at least one rule, so typos are caught."""
    ids = [rule.id for rule in all_rules()]
    for prefix in (select or []) + ignore:
        if not any(i.startswith(prefix.upper()) for i in ids) and prefix.upper() != "ALL":
            raise TvisError(f"unknown rule or prefix {prefix!r} (see `tvis check --list-rules`)")

    def matches(rule_id: str, prefixes: list[str]) -> bool:
        return any(p.upper() == "ALL" or rule_id.startswith(p.upper()) for p in prefixes)

    if select is not None and not select:  # would pass every file without a word
        raise TvisError("select names no rule: nothing would be checked")
    return [rule for rule in all_rules()
            if (select is None or matches(rule.id, select)) and not matches(rule.id, ignore)]
