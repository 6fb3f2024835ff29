"""Calls of functions defined in user files: nested with module calls, with their
arguments and results; library functions, excluded files and driver functions left out."""

from __future__ import annotations

from tvis_tui.record.options import CaptureOptions

from .helpers import write_script

# Each test writes its helper module under its own name: modules imported in-process stay
# in sys.modules from one test to the next.
HELPER = """
import torch

def scale(x, factor=2.0):
    y = x * factor
    return y

def fails():
    raise ValueError("no good")
"""

SCRIPT = """
import json
import torch
from torch import nn
from {helper} import scale, fails

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        h = scale(x)
        return self.lin(h)

def compute_loss(model, x, y):
    out = model(x)
    return nn.functional.mse_loss(out, y)

def main():
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(3):
        x, y = torch.randn(8, 4), torch.randn(8, 3)
        loss = compute_loss(model, x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        json.dumps({{"loss": loss.item()}})
        try:
            fails()
        except ValueError:
            pass

main()
"""


def _record(run_inprocess, tmp_path, helper: str, **kwargs):
    write_script(tmp_path, HELPER, name=f"{helper}.py")
    code, run = run_inprocess(SCRIPT.format(helper=helper), **kwargs)
    assert code == 0
    return run


def _tree(run, step=1):
    steps = {s.step: s for s in run.steps()}
    return [(c.depth, c.kind, c.name) for c in run.calls(steps[step].first_seq, steps[step].last_seq)]


def test_user_functions_nest_with_module_calls_across_files(run_inprocess, tmp_path):
    run = _record(run_inprocess, tmp_path, "helpers_nest", steps=2)
    assert _tree(run) == [
        (0, "function", "compute_loss"),
        (1, "module", "Net"),
        (2, "function", "scale"),  # in the helper module beside the script
        (2, "module", "lin"),
        (1, "function", "F.mse_loss"),
        (0, "backward", "backward"),
        (0, "optimizer", "SGD"),
        (0, "function", "fails"),  # after the optimizer step, in the same iteration: step 1
    ]
    calls = {c.name: c for c in run.calls(1, run.call_count()) if c.step == 1}
    scale, loss = calls["scale"], calls["compute_loss"]
    script, helper = str(tmp_path / "train.py"), str(tmp_path / "helpers_nest.py")
    assert (scale.def_site.file, scale.def_site.line) == (helper, 4)
    assert (scale.call_site.file, scale.call_site.line) == (script, 13)  # h = scale(x)
    assert (loss.def_site.line, loss.call_site.line) == (16, 26)
    assert scale.phase == loss.phase == "forward" and scale.duration_ns is not None
    slots = [(s.role, s.path, s.shape or s.repr) for s in run.slots(scale.seq)]
    assert slots == [("input", "x", (8, 4)), ("input", "factor", "2.0"), ("output", "out", (8, 4))]
    assert [s.path for s in run.slots(loss.seq, "input")] == ["model", "x", "y"]
    assert run.slots(loss.seq, "output")[0].shape == ()


def test_library_drivers_and_forward_methods_are_not_function_calls(run_inprocess, tmp_path):
    run = _record(run_inprocess, tmp_path, "helpers_lib", steps=2)
    names = {c.name for c in run.calls(1, run.call_count()) if c.kind == "function"}
    # json.dumps (stdlib), torch internals, main() (it runs every step), Net.forward
    # (a module call already), Net.__init__ (before the first step) are not recorded.
    assert names == {"compute_loss", "scale", "fails", "F.mse_loss"}


def test_a_function_that_raises_records_its_error(run_inprocess, tmp_path):
    run = _record(run_inprocess, tmp_path, "helpers_err", steps=2)
    fails = next(c for c in run.calls(1, run.call_count()) if c.name == "fails")
    assert fails.error == "ValueError: no good" and fails.duration_ns is not None
    assert run.slots(fails.seq, "output") == []


