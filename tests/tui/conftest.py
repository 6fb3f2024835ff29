"""Tiny realistic runs written through the real RunWriter: a healthy 3-step run whose last
step produces NaN, and a run that crashed inside a nested module call."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import numpy as np
import pytest

from tvis_tui.store import CallRecord, RunWriter, Site, Slot, StepRecord, TensorStats
from tvis_tui.store.samples import put_batch, put_prediction, put_sample

TRAIN = "/home/ada/proj/train.py"
MODEL = "/home/ada/proj/model.py"
CONTAINER = "/usr/lib/python3/site-packages/torch/nn/modules/container.py"

TRAIN_SRC = '''import torch
from torch import nn

from model import Net


def main():
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    loader = make_loader()
    for images, labels in loader:
        logits = model(images)
        loss = criterion(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
'''

MODEL_SRC = '''from torch import nn


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return x + self.fc(x)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.relu = nn.ReLU()
        self.blocks = nn.Sequential(Block(8 * 8 * 8), Block(8 * 8 * 8))
        self.head = nn.Linear(8 * 8 * 8, 10)

    def forward(self, images):
        x = self.relu(self.conv1(images))
        x = self.blocks(x.flatten(1))
        return self.head(x)
'''

SOURCES = {TRAIN: TRAIN_SRC, MODEL: MODEL_SRC}


def line_of(path: str, snippet: str) -> int:
    """The 1-based line of `path`'s snapshot that contains `snippet`."""
    return next(i for i, text in enumerate(SOURCES[path].splitlines(), 1) if snippet in text)


def site(path: str, snippet: str) -> Site:
    return Site(path, line_of(path, snippet) if path in SOURCES else 250)


# (name, type, kind, phase, depth, call site, def site, input shape, output shape)
STEP_CALLS = [
    ("loader", "DataLoader", "function", "data", 0, (TRAIN, "in loader:"), None, None, (4, 3, 8, 8)),
    ("model", "Net", "module", "forward", 0, (TRAIN, "model(images)"), (MODEL, "def forward(self, images)"),
     (4, 3, 8, 8), (4, 10)),
    ("conv1", "Conv2d", "module", "forward", 1, (MODEL, "self.conv1(images)"), None, (4, 3, 8, 8), (4, 8, 8, 8)),
    ("relu", "ReLU", "module", "forward", 1, (MODEL, "self.conv1(images)"), None, (4, 8, 8, 8), (4, 8, 8, 8)),
    ("blocks", "Sequential", "module", "forward", 1, (MODEL, "self.blocks("), None, (4, 512), (4, 512)),
    ("blocks.0", "Block", "module", "forward", 2, (CONTAINER, ""), (MODEL, "def forward(self, x)"), (4, 512), (4, 512)),
    ("blocks.0.fc", "Linear", "module", "forward", 3, (MODEL, "self.fc(x)"), None, (4, 512), (4, 512)),
    ("blocks.1", "Block", "module", "forward", 2, (CONTAINER, ""), (MODEL, "def forward(self, x)"), (4, 512), (4, 512)),
    ("blocks.1.fc", "Linear", "module", "forward", 3, (MODEL, "self.fc(x)"), None, (4, 512), (4, 512)),
    ("head", "Linear", "module", "forward", 1, (MODEL, "self.head(x)"), None, (4, 512), (4, 10)),
    ("criterion", "CrossEntropyLoss", "module", "loss", 0, (TRAIN, "criterion(logits"), None, (4, 10), ()),
    ("backward", "Tensor.backward", "backward", "backward", 0, (TRAIN, "loss.backward()"), None, (), None),
    ("optimizer.step", "SGD", "optimizer", "optimizer", 0, (TRAIN, "optimizer.step()"), None, None, None),
]
CALLS_PER_STEP = len(STEP_CALLS)


