"""A module's own forward hooks run after tvis's global one: a call is closed after them,
so its recorded output is what the caller got, and nothing of tvis stays on the module."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

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


def test_inputs_are_what_the_caller_passed_and_what_forward_got_when_a_pre_hook_replaces_them(run_inprocess):
    # A pre-hook with kwargs replaces positional and keyword inputs alike; both are
    # recorded as the caller passed them, and as forward got them beside (sweep T).
    code, run = run_inprocess("""
import torch
from torch import nn

class Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
    def forward(self, x, scale=1.0, bias=None):
        return self.lin(x) * scale + bias

def pre(module, args, kwargs):
    return (args[0] + 10,), {"scale": 0.5, "bias": kwargs["bias"] + 100}

block = Scaled()
block.register_forward_pre_hook(pre, with_kwargs=True)
block(torch.zeros(2, 4), scale=2.0, bias=torch.zeros(2, 4)).sum().backward()
""", capture=NO_LINES)
    assert code == 0
    (call,) = _calls(run, "Scaled")
    inputs = {s.path: s for s in run.slots(call.seq, "input")}
    assert list(inputs) == ["args[0]", "kwargs['scale']", "kwargs['bias']", "args[0] after pre-hooks",
                            "kwargs['scale'] after pre-hooks", "kwargs['bias'] after pre-hooks"]
    assert inputs["args[0]"].stats.max == 0.0 and inputs["kwargs['bias']"].stats.max == 0.0
    assert inputs["kwargs['scale']"].repr == "2.0"
    assert inputs["args[0] after pre-hooks"].stats.min == 10.0
    assert inputs["kwargs['bias'] after pre-hooks"].stats.min == 100.0
    assert inputs["kwargs['scale'] after pre-hooks"].repr == "0.5"
    (inner,) = _calls(run, "lin")
    assert run.slots(inner.seq, "input")[0].stats.min == 10.0  # what forward got


def test_a_layers_input_reshaped_by_its_own_pre_hook_reads_as_the_layer_got_it(run_inprocess):
    """Sweep T: a Linear(6, 3) whose pre-hook flattens and casts its input read as given
    [4, 2, 3] float64, a shape that layer cannot take; a pre-hook returning None adds nothing."""
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(6, 3), nn.Linear(3, 2))
model[0].register_forward_pre_hook(lambda mod, args: (args[0].reshape(-1, 6).float(),))
model[1].register_forward_pre_hook(lambda mod, args: None)
model(torch.randn(4, 2, 3, dtype=torch.float64)).sum().backward()
# a global pre-hook of the script's own, as a whole-model adapter registers one
handle = nn.modules.module.register_module_forward_pre_hook(
    lambda mod, args: (args[0] - 0.5,) if mod is model[1] else None)
model(torch.randn(4, 2, 3, dtype=torch.float64)).sum().backward()
handle.remove()  # this test's process runs other scripts after it
""", capture=NO_LINES)
    assert code == 0
    (first, _), (second, third) = _calls(run, "0"), _calls(run, "1")
    assert [(s.path, s.shape, s.dtype) for s in run.slots(first.seq, "input")] == [
        ("args[0]", (4, 2, 3), "float64"), ("args[0] after pre-hooks", (4, 6), "float32")]
    assert [s.path for s in run.slots(second.seq, "input")] == ["args[0]"]
    passed, received = run.slots(third.seq, "input")
    assert received.path == "args[0] after pre-hooks"
    assert received.stats.mean == pytest.approx(passed.stats.mean - 0.5, abs=1e-6)


