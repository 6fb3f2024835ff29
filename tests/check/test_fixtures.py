"""Every fixture and corpus case finds exactly the findings its `# expect:` comments name."""

from __future__ import annotations

import pytest

from .labels import actual, cases, expected, known_misses


@pytest.mark.parametrize("case", cases(), ids=lambda p: p.parent.name + "/" + p.name)
def test_case_matches_expectations(case):
    want, got = expected(case), actual(case) - known_misses(case)
    missed = sorted(want - got)
    extra = sorted(got - want)
    assert not missed and not extra, (
        "\n".join([f"missed (false negative): {p}:{n} {r}" for p, n, r in missed] +
                  [f"unexpected (false positive): {p}:{n} {r}" for p, n, r in extra]))