def tensor_slot(role: str, index: int, path: str, arr: np.ndarray, keep: bool = True) -> tuple[Slot, bytes | None]:
    finite = arr[np.isfinite(arr)]
    hist, edges = np.histogram(finite, bins=16) if finite.size else (np.zeros(16, int), [None, None])
    stats = TensorStats(
        numel=int(arr.size),
        min=float(finite.min()) if finite.size else None,
        max=float(finite.max()) if finite.size else None,
        mean=float(finite.mean()) if finite.size else None,
        std=float(finite.std()) if finite.size else None,
        nan=int(np.isnan(arr).sum()), posinf=int(np.isposinf(arr).sum()), neginf=int(np.isneginf(arr).sum()),
        norm=float(np.linalg.norm(finite)) if finite.size else None, zeros=int((arr == 0).sum()),
    )
    slot = Slot(role, index, path, shape=tuple(arr.shape), dtype="float32", device="cpu", stats=stats,
                hist=tuple(int(h) for h in hist), hist_lo=None if edges[0] is None else float(edges[0]),
                hist_hi=None if edges[-1] is None else float(edges[-1]), values_dtype="float32" if keep else None)
    return slot, (arr.astype("<f4").tobytes() if keep else None)


def write_step(w: RunWriter, step: int, rng: np.random.Generator, *, nan: bool = False,
               fail_at: str | None = None, extras: dict[str, dict] | None = None) -> int | None:
    """Write one step's calls (`extras`: the extra of the calls it names); return the
    failing seq when `fail_at` names a call."""
    base = (step - 1) * CALLS_PER_STEP
    parents: list[int] = []
    for i, (name, type_, kind, phase, depth, call_at, def_at, in_shape, out_shape) in enumerate(STEP_CALLS):
        seq = base + i + 1
        parents = parents[:depth]
        failing = name == fail_at
        bad = nan and name in ("head", "criterion")
        call = CallRecord(seq=seq, parent=parents[-1] if parents else 0, depth=depth, step=step, phase=phase,
                          kind=kind, name=name, type=type_, call_site=site(*call_at),
                          def_site=site(*def_at) if def_at else None, start_ns=seq * 1000,
                          duration_ns=None if failing else 1500 * (seq % 7 + 1), nonfinite_output=bad,
                          error="RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)"
                          if failing else None, extra=(extras or {}).get(name, {}))
        w.put_call(call)
        parents.append(seq)
        slots = []
        if in_shape is not None:
            slots.append(tensor_slot("input", 0, "args[0]", rng.standard_normal(in_shape).astype(np.float32)))
        if out_shape is not None and not failing:
            out = rng.standard_normal(out_shape).astype(np.float32)
            if bad:
                out.flat[::3] = np.nan
            slots.append(tensor_slot("output", 0, "out", out, keep=out.size <= 4096))
        if kind == "function":
            slots.append((Slot("input", 1, "kwargs['drop_last']", repr="True"), None))
        if kind == "backward":
            grad = rng.standard_normal((10, 512)).astype(np.float32)
            slots.append(tensor_slot("param_grad", 0, "head.weight", grad, keep=False))
        w.put_slots(seq, slots)
        if failing:
            return seq
    loss = float("nan") if nan else 2.3 - 0.4 * step
    w.put_step(StepRecord(step=step, first_seq=base + 1, last_seq=base + CALLS_PER_STEP, loss=loss,
                          phase_ns={"data": 1000, "forward": 9000, "loss": 800, "backward": 12000,
                                    "optimizer": 700}, peak_bytes=3 << 20,
                          # The loss call's per-sample values were not stored: only the worst.
                          extra={"per_sample_loss": {"seq": base + 1, "count": 3, "reduction": "mean",
                                                     "worst": [[1, 2.5], [0, 0.25]]},
                                 "wall_ns": 24_500 + 1000 * step, "tvis_overhead_ns": 41_000,
                                 "peak_method": "live tensor storage seen by tvis: params, grads",
                                 "peak_phase_bytes": {"data": 1 << 19, "forward": 2 << 20,
                                                      "backward": 3 << 20}}))
    return None


def _meta(w: RunWriter, script: str, started: str) -> None:
    w.put_meta(script=script, argv=["--lr", "0.1"], started_at=started, status="running",
               host="recorder-host", pid=0)
    for path, text in SOURCES.items():
        w.put_source(path, text)


PREDICTIONS = {
    1: {"kind": "classes", "names": True, "classes": 3, "step": 1, "loss": "F.cross_entropy",
        "samples": [
            {"top": [["cat", 0, 0.7], ["dog", 1, 0.2], ["cow", 2, 0.1]], "target": "cat",
             "target_index": 0, "correct": True},
            {"top": [["cow", 2, 0.5], ["dog", 1, 0.3], ["cat", 0, 0.2]], "target": "dog",
             "target_index": 1, "correct": False},
            {"top": [["dog", 1, 0.4], ["cat", 0, 0.35], ["cow", 2, 0.25]], "ignored": True}]},
    2: {"kind": "tokens", "tokenizer": "CharTok", "step": 2, "loss": "F.cross_entropy",
        "samples": [{"predicted": "hellp", "predicted_ids": [1, 2, 3, 3, 4], "target": "hello",
                     "target_ids": [1, 2, 3, 3, 5], "accuracy": 0.8}]},
}