def test_phase_times_count_the_calls_inside_a_function(run_inprocess, tmp_path):
    run = _record(run_inprocess, tmp_path, "helpers_phase", steps=2)
    phases = run.steps()[0].phase_ns
    assert phases.get("forward", 0) > 0 and phases.get("loss", 0) > 0
    assert phases.get("backward", 0) > 0 and phases.get("optimizer", 0) > 0


def test_excluded_files_have_neither_calls_nor_lines(run_inprocess, tmp_path):
    options = CaptureOptions(exclude_files=("helpers_ex.py",))
    run = _record(run_inprocess, tmp_path, "helpers_ex", steps=2, capture=options)
    names = {c.name for c in run.calls(1, run.call_count())}
    assert "scale" not in names and "compute_loss" in names
    assert run.line_shapes(str(tmp_path / "helpers_ex.py"), 1) == {}
    assert run.line_shapes(str(tmp_path / "train.py"), 1)


def test_functions_of_the_files_kept_are_recorded_when_the_training_loop_is_left_out(
        run_inprocess, tmp_path):
    # `fails()` is called by the training loop in train.py, which the pattern leaves out.
    options = CaptureOptions(exclude_files=("train.py",))
    run = _record(run_inprocess, tmp_path, "helpers_loop_out", steps=2, capture=options)
    calls = [(c.step, c.name) for c in run.calls(1, run.call_count()) if c.kind == "function"]
    assert [call for call in calls if call[1] in ("fails", "compute_loss")] == [(1, "fails"), (2, "fails")]
    assert run.line_shapes(str(tmp_path / "train.py"), 1) == {}


def test_no_lines_keeps_function_calls(run_inprocess, tmp_path):
    run = _record(run_inprocess, tmp_path, "helpers_nolines", steps=2,
                  capture=CaptureOptions(lines=False))
    assert ("function", "scale") in {(c.kind, c.name) for c in run.calls(1, run.call_count())}
    assert not run.has_line_shapes()
    assert run.meta()["lines"] is False


def test_nothing_is_traced_after_recording(run_inprocess, tmp_path):
    import sys
    import threading

    _record(run_inprocess, tmp_path, "helpers_after", steps=1)
    assert sys.gettrace() is None and threading.gettrace() is None


def test_a_call_left_open_inside_a_function_is_closed_with_it(run_inprocess):
    # A BaseException passes torch's module hooks by (they catch Exception): the module
    # call never sees its end. The user function that catches it returns normally.
    code, run = run_inprocess("""
import torch
from torch import nn

class Halt(BaseException):
    pass

class Stops(nn.Module):
    def forward(self, x):
        raise Halt()

def guarded(module, x):
    try:
        return module(x)
    except Halt:
        return None

lin, stops = nn.Linear(2, 2), Stops()
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for _ in range(2):
    guarded(stops, torch.ones(1, 2))
    opt.zero_grad(); lin(torch.ones(1, 2)).sum().backward(); opt.step()
""", steps=2)
    assert code == 0
    calls = [c for c in run.calls(1, run.call_count()) if c.step == 1]
    tree = [(c.depth, c.kind, c.name) for c in calls]
    assert tree[:3] == [(0, "function", "guarded"), (1, "module", "Stops"), (0, "module", "Linear")]
    stops = calls[1]
    assert stops.duration_ns is not None and stops.extra.get("unfinished") is True
    assert calls[2].parent == 0  # the tree goes on at the top, not inside Stops


def test_a_function_with_a_loop_is_a_call_when_the_training_loop_calls_it(run_inprocess):
    # train_step's micro-batch loop and rollout's time loop are one step's work: recorded
    # once a step has shown which loop is the training loop (from the second step on).
    # train_epoch's loop holds the steps: it stays out, or one call would span them all.
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def rollout(x):
    outs = []
    for _ in range(2):
        outs.append(model(x))
    return torch.cat(outs)

def train_step(batch):
    opt.zero_grad()
    for micro in batch.chunk(2):
        (rollout(micro).pow(2).mean() / 2).backward()
    opt.step()

def train_epoch():
    for _ in range(3):
        train_step(torch.randn(8, 4))

