"""Observing must not change training: each bundled example ends bitwise identical (params,
optimizer state, RNG state, printed losses) with and without tvis, in separate processes."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from .helpers import EXAMPLES, tvis_cli, tvis_env


def _assert_identical(a, b, path="state"):
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert torch.equal(a, b), f"{path} differs"
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for key in a:
            _assert_identical(a[key], b[key], f"{path}.{key}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.parametrize("example", ["image_classifier", "char_lm"])
def test_training_is_bitwise_identical_under_tvis(tmp_path, example):
    script = str(EXAMPLES / example / "train.py")
    args = ["--max-steps", "6"]
    plain = subprocess.run([sys.executable, script, *args, "--save-state", "plain.pt"], cwd=tmp_path,
                           env=tvis_env(), capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    # tvis's own limit is above the script's, so the script runs to its end and saves.
    traced = tvis_cli("run", "--steps", "50", "--out", "runs", script, *args, "--save-state", "tvis.pt",
                      cwd=tmp_path, timeout=120)
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout and "loss" in plain.stdout
    _assert_identical(torch.load(tmp_path / "plain.pt"), torch.load(tmp_path / "tvis.pt"))
    assert "recorded 6 steps" in traced.stderr