def image_value(pixels: np.ndarray, layout: str, lo: float, hi: float, **about) -> dict:
    """A sample value as the recorder describes an image-like one (store/samples.py)."""
    return {**about, "image": {"shape": list(pixels.shape), "data": pixels.tobytes(), "layout": layout,
                               "lo": lo, "hi": hi, "stride": 1}}


# A red-over-blue 8 x 8 picture, as loaded, then as a normalised CHW tensor.
RAW = np.zeros((8, 8, 3), np.uint8)
RAW[:4, :, 0] = 255
RAW[4:, :, 2] = 255
NORMALISED = image_value(RAW, "CHW", -2.1, 2.6, kind="tensor", shape=[3, 8, 8], dtype="float32",
                         stats={"numel": 192, "min": -2.1, "max": 2.6, "mean": 0.1})
SAMPLES = [
    {"position": 0, "index": 12,
     "transforms": [{"attr": "transform", "name": "Compose",
                     "input": image_value(RAW, "HWC", 0.0, 255.0, kind="ndarray", shape=[8, 8, 3],
                                          dtype="uint8"),
                     "stages": [{"name": "0:ToTensor", "value": image_value(
                                    RAW, "CHW", 0.0, 1.0, kind="tensor", shape=[3, 8, 8], dtype="float32")},
                                {"name": "1:Normalize", "value": NORMALISED}]}],
     "item": {"kind": "tuple", "length": 2,
              "items": [[0, NORMALISED], [1, {"kind": "scalar", "value": 0}]]}},
    {"position": 1, "index": 7,
     "item": {"kind": "dict", "length": 2, "items": [
         ["text", {"kind": "text", "text": "the dog barked", "length": 14}],
         ["label", {"kind": "scalar", "value": 1}]]},
     "tokens": [{"tokenizer": "CharTok", "method": "encode", "text": "the dog barked",
                 "ids": [5, 6, 7, 0, 8], "n_ids": 5}]},
    {"position": 2, "index": 3},  # past the batch's detailed samples
]


def write_healthy_run(path: Path) -> Path:
    rng = np.random.default_rng(0)
    with RunWriter(path) as w:
        _meta(w, TRAIN, "2026-12-01T10:00:00")
        for step in (1, 2, 3):
            write_step(w, step, rng, nan=step == 3)
        put_batch(w, {"seq": 1, "step": 1, "indices": [12, 7, 3], "collate": "default_collate", "size": 3,
                      "detailed": 2})
        for sample in SAMPLES:
            put_sample(w, 1, sample)
        put_prediction(w, PREDICTIONS[1])
        put_prediction(w, PREDICTIONS[2])
        w.close(status="ok", steps_recorded=3, ended_at="2026-12-01T10:00:05")
    return path


CRASH_TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/work/train.py", line 31, in <module>\n    logits = model(x)\n'
    "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)\n"
    "the head expects 256 features: check the pooling before it\n")


def write_crashed_run(path: Path) -> Path:
    rng = np.random.default_rng(1)
    with RunWriter(path) as w:
        _meta(w, TRAIN, "2026-12-02T09:30:00")
        write_step(w, 1, rng)
        failing = write_step(w, 2, rng, fail_at="blocks.1.fc")
        w.close(status="crashed", steps_recorded=1, failing_seq=failing,
                exception="RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x512 and 256x10)",
                traceback=CRASH_TRACEBACK, failing_site="/work/model.py:24")
    return path


@pytest.fixture(scope="session")
def runs_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("runs")  # the picker snapshots show this name: no other test may use it
    write_healthy_run(root / "20261201-100000-train")
    write_crashed_run(root / "20261202-093000-train")
    return root


@pytest.fixture(scope="session")
def healthy_run(runs_dir) -> Path:
    return runs_dir / "20261201-100000-train"


@pytest.fixture(scope="session")
def crashed_run(runs_dir) -> Path:
    return runs_dir / "20261202-093000-train"


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    """Run `async def` tests (Pilot tests) on a fresh event loop; no plugin needed."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    args = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**args))
    return True
