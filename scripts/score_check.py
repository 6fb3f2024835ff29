"""Precision and recall of `tvis check` per rule over the labelled cases.

    .venv/bin/python scripts/score_check.py            # corpus + fixtures
    .venv/bin/python scripts/score_check.py --corpus   # the corpus only

A case is a file or folder under tests/check/corpus or tests/check/fixtures; its
`# expect: TV001` comments are the truth (see tests/check/labels.py). A finding on an
expected (line, rule) is a true positive, any other finding a false positive, and an expected
label with no finding a false negative.

Then, as a check on code the rules were not written against, the mutation table
(scripts/check_mutants.py): known bugs planted into clean scripts, and how many were found.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from check_mutants import run_mutants  # noqa: E402
from tests.check.labels import actual, cases, expected, known_misses  # noqa: E402
from tvis_tui.check.registry import all_rules  # noqa: E402

TARGET_PRECISION, TARGET_RECALL, RULE_FLOOR = 0.95, 0.90, 0.80


def score(corpus_only: bool) -> tuple[Counter, Counter, Counter, list[str]]:
    tp, fp, fn = Counter(), Counter(), Counter()
    notes: list[str] = []
    for case in cases():
        if corpus_only and case.parent.name != "corpus":
            continue
        want, got = expected(case) | known_misses(case), actual(case)
        for label in got & want:
            tp[label[2]] += 1
        for label in got - want:
            fp[label[2]] += 1
            notes.append(f"false positive: {label[0]}:{label[1]} {label[2]}")
        for label in want - got:
            fn[label[2]] += 1
            notes.append(f"false negative: {label[0]}:{label[1]} {label[2]}")
    return tp, fp, fn, notes


def ratio(num: int, den: int) -> float:
    return num / den if den else 1.0


def print_mutants() -> None:
    print("\nplanted bugs in clean scripts (mutation recall):")
    for op, made, detected, missed in run_mutants():
        rate = f"{detected / made:.2f}" if made else "  - "
        print(f"  {op.rule}  {detected:>3}/{made:<3} {rate}  {op.name}")
        for seed in missed:
            print(f"         not found in {seed}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", action="store_true", help="score the corpus only")
    args = parser.parse_args()
    tp, fp, fn, notes = score(args.corpus)
    print(f"{'rule':<7}{'TP':>5}{'FP':>5}{'FN':>5}{'precision':>11}{'recall':>8}")
    ok = True
    for rule in all_rules():
        t, f, n = tp[rule.id], fp[rule.id], fn[rule.id]
        p, r = ratio(t, t + f), ratio(t, t + n)
        flag = "" if min(p, r) >= RULE_FLOOR and t else "  <- below target"
        ok = ok and not flag
        print(f"{rule.id:<7}{t:>5}{f:>5}{n:>5}{p:>11.2f}{r:>8.2f}{flag}")
    t, f, n = sum(tp.values()), sum(fp.values()), sum(fn.values())
    p, r = ratio(t, t + f), ratio(t, t + n)
    print(f"{'all':<7}{t:>5}{f:>5}{n:>5}{p:>11.3f}{r:>8.3f}   "
          f"(targets: precision >= {TARGET_PRECISION}, recall >= {TARGET_RECALL}, "
          f"every rule >= {RULE_FLOOR})")
    for note in notes:
        print(note)
    print_mutants()
    return 0 if ok and p >= TARGET_PRECISION and r >= TARGET_RECALL else 1


if __name__ == "__main__":
    sys.exit(main())
