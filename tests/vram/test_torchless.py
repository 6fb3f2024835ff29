"""The static path never imports torch: it runs where torch cannot be imported."""

from __future__ import annotations

import json
import subprocess
import sys

BLOCK_TORCH = """
import json, sys
sys.modules["torch"] = None  # `import torch` now raises ImportError
from tvis_tui.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "torch": sys.modules.get("torch", "absent") is not None}))
"""


def run(*argv):
    proc = subprocess.run([sys.executable, "-c", BLOCK_TORCH, *argv], capture_output=True,
                          text=True, timeout=60)
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])


def test_static_estimate_without_torch(script):
    proc, status = run("vram", script("gpt_manual"), "--gpu", "h100", "--format", "json")
    assert status == {"code": 0, "torch": False}
    doc = json.loads(proc.stdout[:proc.stdout.rindex("{\"code\"")])
    assert doc["confidence"] == "high" and doc["breakdown"]["activations"] > 0


def test_trace_without_torch_is_a_one_line_error(script):
    proc, status = run("vram", script("mlp"), "--trace")
    assert status["code"] == 2
    assert proc.stderr.strip() == "tvis: error: --trace needs torch installed; the static estimate does not"