for epoch in range(2):
    train_epoch()
""")
    assert code == 0
    functions = [(c.step, c.name, c.depth) for c in run.calls(1, run.call_count()) if c.kind == "function"]
    assert ("train_epoch" not in {name for _, name, _ in functions})
    assert [(s, d) for s, name, d in functions if name == "train_step"] == [(s, 0) for s in range(2, 7)]
    assert {(s, d) for s, name, d in functions if name == "rollout"} == {(s, 1) for s in range(2, 7)}


def test_a_function_with_a_loop_called_from_a_loop_inside_the_training_loop_is_a_call(run_inprocess):
    # Several environments rolled out in each step: the loop over them sits inside the
    # training loop, and each rollout is one call of that step.
    code, run = run_inprocess("""
import torch
from torch import nn

policy = nn.Linear(4, 1)
opt = torch.optim.SGD(policy.parameters(), lr=0.1)

def rollout(x):
    outs = []
    for _ in range(2):
        outs.append(policy(x))
    return torch.cat(outs)

for step in range(3):
    opt.zero_grad()
    returns = []
    for env in range(2):
        returns.append(rollout(torch.randn(2, 4)))
    torch.cat(returns).pow(2).mean().backward()
    opt.step()
""")
    assert code == 0
    calls = run.calls(1, run.call_count())
    rollouts = [(c.step, c.depth) for c in calls if c.kind == "function" and c.name == "rollout"]
    assert rollouts == [(2, 0), (2, 0), (3, 0), (3, 0)]
    inside = [c for c in calls if c.kind == "module" and c.step > 1]
    assert len(inside) == 8 and all(c.depth == 1 for c in inside)


def test_a_function_whose_own_loop_holds_steps_is_never_one_call(run_inprocess):
    # A GAN's k discriminator steps in a function the training loop calls: a call would
    # span k steps.
    code, run = run_inprocess("""
import torch
from torch import nn

d, g = nn.Linear(2, 1), nn.Linear(2, 2)
opt_d = torch.optim.SGD(d.parameters(), lr=0.1)
opt_g = torch.optim.SGD(g.parameters(), lr=0.1)

def train_d(k):
    for _ in range(k):
        opt_d.zero_grad(); d(g(torch.randn(4, 2)).detach()).mean().backward(); opt_d.step()

for _ in range(3):
    train_d(2)
    opt_g.zero_grad(); (-d(g(torch.randn(4, 2)))).mean().backward(); opt_g.step()
""")
    assert code == 0
    assert not [c for c in run.calls(1, run.call_count()) if c.kind == "function"]


def test_an_evaluation_with_a_loop_called_from_the_epoch_loop_is_a_call(run_inprocess):
    # Once the training loop is known, a function with a loop called from the loop around
    # it (evaluate() after each epoch's batches) is one call; train_epoch never is.
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
val = [torch.randn(4, 4) for _ in range(2)]

@torch.no_grad()
def evaluate():
    total = 0.0
    for x in val:
        total += float(model(x).mean())
    return total

def train_epoch():
    for _ in range(2):
        opt.zero_grad(); model(torch.randn(8, 4)).pow(2).mean().backward(); opt.step()

for epoch in range(2):
    train_epoch()
    print(epoch, round(evaluate(), 3))
""")
    assert code == 0
    calls = run.calls(1, run.call_count())
    functions = [(c.name, c.depth) for c in calls if c.kind == "function"]
    assert functions == [("evaluate", 0), ("evaluate", 0)]
    for call in (c for c in calls if c.name == "evaluate"):
        inside = [c for c in calls if c.parent == call.seq]
        assert [c.phase for c in inside] == ["no_grad", "no_grad"]


def test_an_error_leaving_through_a_with_block_is_the_functions_error(run_inprocess):
    # The with statement's exit runs lines of the function after the exception: the
    # error is still the one leaving it, and there is no return value.
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)

def check(x):
    with torch.no_grad():
        if model(x).isfinite().all():
            raise ValueError("finite")
    return x

