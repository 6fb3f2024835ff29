"""How fast `tvis check` is: lines per second over ~100,000 generated lines, on one core.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/bench_check.py [--lines 100000]

The body of code is the labelled corpus (training scripts in several styles) plus generated
model/data/utility modules, written as one project into a temporary folder, so the
cross-file analysis sees realistic repeats (hundreds of `forward`, `train_step`, `__init__`).
A second body is real code: the first ~100,000 lines of the installed torch package (or
`--source DIR`), copied as-is. For each, printed side by side: reading + parsing alone, and
the full check with every rule.
Times are CPU seconds of this process (one core), steadier than wall time on a busy machine.
Target: 100,000 lines checked in under 5 s.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tvis_tui.check.engine import check_paths, collect_files  # noqa: E402
from tvis_tui.check.registry import all_rules  # noqa: E402
from tvis_tui.check.source import load  # noqa: E402

CORPUS = ROOT / "tests" / "check" / "corpus"

BLOCK = '''

class Block{i}(nn.Module):
    """Residual block {i}."""

    def __init__(self, dim: int = {dim}, dropout: float = 0.1):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 4)
        self.fc2 = nn.Linear(dim * 4, dim)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = self.fc2(F.gelu(self.fc1(self.norm(x))))
        return x + self.drop(h)


def make_loader_{i}(n: int = 256, batch_size: int = 32):
    data = TensorDataset(torch.randn(n, {dim}), torch.randint(0, 10, (n,)))
    return DataLoader(data, batch_size=batch_size, shuffle=True, num_workers=2)


def train_step_{i}(model, batch, optimizer, criterion, scaler=None):
    x, y = batch
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)
    loss = criterion(logits, y)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    optimizer.step()
    return {{"loss": loss.item(), "acc": (logits.argmax(-1) == y).float().mean().item()}}


@torch.no_grad()
def evaluate_{i}(model, loader):
    model.eval()
    totals = {{"correct": 0, "seen": 0}}
    for x, y in loader:
        pred = model(x).argmax(dim=-1)
        totals["correct"] += (pred == y).sum().item()
        totals["seen"] += y.numel()
    model.train()
    return totals["correct"] / max(totals["seen"], 1)


def fit_{i}(epochs: int = 2):
    model = nn.Sequential(Block{i}(), nn.Linear({dim}, 10))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    history = []
    for epoch in range(epochs):
        for batch in make_loader_{i}():
            history.append(train_step_{i}(model, batch, optimizer, criterion))
        print(epoch, evaluate_{i}(model, make_loader_{i}()))
    return history
'''

HEADER = '''"""Generated module {n} for the tvis check benchmark."""
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
'''


def generate(folder: Path, lines_wanted: int) -> int:
    """Write corpus copies and generated modules into `folder`; return the line count."""
    seeds = sorted(CORPUS.rglob("*.py"))
    total, n = 0, 0
    while total < lines_wanted:
        if n % 3 == 0 and seeds:
            text = seeds[(n // 3) % len(seeds)].read_text(encoding="utf-8")
        else:
            text = HEADER.format(n=n) + "".join(BLOCK.format(i=f"{n}_{k}", dim=64 + k)
                                                for k in range(8))
        path = folder / f"pkg{n // 50}" / f"mod{n}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        total += text.count("\n")
        n += 1
    return total


def gather(folder: Path, source: Path, lines_wanted: int) -> int:
    """Copy real .py files from `source` (sorted, so runs compare) until enough lines."""
    total = 0
    for n, path in enumerate(sorted(source.rglob("*.py"))):
        text = path.read_bytes()
        target = folder / f"pkg{n // 50}" / f"mod{n}.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(text)
        total += text.count(b"\n")
        if total >= lines_wanted:
            break
    return total


def installed_torch() -> Path | None:
    """The installed torch package's folder, found without importing torch."""
    spec = importlib.util.find_spec("torch")
    return Path(spec.origin).parent if spec is not None and spec.origin else None


def measure(label: str, fill, lines_wanted: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        lines = fill(folder, lines_wanted)
        files = collect_files([str(folder)])
        start = time.process_time()
        for path, display in files:
            load(path, display)
        parse_s = time.process_time() - start
        start = time.process_time()
        result = check_paths([str(folder)], all_rules())
        check_s = time.process_time() - start
    per_100k = check_s * 100_000 / lines
    print(f"{label}: {lines:,} lines in {len(files)} files, {len(result.findings)} findings, "
          f"{len(result.problems)} files not checked")
    print(f"  read + parse only : {parse_s:6.2f} s  {lines / parse_s:>10,.0f} lines/s")
    print(f"  full check        : {check_s:6.2f} s  {lines / check_s:>10,.0f} lines/s  "
          f"({check_s / parse_s:.1f}x parsing; {per_100k:.2f} s per 100,000 lines)")
    return per_100k


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--source", type=Path, default=None,
                        help="also time real code from this folder (default: installed torch)")
    args = parser.parse_args()
    print(f"{len(all_rules())} rules; CPU seconds of this process")
    worst = measure("generated training code", generate, args.lines)
    real = args.source or installed_torch()
    if real is not None and real.is_dir():
        worst = max(worst, measure(f"real code from {real}",
                                   lambda folder, n: gather(folder, real, n), args.lines))
    print(f"target: 100,000 lines in < 5 s: {'met' if worst < 5 else 'MISSED'} "
          f"(slowest {worst:.2f} s)")
    return 0 if worst < 5 else 1


if __name__ == "__main__":
    sys.exit(main())
