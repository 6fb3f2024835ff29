"""A module's own forward hooks run after tvis's global one: a call is closed after them,
so its recorded output is what the caller got, and nothing of tvis stays on the module."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from tvis_tui.record.options import CaptureOptions

from .helpers import tvis_cli, tvis_env, write_script

NO_LINES = CaptureOptions(lines=False)


def _calls(run, name):
    return [c for c in run.calls(1, run.call_count()) if c.kind == "module" and c.name == name]


def _out(run, call, role="output"):
    return next(s for s in run.slots(call.seq, role) if s.path == "out")


def test_an_output_replaced_by_the_modules_own_hook_is_recorded_as_replaced(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
model[0].register_forward_hook(lambda m, args, out: out * 0 + 7)
model(torch.randn(3, 4)).sum().backward()
""", capture=NO_LINES)
    assert code == 0
    (first,), (second,) = _calls(run, "0"), _calls(run, "1")
    replaced = _out(run, first).stats
    assert (replaced.min, replaced.max) == (7.0, 7.0)
    assert run.slots(second.seq, "input")[0].stats.max == 7.0
    # The grad is the one of the output the caller got (the hook's), not of the discarded one.
    assert _out(run, first, "grad") is not None


def test_a_hook_registered_between_calls_and_a_recursive_call_are_closed_after_it(run_inprocess, capsys):
    code, run = run_inprocess("""
import copy
import torch
from torch import nn

class Halve(nn.Module):
    def forward(self, x, depth):
        return x if depth == 0 else self(x, depth - 1) / 2

halve = Halve()
halve(torch.ones(2), 1)
halve.register_forward_hook(lambda m, args, out: out * 3)
print(halve(torch.ones(2), 2).tolist(), len(halve._forward_hooks))
copy.deepcopy(halve)  # no tvis hook left on the module to copy
""", capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == "[6.75, 6.75] 1\n"
    maxima = [_out(run, c).stats.max for c in _calls(run, "Halve")]
    # Before the hook: 1 (depth 0), 0.5 (depth 1); after it: 3, 4.5, 6.75 (not 1, 1.5, 2.25).
    assert sorted(maxima) == [0.5, 1.0, 3.0, 4.5, 6.75]


def test_a_failing_own_hook_fails_the_call_as_in_plain_python(tmp_path):
    script = write_script(tmp_path, """
import torch
from torch import nn

def check(module, args, out):
    raise ValueError("output out of range")

lin = nn.Linear(2, 2)
lin.register_forward_hook(check)
lin(torch.ones(1, 2))
""")
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=tvis_env(),
                           capture_output=True, text=True)
    traced = tvis_cli("run", "--name", "r", str(script), cwd=tmp_path)
    assert traced.returncode == plain.returncode == 1
    assert traced.stderr.splitlines()[-2] == plain.stderr.splitlines()[-1] == "ValueError: output out of range"
    from tvis_tui.store import RunReader
    with RunReader(tmp_path / "runs" / "r") as run:
        (call,) = _calls(run, "Linear")
        assert call.error == "ValueError: output out of range"


def test_a_hooked_call_fails_only_when_its_forward_or_hook_raised(run_inprocess, capsys):
    code, run = run_inprocess("""
import torch
from torch import nn

lin = nn.Linear(2, 2)
lin.register_forward_hook(lambda m, args, out: out * 2)
try:
    raise KeyError("handled")
except KeyError:
    lin(torch.ones(1, 2))  # inside the script's own except block: it returns all the same
try:
    lin(torch.ones(1, 3))  # the forward raises
except RuntimeError:
    pass
print(len(lin._forward_hooks))
""", capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == "1\n"
    returned, failed = _calls(run, "Linear")
    assert returned.error is None and _out(run, returned) is not None
    assert failed.error.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")


def test_an_output_replaced_by_a_global_hook_of_the_script_is_recorded_as_replaced(run_inprocess, capsys):
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

def clip(module, args, out):
    return out.clamp(-0.1, 0.1) if isinstance(module, nn.Linear) else None

model = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
handle = register_module_forward_hook(clip)
model(torch.randn(3, 4) * 10)
handle.remove()
print(len(model[0]._forward_hooks), len(model[1]._forward_hooks))
""", capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == "0 0\n"  # no tvis hook left behind
    (lin,) = _calls(run, "0")
    out = _out(run, lin).stats
    assert (out.min, out.max) == (np.float32(-0.1), np.float32(0.1))  # inputs * 10: far past