for _ in range(2):
    x = torch.ones(1, 2)
    try:
        check(x)
    except ValueError:
        pass
    opt.zero_grad(); model(x).sum().backward(); opt.step()
""")
    assert code == 0
    check = next(c for c in run.calls(1, run.call_count()) if c.name == "check")
    assert check.error == "ValueError: finite"
    assert run.slots(check.seq, "output") == []


def test_a_function_the_step_limit_stops_is_unfinished(run_inprocess):
    # peek() draws the next batch of the training iterator after the last step: tvis
    # stops the script there, inside peek.
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
it = iter(torch.utils.data.DataLoader(torch.randn(8, 2), batch_size=2))

def peek():
    with torch.no_grad():
        return model(next(it)).mean()

for x in it:
    opt.zero_grad(); model(x).sum().backward(); opt.step()
    peek()
""", steps=1)
    assert code == 0
    peek = next(c for c in run.calls(1, run.call_count()) if c.name == "peek")
    assert peek.extra.get("unfinished") is True and peek.error is None
    assert run.slots(peek.seq, "output") == []


def test_a_mapping_argument_is_not_read_through_its_own_getitem(run_inprocess):
    # A config object (omegaconf's DictConfig is a Mapping) may resolve or raise on
    # reading a value: tvis shows it as a value and never reads its items.
    code, run = run_inprocess("""
from collections.abc import Mapping
import torch
from torch import nn

class Config(Mapping):
    def __init__(self):
        self.reads = 0
    def __getitem__(self, key):
        self.reads += 1
        raise ValueError("Missing mandatory value: " + key)
    def __iter__(self):
        return iter(["lr"])
    def __len__(self):
        return 1

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
cfg = Config()

def train_step(x, cfg):
    opt.zero_grad(); model(x).sum().backward(); opt.step()

for _ in range(2):
    train_step(torch.ones(1, 2), cfg)
print(cfg.reads)
""")
    assert code == 0
    assert not run.meta().get("warnings")
    step = next(c for c in run.calls(1, run.call_count()) if c.name == "train_step")
    assert [s.path for s in run.slots(step.seq, "input")] == ["x", "cfg"]


def test_a_decorated_function_is_defined_at_its_def_line_not_its_first_decorator(tmp_path):
    import importlib.util

    from tvis_tui.record.sites import def_line

    source = "import functools\n\nclass A:\n    @staticmethod\n    @functools.lru_cache(\n        maxsize=2)\n\n    def double(x):\n        return x * 2\n\ndef plain():\n    pass\n"
    path = tmp_path / "decorated.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("decorated", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert def_line(module.A.double.__wrapped__.__code__) == 8  # not 4, the @staticmethod
    assert def_line(module.plain.__code__) == 11


def test_a_symlink_in_the_folder_to_a_file_elsewhere_is_user_code(run_inprocess, tmp_path,
                                                                  tmp_path_factory):
    # A shared helpers file linked into the project: Python imports it by the link's path.
    real = write_script(tmp_path_factory.mktemp("elsewhere"), HELPER, name="helpers_real.py")
    (tmp_path / "helpers_linked.py").symlink_to(real)
    run = _record(run_inprocess, tmp_path, "helpers_linked", steps=2)
    assert (2, "function", "scale") in _tree(run)
    scale = next(c for c in run.calls(1, run.call_count()) if c.name == "scale")
    assert scale.def_site.file == str(tmp_path / "helpers_linked.py")
    assert run.line_shapes(str(tmp_path / "helpers_linked.py"), 1)  # y = x * factor


