"""Recall on code the rules were not written against: plant one known bug in clean scripts.

Each operator rewrites a clean training script (the unlabelled corpus files, the bundled
examples and the VRAM test scripts) so that it has exactly one kind of bug, then asks whether
the matching rule finds it. Used by scripts/score_check.py.
"""

from __future__ import annotations

import ast
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
SEED_GLOBS = ("tests/check/corpus/*.py", "examples/*/*.py", "tests/vram/scripts/*.py")


def _drop_zero_grad(text: str) -> str | None:
    out, changed = [], False
    for line in text.splitlines():
        if re.match(r"\s*[\w.]+\.zero_grad\(.*\)\s*$", line):
            line, changed = re.match(r"\s*", line).group(0) + "pass", True
        out.append(line)
    return "\n".join(out) + "\n" if changed else None


def _store_loss(text: str) -> str | None:
    """After `loss.backward()`, also append `loss` to a module-level list."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = re.match(r"(\s*)(\w+)\.backward\(\)\s*$", line)
        if match:
            lines.insert(i + 1, f"{match.group(1)}_planted_history.append({match.group(2)})")
            lines.insert(_after_imports(text), "_planted_history = []")
            return "\n".join(lines) + "\n"
    return None


def _after_imports(text: str) -> int:
    """Index of the first top-level line after the docstring and imports (parsed, not run)."""
    body = ast.parse(text).body
    for node in body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if not docstring and not isinstance(node, (ast.Import, ast.ImportFrom)):
            return node.lineno - 1 - len(getattr(node, "decorator_list", []))
    return len(text.splitlines())


def _zero_grad_after_backward(text: str) -> str | None:
    """Move the first standalone zero_grad() to just after the next backward()."""
    lines = text.splitlines()
    reset = next((i for i, l in enumerate(lines)
                  if re.match(r"\s*[\w.]+\.zero_grad\(.*\)\s*$", l)), None)
    if reset is None:
        return None
    backward = next((i for i in range(reset + 1, len(lines))
                     if re.match(r"\s*.*\.backward\(.*\)\s*$", lines[i])), None)
    if backward is None:
        return None
    indent = re.match(r"\s*", lines[backward]).group(0)
    moved = indent + lines[reset].strip()
    lines[reset] = re.match(r"\s*", lines[reset]).group(0) + "pass"
    lines.insert(backward + 1, moved)
    return "\n".join(lines) + "\n"


def _drop_no_grad(text: str) -> str | None:
    """`with torch.no_grad():` around an evaluation loop becomes `if True:`."""
    pattern = re.compile(r"^(\s*)with torch\.(no_grad|inference_mode)\(\):\s*\n(\s*for )",
                         re.M)
    changed = pattern.sub(r"\1if True:\n\3", text)
    return changed if changed != text else None


def _bce_without_logits(text: str) -> str | None:
    changed = text.replace("BCEWithLogitsLoss(", "BCELoss(").replace(
        "binary_cross_entropy_with_logits(", "binary_cross_entropy(")
    return changed if changed != text else None


def _discard_to(text: str) -> str | None:
    single = re.compile(r"^(\s*)(\w+) = \2\.(to|cuda)\((.*)\)\s*$", re.M)
    changed = single.sub(r"\1\2.\3(\4)", text, count=1)
    pair = re.compile(r"^(\s*)(\w+), (\w+) = \2\.to\(([^()]*)\), \3\.to\(([^()]*)\)\s*$", re.M)
    if changed == text:  # `x, y = x.to(d), y.to(d)`: forget to assign the first
        changed = pair.sub(r"\1\2.to(\4)\n\1\3 = \3.to(\5)", text, count=1)
    return changed if changed != text else None


def _forget_call(text: str) -> str | None:
    pattern = re.compile(r"^(\s*[\w.]+\.(?:eval|zero_grad))\(\)\s*$", re.M)
    changed = pattern.sub(r"\1", text, count=1)
    return changed if changed != text else None


def _softmax_into_ce(text: str) -> str | None:
    pattern = re.compile(r"\b(F|nn\.functional|torch\.nn\.functional)\.cross_entropy\("
                         r"([\w.]+(?:\([^()]*\))?),")
    changed = pattern.sub(r"\1.cross_entropy(\2.softmax(-1),", text, count=1)
    return changed if changed != text else None


@dataclass(frozen=True)
class Operator:
    rule: str
    name: str
    mutate: Callable[[str], str | None]


OPERATORS = (
    Operator("TV001", "append the loss to a list after backward()", _store_loss),
    Operator("TV002", "delete every zero_grad()", _drop_zero_grad),
    Operator("TV003", "move zero_grad() to between backward() and step()",
             _zero_grad_after_backward),
    Operator("TV005", "softmax the logits fed to F.cross_entropy", _softmax_into_ce),
    Operator("TV007", "BCEWithLogitsLoss becomes BCELoss on the same logits",
             _bce_without_logits),
    Operator("TV008", "`with torch.no_grad():` around a loop becomes `if True:`",
             _drop_no_grad),
    Operator("TV009", "`x = x.to(d)` becomes `x.to(d)`", _discard_to),
    Operator("TV010", "drop the parentheses of .eval() / .zero_grad()", _forget_call),
)


def seeds() -> list[Path]:
    """Clean scripts: the globs above, minus files with `# expect:` labels."""
    found = sorted({p for pattern in SEED_GLOBS for p in ROOT.glob(pattern)})
    return [p for p in found if "# expect:" not in p.read_text(encoding="utf-8")]


def run_mutants() -> list[tuple[Operator, int, int, list[str]]]:
    """(operator, mutants made, mutants detected, undetected seed names) per operator. A
    mutant counts as detected when the rule finds more in it than in the clean seed."""
    from tvis_tui.check.engine import check_paths
    from tvis_tui.check.registry import rule_by_id

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for op in OPERATORS:
            made = detected = 0
            missed: list[str] = []
            for seed in seeds():
                mutant = op.mutate(seed.read_text(encoding="utf-8"))
                if mutant is None:
                    continue
                path = Path(tmp) / f"{op.rule}_{seed.parent.name}_{seed.name}"
                path.write_text(mutant, encoding="utf-8")
                made += 1
                rules = [rule_by_id(op.rule)]
                before = len(check_paths([str(seed)], rules).findings)
                if len(check_paths([str(path)], rules).findings) > before:
                    detected += 1
                else:
                    missed.append(str(seed.relative_to(ROOT)))
            results.append((op, made, detected, missed))
    return results