def test_only_the_inputs_a_pre_hook_replaced_are_recorded_again(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class Add(nn.Module):
    def forward(self, x, y):
        return x + y

add = Add()
add.register_forward_pre_hook(lambda mod, args: (args[0] * 2, args[1]))
add(torch.ones(2, requires_grad=True), torch.ones(2)).sum().backward()
""", capture=NO_LINES)
    assert code == 0
    (call,) = _calls(run, "Add")
    assert [s.path for s in run.slots(call.seq, "input")] == ["args[0]", "args[1]", "args[0] after pre-hooks"]


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


def _plain_stdout(tmp_path, source: str) -> str:
    script = write_script(tmp_path / "plain", source)
    done = subprocess.run([sys.executable, str(script)], cwd=script.parent, env=tvis_env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


COPIES_IN_A_HOOK = """
import copy, io
import torch
from torch import nn

def keep_a_copy(module, args, out):
    copies.append(copy.deepcopy(module))
    torch.save(module, io.BytesIO())  # pickles the module, its hooks included

copies = []
lin = nn.Linear(2, 2)
lin.register_forward_hook(keep_a_copy)
lin(torch.ones(1, 2))
print(copies[0](torch.ones(1, 2)).shape, len(copies))
"""


def test_a_module_copied_or_pickled_in_its_own_hook_copies_nothing_of_tvis(run_inprocess, capsys, tmp_path):
    code, run = run_inprocess(COPIES_IN_A_HOOK, capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == _plain_stdout(tmp_path, COPIES_IN_A_HOOK)
    assert not run.meta()["warnings"]
    # The copy's own call (from the script's print) is recorded too, closed by tvis's global hook.
    modules = [c for c in run.calls(1, run.call_count()) if c.kind == "module"]
    assert [(c.name, c.error) for c in modules] == [("Linear", None), ("Linear#2", None)]


INTERRUPTED_IN_A_HOOK = """
import copy
import torch
from torch import nn

def interrupt_once(module, args, out):
    calls[0] += 1
    if calls[0] == 1:
        raise KeyboardInterrupt

calls = [0]
lin = nn.Linear(2, 2)
lin.register_forward_hook(interrupt_once)
def step():
    try:
        lin(torch.ones(1, 2))
    except KeyboardInterrupt:
        print("interrupted")
step()
step()
print(copy.deepcopy(lin)(torch.ones(1, 2)).shape)
"""


def test_a_ctrl_c_in_a_hook_breaks_nothing_after_it(run_inprocess, capsys, tmp_path):
    code, run = run_inprocess(INTERRUPTED_IN_A_HOOK, capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == _plain_stdout(tmp_path, INTERRUPTED_IN_A_HOOK)
    # No hook saw the interrupted call end: it is closed as the next call starts; that one
    # and the copy's (a model of its own, not a call inside the interrupted one) as usual.
    modules = [c for c in run.calls(1, run.call_count()) if c.kind == "module"]
    assert [(c.name, c.error, c.depth) for c in modules][1:] == [("Linear", None, 1), ("Linear#2", None, 0)]
    assert modules[0].error.startswith("Interrupted") and modules[0].extra["unfinished"]


CLEARS_ITS_HOOKS = """
import torch
from torch import nn

class Once(nn.Linear):
    def forward(self, x):
        self._forward_hooks.clear()  # hooks for the first call only
        return super().forward(x)

torch.manual_seed(0)
once = Once(2, 2)
once.register_forward_hook(lambda m, a, out: out * 0)
print(once(torch.ones(1, 2)).abs().sum().item(), once(torch.ones(1, 2)).abs().sum().item())
"""


def test_a_forward_that_clears_its_hooks_still_has_its_call_closed(run_inprocess, capsys, tmp_path):
    code, run = run_inprocess(CLEARS_ITS_HOOKS, capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == _plain_stdout(tmp_path, CLEARS_ITS_HOOKS)
    first, second = _calls(run, "Once")
    assert second.parent == first.parent == 0 and _out(run, first) is not None


def test_a_scripted_module_is_recorded_while_the_script_has_global_hooks(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

handle = register_module_forward_hook(lambda m, a, out: None)
net = nn.Sequential(nn.Linear(2, 2), torch.jit.script(nn.Linear(2, 2)))
net(torch.ones(1, 2))
handle.remove()
""", capture=NO_LINES)
    assert code == 0 and [w.split(":")[0] for w in run.meta()["warnings"]] == ["Linear is TorchScript (torch.jit)"]
    assert [c.name for c in run.calls(1, run.call_count()) if c.kind == "module"] == ["Sequential", "0", "1"]


def test_threads_calling_one_hooked_module_keep_their_calls_apart(run_inprocess):
    code, run = run_inprocess("""
import threading, time
import torch
from torch import nn

def slow(module, args, out):
    time.sleep(0.05)
    return out + 1

ident = nn.Identity()
ident.register_forward_hook(slow)
def inside_except():
    try:
        raise KeyError("handled by the script")
    except KeyError:
        ident(torch.zeros(1))
threads = [threading.Thread(target=inside_except), threading.Thread(target=lambda: ident(torch.ones(1)))]
for t in threads: t.start()
for t in threads: t.join()
""", capture=NO_LINES)
    assert code == 0
    calls = _calls(run, "Identity")
    assert len(calls) == 2 and all(c.error is None for c in calls)
    assert sorted(_out(run, c).stats.max for c in calls) == [1.0, 2.0]