def test_a_forward_run_directly_is_a_call_whose_submodules_keep_their_names(run_inprocess):
    # No module hook fires for `model.forward(x)`: the function call is the record of it.
    code, run = run_inprocess("""
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc, self.dec = nn.Linear(3, 4), nn.Linear(4, 1)

    def encode(self, x):
        return torch.relu(self.enc(x))

    def forward(self, x):
        return self.dec(self.encode(x))

model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(2):
    loss = model.forward(torch.randn(4, 3)).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    model(torch.randn(4, 3))  # and through the module's call: a module call, as ever
""", steps=2)
    assert code == 0
    assert _tree(run, 2) == [
        (0, "function", "Net.forward"),
        (1, "function", "Net.encode"),
        (2, "module", "enc"),
        (1, "module", "dec"),
        (0, "backward", "backward"),
        (0, "optimizer", "SGD"),
        (0, "module", "Net"),
        (1, "function", "Net.encode"),
        (2, "module", "enc"),
        (1, "module", "dec"),
    ]
    forward = next(c for c in run.calls(1, run.call_count()) if c.name == "Net.forward")
    assert (forward.call_site.line, forward.def_site.line) == (19, 13)
    assert [s.shape for s in run.slots(forward.seq)] == [(4, 3), (4, 1)]


def test_recursion_to_the_limit_leaves_the_call_tree_and_the_steps_sound(run_inprocess):
    # Where the script recurses until RecursionError (and catches it), tvis's own work
    # fails too; its open calls are closed, and tracing, which CPython then stops, resumes.
    code, run = run_inprocess("""
import torch
from torch import nn

def chain(t):
    return chain(t) + 1

lin = nn.Linear(2, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for i in range(3):
    out = lin(torch.ones(1, 2))
    try:
        out = chain(out)
    except RecursionError:
        pass
    opt.zero_grad(); out.sum().backward(); opt.step()
""")
    assert code == 0
    steps = run.steps()
    assert len(steps) == 3
    for step in steps:
        calls = run.calls(step.first_seq, step.last_seq)
        top = [(c.kind, c.name) for c in calls if c.depth == 0]
        assert top == [("module", "Linear"), ("function", "chain"), ("backward", "backward"),
                       ("optimizer", "SGD")], top
        chains = [c for c in calls if c.name == "chain"]
        assert len(chains) > 100 and all(c.duration_ns is not None or c.error for c in chains)


def test_a_tracer_of_the_scripts_own_is_said_and_tracing_resumes_once_it_is_off(run_inprocess):
    """Sweep T: a script that set its own sys.settrace, then cleared it, left tvis's tracer
    off for good: no user function after, forwards filed under the step before, no warning."""
    code, run = run_inprocess("""
import sys, torch
from torch import nn

def helper(x):
    return x.sum()

lin = nn.Linear(4, 1)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for i in range(4):
    if i == 1:
        sys.settrace(lambda frame, event, arg: None)
    if i == 2:
        sys.settrace(None)
    loss = lin(torch.ones(3, 4)).mean() + 0 * helper(torch.ones(2))
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    named = {s.step: [c.name for c in run.calls(s.first_seq, s.last_seq) if c.depth == 0] for s in run.steps()}
    assert named == {1: ["Linear", "helper", "backward", "SGD"], 2: ["Linear", "backward", "SGD"],
                     3: ["Linear", "backward", "SGD"], 4: ["Linear", "helper", "backward", "SGD"]}
    assert run.meta()["warnings"] == [
        "step 2: the script set a trace function of its own (sys.settrace): while it is set, user "
        "functions, per-line shapes and the loop head where --steps stops are not recorded",
        "step 3: the script turned tracing off (sys.settrace(None)): user functions and per-line "
        "shapes were not recorded for a while; tvis traces again from here"]


def test_a_class_passed_to_a_user_function_reads_as_that_class(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

def act(kind, x):
    return kind()(x)

lin = nn.Linear(2, 2)
opt = torch.optim.SGD(lin.parameters(), lr=0.1)
for i in range(2):
    loss = act(nn.ReLU, lin(torch.ones(1, 2))).sum()
    opt.zero_grad(); loss.backward(); opt.step()
""", steps=1)
    assert code == 0
    act = next(c for c in run.calls(1, run.call_count()) if c.name == "act")
    assert run.slots(act.seq, "input")[0].repr == "<class torch.nn.modules.activation.ReLU>"