def test_threads_racing_through_one_module_under_a_global_hook_close_every_call(run_inprocess, capsys):
    code, run = run_inprocess("""
import sys, threading
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

handle = register_module_forward_hook(lambda m, a, out: out + 1)
fc = nn.Linear(2, 2)
def work():
    for _ in range(20):
        fc(torch.ones(1, 2))
old = sys.getswitchinterval()
sys.setswitchinterval(1e-6)  # threads switch inside tvis's bookkeeping
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
sys.setswitchinterval(old)
handle.remove()
print(len(fc._forward_hooks))
""", capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == "0\n" and not run.meta()["warnings"]
    calls = _calls(run, "Linear")
    assert len(calls) == 60 and {(c.parent, c.error) for c in calls} == {(0, None)}


REGISTERS_THEN_RAISES = """
import torch
from torch import nn

class M(nn.Module):
    def forward(self, x):
        self.register_forward_hook(lambda m, a, out: None)  # runs after tvis's added hook
        if x.shape[0] > 1:
            raise ValueError("bad batch")
        return x

m = M()
m(torch.ones(1, 2))
try:
    m(torch.ones(3, 2))
except Exception as exc:
    print("caught", type(exc).__name__, exc)
print(m(torch.ones(1, 2)).shape)
"""


def test_a_forward_that_adds_a_hook_and_raises_raises_as_under_python(run_inprocess, capsys, tmp_path):
    code, run = run_inprocess(REGISTERS_THEN_RAISES, capture=NO_LINES)
    assert code == 0 and capsys.readouterr().out == _plain_stdout(tmp_path, REGISTERS_THEN_RAISES)
    assert [c.error for c in _calls(run, "M")] == [None, "ValueError: bad batch", None]


HOOKED_FROM_INSIDE = """
import copy, pickle
import torch
from torch import nn
from torch.nn.modules.module import register_module_forward_hook

def zero(module, args, out):
    return out * 0

class SelfHooking(nn.Module):  # hooks itself on its first forward
    def __init__(self):
        super().__init__()
        self.lin, self.hooked = nn.Linear(2, 2), False

    def forward(self, x):
        if not self.hooked:
            self.hooked = True
            self.register_forward_hook(zero)
        return self.lin(x)

class GlobalHooking(nn.Module):  # registers a global hook inside its forward, once
    def __init__(self):
        super().__init__()
        self.a, self.b, self.seen = nn.Linear(2, 2), nn.Linear(2, 2), []

    def forward(self, x):
        if not self.seen:
            register_module_forward_hook(lambda m, a, out: self.seen.append(type(m).__name__))
        return self.b(self.a(x))

import gc, weakref
first = torch.ones(1, 2)
m = SelfHooking()
kept = weakref.ref(first)
print(bool(m(first).abs().sum()))
del first
x = torch.ones(1, 2)
print([bool(m(x).abs().sum()) for _ in range(2)])
gc.collect()
print("first call's input freed:", kept() is None)  # not held by the frame tvis noted
hooks = list(copy.deepcopy(m)._forward_hooks.values())
print([h is zero or h.__name__ for h in hooks], len(pickle.dumps(m)) > 0)
g = GlobalHooking()
g(x)
print(g.seen)
g(x)
print(g.seen)
"""


def test_a_forward_hook_registered_inside_a_running_call_first_runs_on_the_next_call(run_inprocess, capsys,
                                                                                     tmp_path):
    """Without tvis torch calls a module with no hooks straight through and never reads a
    hook registered during that call; tvis's global hooks must not make it run there."""
    code, run = run_inprocess(HOOKED_FROM_INSIDE, capture=NO_LINES)
    assert code == 0
    out = capsys.readouterr().out
    assert out == _plain_stdout(tmp_path, HOOKED_FROM_INSIDE)
    assert out.splitlines()[:3] == ["True", "[False, False]", "first call's input freed: True"]
    assert out.splitlines()[4] == "['Linear', 'Linear']"  # a and b, called after it was registered
