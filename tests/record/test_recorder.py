"""What the recorder writes for the shapes real training scripts take (recorded in-process)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tvis_tui.store import RunReader

from .helpers import assert_same_state, train_plain_and_under_tvis, write_script

HEADER = """
import torch
from torch import nn
torch.manual_seed(0)
"""


def _calls(run):
    return run.calls(1, run.call_count())


def test_nested_outputs_are_flattened_with_paths(run_inprocess):
    code, run = run_inprocess(HEADER + """
from collections import namedtuple
from dataclasses import dataclass

Pair = namedtuple("Pair", "a b")

@dataclass
class Out:
    logits: torch.Tensor
    aux: object

class HFStyle:
    def __init__(self, t):
        self.hidden = t
        self.note = "x"

class Net(nn.Module):
    def forward(self, x, scale=2.0):
        return {"h": (x * scale, [x + 1, None]), "p": Pair(x, 3), "o": Out(x.sum(), HFStyle(x))}

Net()(torch.ones(2, 2), scale=3.0)
""")
    assert code == 0
    seq = _calls(run)[0].seq
    paths = {s.path: s for s in run.slots(seq)}
    assert list(paths) == ["args[0]", "kwargs['scale']", "out['h'][0]", "out['h'][1][0]",
                           "out['h'][1][1]", "out['p'].a", "out['p'].b", "out['o'].logits",
                           "out['o'].aux.hidden"]
    assert paths["kwargs['scale']"].repr == "3.0" and paths["out['h'][1][1]"].repr == "None"
    h = paths["out['h'][0]"]
    assert h.stats.max == 3.0 and h.stats.min == 3.0
    np.testing.assert_array_equal(run.values(seq, h), np.full((2, 2), 3.0, np.float32))
    assert paths["out['o'].logits"].shape == () and paths["out['p'].b"].repr == "3"


def test_a_module_called_twice_is_two_calls(run_inprocess):
    code, run = run_inprocess(HEADER + """
class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
    def forward(self, x):
        return self.fc(self.fc(x))

Twice()(torch.ones(1, 4))
""")
    calls = _calls(run)
    assert [(c.seq, c.parent, c.name) for c in calls] == [(1, 0, "Twice"), (2, 1, "fc"), (3, 1, "fc")]
    assert run.slots(3, "input")[0].values_from == (2, "output", 0)  # stored once
    np.testing.assert_array_equal(run.values(3, run.slots(3, "input")[0]),
                                  run.values(2, run.slots(2, "output")[0]))
    assert calls[1].call_site.line == calls[2].call_site.line


def test_without_torch_optim_steps_end_at_backward(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
w = torch.zeros(3, requires_grad=True)
fc = nn.Linear(3, 1)
for i in range(5):
    loss = (fc(w + i) - 1).pow(2).sum()
    loss.backward()
    with torch.no_grad():
        for p in fc.parameters():
            p -= 0.1 * p.grad
            p.grad = None
    print(repr(loss.item()))
""", steps=3)
    assert code == 0
    meta = run.meta()
    assert meta["step_rule"] == "backward" and meta["steps_recorded"] == 3
    steps = run.steps()
    assert [s.rule for s in steps] == ["backward"] * 3
    backward = run.call(steps[0].last_seq)
    assert backward.kind == "backward"
    assert [s.path for s in run.slots(backward.seq, "param_grad")] == ["Linear.weight", "Linear.bias"]
    assert [s.loss for s in steps] == [float(x) for x in capsys.readouterr().out.split()]


GAN = HEADER + """
d, g = nn.Linear(2, 1), nn.Linear(2, 2)
opt_d = torch.optim.SGD(d.parameters(), lr=0.1)
opt_g = torch.optim.Adam(g.parameters(), lr=0.1)
"""
D_STEP = "opt_d.zero_grad(); d(g(torch.randn(4, 2)).detach()).mean().backward(); opt_d.step()"
G_STEP = "opt_g.zero_grad(); (-d(g(torch.randn(4, 2)))).mean().backward(); opt_g.step()"


def test_gan_style_two_optimizers_make_one_step(run_inprocess, capsys):
    code, run = run_inprocess(GAN + f"""
for i in range(10):
    {D_STEP}
    {G_STEP}
    print("iteration", i)
""", steps=3)
    assert code == 0
    assert capsys.readouterr().out.split("\n")[:-1] == [f"iteration {i}" for i in range(3)]
    steps = run.steps()
    assert len(steps) == 3
    for step in steps:
        names = [c.name for c in run.calls(step.first_seq, step.last_seq) if c.kind == "optimizer"]
        assert names == ["SGD", "Adam"]


def _optimizer_names(run) -> list[list[str]]:
    return [[c.name for c in run.calls(s.first_seq, s.last_seq) if c.kind == "optimizer"]
            for s in run.steps()]


@pytest.mark.parametrize("g_first", [False, True])
def test_a_critic_stepping_more_often_than_the_generator_makes_one_step_an_iteration(run_inprocess, capsys, g_first):
    # WGAN's n_critic: D steps every iteration, G every third. An iteration where only D
    # steps is a step of its own, ended at the loop's head, not cut just before D's next
    # step() (which put the next iteration's forward and backward into it).
    g_step = f"if i % 3 == 0: {G_STEP}"
    first, second = (g_step, D_STEP) if g_first else (D_STEP, g_step)
    code, run = run_inprocess(GAN + f"""
for i in range(7):
    {first}
    {second}
    print("iteration", i)
""")
    assert code == 0
    both = ["Adam", "SGD"] if g_first else ["SGD", "Adam"]
    assert _optimizer_names(run) == [both, ["SGD"], ["SGD"], both, ["SGD"], ["SGD"], both]
    for step in run.steps():
        assert step.complete
        first_call = run.call(step.first_seq)
        assert (first_call.kind, first_call.name) == ("module", "g")  # g(...) inside d(g(...))


def test_a_critics_inner_loop_makes_each_optimizer_step_a_step(run_inprocess, capsys):
    # D's k steps in an inner loop, then G's: each step holds one optimizer step with its
    # own forward and backward, from the first iteration on.
    code, run = run_inprocess(GAN + f"""
for i in range(3):
    for _ in range(2):
        {D_STEP}
    {G_STEP}
    print("iteration", i)
""", steps=6)
    assert code == 0
    assert capsys.readouterr().out.split("\n")[:-1] == ["iteration 0", "iteration 1"]
    assert _optimizer_names(run) == [["SGD"], ["SGD"], ["Adam"]] * 2
    for step in run.steps():
        kinds = [c.kind for c in run.calls(step.first_seq, step.last_seq) if c.depth == 0]
        assert kinds == ["module", "module", "backward", "optimizer"], (step.step, kinds)


@pytest.mark.parametrize("through", ["opt.step()", "step_one(opt)"])
def test_per_layer_optimizers_stepped_in_a_loop_make_one_step(run_inprocess, through):
    code, run = run_inprocess(HEADER + f"""
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
opts = [torch.optim.SGD(layer.parameters(), lr=0.1) for layer in model]
def step_one(opt):
    opt.step()
for i in range(3):
    model(torch.randn(4, 2)).pow(2).mean().backward()
    for opt in opts:
        {through}
        opt.zero_grad()
""", steps=2)
    assert code == 0
    assert _optimizer_names(run) == [["SGD", "SGD"]] * 2
    assert all(s.complete for s in run.steps())


@pytest.mark.parametrize("loop", [
    "for i in range(len(opts)):\n        opts[i].step()\n        opts[i].zero_grad()",
    "for name in by_name:\n        by_name[name].step()\n        by_name[name].zero_grad()",
    "for i in range(2):\n        holder.opts[i].step()\n        holder.opts[i].zero_grad()",
])
def test_per_layer_optimizers_stepped_by_index_or_key_make_one_step(run_inprocess, loop):
    code, run = run_inprocess(HEADER + f"""
from types import SimpleNamespace
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
opts = [torch.optim.SGD(layer.parameters(), lr=0.1) for layer in model]
by_name, holder = dict(zip("ab", opts)), SimpleNamespace(opts=opts)
xs = [torch.randn(4, 2) for _ in range(3)]
for i in range(3):
    model(xs[i]).pow(2).mean().backward()
    {loop}
""", steps=2)
    assert code == 0
    assert _optimizer_names(run) == [["SGD", "SGD"]] * 2
    assert all(s.complete for s in run.steps())


@pytest.mark.parametrize("stepping", ["    for opt in opts:\n        opt.step()", "    step_all()"])
def test_a_loop_over_the_optimizers_ends_the_step_at_the_iterations_head(run_inprocess, stepping):
    # What follows the loop over the optimizers (a metric) reports on the step just taken,
    # also while an optimizer made for later (a probe's) has not stepped yet.
    code, run = run_inprocess(HEADER + f"""
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
opts = [torch.optim.SGD(layer.parameters(), lr=0.1) for layer in model]
probe = nn.Linear(1, 1)
probe_opt = torch.optim.SGD(probe.parameters(), lr=0.1)
def step_all():
    for opt in opts:
        opt.step()
def metric(loss):
    return loss.item()
for i in range(3):
    for opt in opts:
        opt.zero_grad()
    loss = model(torch.randn(4, 2)).pow(2).mean()
    loss.backward()
{stepping}
    metric(loss)
for i in range(2):
    probe_opt.zero_grad(); probe(torch.randn(4, 1)).pow(2).mean().backward(); probe_opt.step()
""")
    assert code == 0
    tops = [[c.name for c in run.calls(s.first_seq, s.last_seq) if c.depth == 0 and c.kind != "function"
             or c.name == "metric"] for s in run.steps()]
    per_layer = ["Sequential", "backward", "SGD", "SGD", "metric"]
    assert tops == [per_layer] * 3 + [["Linear", "backward", "SGD"]] * 2


@pytest.mark.parametrize("loop", [
    "for m, opt in zip(models, opts):\n        update(m, opt)",
    "for agent in agents:\n        update(agent.model, agent.optimizer)",
])
def test_an_ensemble_trained_member_by_member_makes_one_step_an_iteration(run_inprocess, loop):
    # Each member's own forward, backward and step, in a loop over the members.
    code, run = run_inprocess(HEADER + f"""
from types import SimpleNamespace
models = [nn.Linear(2, 1) for _ in range(3)]
opts = [torch.optim.SGD(m.parameters(), lr=0.05) for m in models]
agents = [SimpleNamespace(model=m, optimizer=o) for m, o in zip(models, opts)]
def update(m, opt):
    opt.zero_grad(); m(torch.randn(8, 2)).pow(2).mean().backward(); opt.step()
for i in range(3):
    {loop}
""", steps=2)
    assert code == 0
    assert _optimizer_names(run) == [["SGD"] * 3] * 2


def test_a_critic_loop_that_binds_what_holds_the_optimizers_is_still_one_step_a_pass(run_inprocess):
    # `state` holds both optimizers, but it is no loop variable: the loop does not go over them.
    code, run = run_inprocess(HEADER + """
import weakref
from types import SimpleNamespace
d, g = nn.Linear(2, 1), nn.Linear(2, 2)
trainer = SimpleNamespace(opt_d=torch.optim.SGD(d.parameters(), lr=0.1),
                          opt_g=torch.optim.Adam(g.parameters(), lr=0.1))
class Gone:
    pass
for i in range(4):
    state = trainer
    gone = weakref.proxy(Gone())  # dead at once: touching it raises
    state.opt_d.zero_grad(); d(g(torch.randn(4, 2)).detach()).mean().backward(); state.opt_d.step()
    if i % 2 == 0:
        state.opt_g.zero_grad(); (-d(g(torch.randn(4, 2)))).mean().backward(); state.opt_g.step()
""")
    assert code == 0 and not run.meta().get("warnings")
    assert _optimizer_names(run) == [["SGD", "Adam"], ["SGD"]] * 2


def test_agents_holding_their_optimizers_two_deep_make_one_step_a_pass(run_inprocess):
    code, run = run_inprocess(HEADER + """
from types import SimpleNamespace
agents = []
for _ in range(2):
    net = nn.Linear(2, 1)
    agents.append(SimpleNamespace(net=net, brain=SimpleNamespace(opt=torch.optim.SGD(net.parameters(), lr=0.1))))
for i in range(3):
    for agent in agents:
        agent.brain.opt.zero_grad(); agent.net(torch.randn(4, 2)).pow(2).mean().backward(); agent.brain.opt.step()
""")
    assert code == 0
    assert _optimizer_names(run) == [["SGD", "SGD"]] * 3


SPARE = """
model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
spare = torch.optim.SGD(nn.Linear(2, 2).parameters(), lr=0.1)  # made, never used
def load(i):
    return torch.randn(2 + i, 3)
for i in range(5):
    print("start", i, flush=True)
    x = load(i)
    loss = model(x).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    print("end", i, flush=True)
"""


def test_with_an_optimizer_waiting_steps_n_stops_at_the_loops_head(run_inprocess, capfd):
    code, run = run_inprocess(HEADER + SPARE, steps=2)
    assert code == 0
    assert capfd.readouterr().out == "start 0\nend 0\nstart 1\nend 1\n"
    steps = run.steps()
    assert len(steps) == 2 and all(s.complete for s in steps)
    assert [c.name for c in run.calls(steps[1].first_seq, steps[1].last_seq) if c.depth == 0] == \
        ["load", "Linear", "backward", "SGD"]


def test_with_an_optimizer_waiting_each_iterations_lines_are_its_steps(run_inprocess):
    code, run = run_inprocess(HEADER + SPARE)
    assert code == 0
    source = run.call(run.steps()[0].first_seq).call_site.file
    line = 1 + (HEADER + SPARE).splitlines().index("    x = load(i)")
    shapes = [[e.shape for e in run.line_shapes(source, s.step)[line]] for s in run.steps()[:5]]
    assert shapes == [[(2 + i, 3)] for i in range(5)]


def test_a_waiting_optimizers_step_at_the_top_of_the_next_iteration_is_in_its_step(run_inprocess):
    # G steps first, every other iteration (closures); D every iteration.
    code, run = run_inprocess(GAN + """
def closure_g():
    opt_g.zero_grad(); loss = -d(g(torch.randn(4, 2))).mean(); loss.backward(); return loss
def closure_d():
    opt_d.zero_grad(); loss = d(g(torch.randn(4, 2)).detach()).mean(); loss.backward(); return loss
for i in range(6):
    if i % 2 == 0:
        opt_g.step(closure_g)
    opt_d.step(closure_d)
""")
    assert code == 0
    assert _optimizer_names(run) == [["Adam", "SGD"], ["SGD"]] * 3


@pytest.mark.parametrize("around", ["", "with contextlib.nullcontext():"])
def test_a_crash_mid_iteration_with_an_optimizer_waiting_leaves_the_step_unfinished(run_inprocess, around):
    # Also where the exception leaves the loop through a with block's exit in its frame.
    loop = f"""
for i in range(4):
    {D_STEP}
    if i == 2:
        raise RuntimeError("diverged")
    {G_STEP}
"""
    if around:
        loop = around + loop.replace("\n", "\n    ")
    code, run = run_inprocess(GAN + "import contextlib\n" + loop)
    assert code == 1
    assert [s.complete for s in run.steps()] == [True, True, False]
    assert run.meta()["steps_recorded"] == 2


@pytest.mark.parametrize("kept", [
    "pass",  # the old optimizer and its scheduler hold each other: alive until a collection
    "results.append((model, opt))",  # a sweep that keeps every trial's model and optimizer
])
def test_an_optimizer_replaced_by_a_new_one_is_not_waited_for(run_inprocess, kept):
    # k-fold training: each fold builds a new model, optimizer and scheduler; the old
    # optimizer never steps again and must not hold the new fold's steps open.
    code, run = run_inprocess(HEADER + f"""
import gc
gc.disable()
results = []
for fold in range(3):
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, 2)
    for i in range(4):
        loss = model(torch.randn(4, 2)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step(); scheduler.step()
    {kept}
""")
    assert code == 0
    steps = run.steps()
    assert len(steps) == 12 and all(s.complete for s in steps)
    for step in steps:
        kinds = [c.kind for c in run.calls(step.first_seq, step.last_seq) if c.depth == 0]
        assert kinds == ["module", "backward", "optimizer"], (step.step, kinds)


SAM = """
class SAM(torch.optim.Optimizer):  # as github.com/davda54/sam: it never steps itself
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["e_w"] = e_w = p.grad * group["rho"]
                p.add_(e_w)
        self.zero_grad()

    @torch.no_grad()
    def second_step(self):
        for group in self.param_groups:
            for p in group["params"]:
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        self.zero_grad()

model = nn.Linear(2, 1)
opt = SAM(model.parameters(), torch.optim.SGD, lr=0.1)
for i in range(4):
    x = torch.randn(4, 2)
    model(x).pow(2).mean().backward()
    opt.first_step()
    model(x).pow(2).mean().backward()
    opt.second_step()
"""


def test_two_optimizers_over_shared_parameters_that_both_step_make_one_step(run_inprocess):
    code, run = run_inprocess(HEADER + """
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
everything = torch.optim.SGD(model.parameters(), lr=0.1)
head = torch.optim.Adam(model[1].parameters())  # a subset of the first one's
for i in range(3):
    model(torch.randn(4, 2)).pow(2).mean().backward(); everything.step()
    model(torch.randn(4, 2)).abs().mean().backward(); head.step()
""")
    assert code == 0
    steps = run.steps()
    assert len(steps) == 3 and all(s.complete for s in steps)
    for step in steps:
        assert [c.name for c in run.calls(step.first_seq, step.last_seq) if c.kind == "optimizer"] == ["SGD", "Adam"]


@pytest.mark.parametrize("script", [
    SAM,
    # An optimizer made over the same parameters and never used.
    """
model = nn.Linear(2, 1)
opt, unused = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.Adam(model.parameters())
for i in range(4):
    opt.zero_grad(); model(torch.randn(4, 2)).pow(2).mean().backward(); opt.step()
""",
])
def test_an_optimizer_over_parameters_another_one_steps_is_not_waited_for(run_inprocess, script):
    code, run = run_inprocess(HEADER + script)
    assert code == 0
    steps = run.steps()
    assert len(steps) == 4 and all(s.complete for s in steps)
    for step in steps:
        kinds = [c.kind for c in run.calls(step.first_seq, step.last_seq) if c.depth == 0]
        assert kinds[-1] == "optimizer" and kinds.count("optimizer") == 1, (step.step, kinds)


def test_lbfgs_closure_is_one_step_with_its_calls_inside(run_inprocess):
    code, run = run_inprocess(HEADER + """
fc = nn.Linear(2, 1)
opt = torch.optim.LBFGS(fc.parameters(), max_iter=3)
x, y = torch.randn(8, 2), torch.randn(8, 1)
def closure():
    opt.zero_grad()
    loss = nn.functional.mse_loss(fc(x), y)
    loss.backward()
    return loss
for _ in range(4):
    opt.step(closure)
""", steps=2)
    steps = run.steps()
    assert len(steps) == 2 and run.meta()["step_rule"] == "optimizer"
    first = run.call(steps[0].first_seq)
    assert first.kind == "optimizer" and first.name == "LBFGS"
    inside = run.calls(first.seq + 1, steps[0].last_seq)
    assert {c.parent for c in inside if c.depth == 1} == {first.seq}
    # Each run of the closure is a user function call; the model call is inside it.
    closure = inside[0]
    assert (closure.kind, closure.name, closure.phase) == ("function", "closure", "forward")
    assert [c.kind for c in inside if c.parent == closure.seq] == ["module", "function", "backward"]
    assert inside[2].phase == "loss" and inside[2].name == "F.mse_loss"


def test_odd_values_do_not_break_recording(run_inprocess):
    code, run = run_inprocess(HEADER + """
class Odd(nn.Module):
    def forward(self, x):
        return None

class Many(nn.Module):
    def forward(self, x):
        nan = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
        return (x > 0, x.long(), x.to(torch.bfloat16), torch.complex(x, x), nan,
                torch.empty(2, 3, device="meta"), torch.empty(0))

x = torch.tensor([-1.0, 2.0])
Odd()(x)
Many()(x)
relu = nn.ReLU(inplace=True)
relu(x)
""")
    assert code == 0 and run.meta()["warnings"] == []
    assert [s.repr for s in run.slots(1, "output")] == ["None"]
    out = {s.path: s for s in run.slots(2, "output")}
    assert out["out[0]"].dtype == "bool" and out["out[0]"].stats.mean == 0.5
    assert out["out[1]"].dtype == "int64" and out["out[1]"].stats.min == -1
    assert out["out[2]"].values_dtype == "float32"
    assert out["out[3]"].stats.norm is not None and out["out[3]"].stats.min is None
    nan = out["out[4]"].stats
    assert (nan.nan, nan.posinf, nan.neginf, nan.zeros, nan.max) == (1, 1, 1, 1, 1.0)
    assert out["out[5]"].shape == (2, 3) and out["out[5]"].stats is None
    assert out["out[6]"].stats.numel == 0
    assert run.nonfinite_calls() == [2]
    relu_in, relu_out = run.slots(3, "input")[0], run.slots(3, "output")[0]
    # Values were copied when the hook ran, before ReLU wrote over its input.
    np.testing.assert_array_equal(run.values(3, relu_in), [-1.0, 2.0])
    np.testing.assert_array_equal(run.values(3, relu_out), [0.0, 2.0])


def test_calls_from_threads_are_recorded_on_their_own_stack(run_inprocess):
    code, run = run_inprocess(HEADER + """
import threading
fc = nn.Linear(2, 2)
def work():
    with torch.no_grad():
        for _ in range(5):
            fc(torch.ones(1, 2))
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
""")
    calls = _calls(run)
    assert len(calls) == 15 and {(c.parent, c.depth, c.name) for c in calls} == {(0, 0, "Linear")}
    assert all(c.duration_ns is not None for c in calls)


def test_a_model_first_called_from_several_threads_at_once_gets_one_name():
    """The race behind a `Linear#2` beside `Linear` for one model: threads switched
    every microsecond so that they meet inside the naming."""
    import sys
    import threading

    import torch

    from tvis_tui.record.names import ModuleNames

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(200):
            names, fc, seen = ModuleNames(), torch.nn.Linear(2, 2), []
            start = threading.Barrier(4)

            def work():
                start.wait()
                seen.append(names.root_name(fc))
            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert seen == ["Linear"] * 4
    finally:
        sys.setswitchinterval(old)


def test_large_tensors_keep_summaries_without_values(run_inprocess):
    code, run = run_inprocess(HEADER + "nn.Identity()(torch.ones(64, 64))\n", max_bytes=1024)
    slot = run.slots(1, "input")[0]
    assert slot.values_dtype is None and run.values(1, slot) is None
    assert slot.stats.numel == 4096 and sum(slot.hist) == 4096


def test_a_recorder_bug_leaves_training_untouched(run_inprocess, monkeypatch, capsys):
    import tvis_tui.record.slots as slots

    def broken(*_args, **_kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(slots, "summarize", broken)
    code, run = run_inprocess(HEADER + """
fc = nn.Linear(2, 1)
opt = torch.optim.SGD(fc.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad(); fc(torch.ones(1, 2)).sum().backward(); opt.step()
print(fc.weight.sum().item())
""")
    assert code == 0
    assert any("RuntimeError: boom" in w for w in run.meta()["warnings"])
    assert run.meta()["steps_recorded"] == 2
    calls = _calls(run)
    assert all(c.duration_ns is not None for c in calls)
    assert run.slots(calls[0].seq, "input")[0].repr == "<tensor not summarized>"


def test_compiled_models_and_dataloader_workers_are_survived_and_reported(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
from torch.utils.data import DataLoader, TensorDataset
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
fast = torch.compile(net, backend="eager")
opt = torch.optim.SGD(net.parameters(), lr=0.1)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
for x, y in DataLoader(data, batch_size=8, num_workers=2):
    opt.zero_grad()
    nn.functional.mse_loss(fast(x), y).backward()
    opt.step()
""")
    assert code == 0 and "global hooks" not in capsys.readouterr().err
    meta = run.meta()
    assert meta["steps_recorded"] == 4
    assert [w for w in meta["warnings"] if "compile" in w] == [
        "torch.compile was used on Sequential: code it compiles runs without tvis's hooks, so calls "
        "inside it are not recorded"]
    first = run.calls(1, 5)
    assert [c.kind for c in first] == ["data", "module", "function", "backward", "optimizer"]
    assert first[1].name == "Sequential"  # the compiled model's, not OptimizedModule
    assert [s.path for s in run.slots(first[4].seq, "param_grad")][0] == "Sequential.0.weight"
    assert [s.shape for s in run.slots(1, "output")] == [(8, 4), (8, 1)]


def test_calls_inside_torch_func_transforms_are_left_out_quietly_and_said_once(run_inprocess, capsys):
    # Per-sample gradients as DP-SGD takes them: the tensors inside vmap(grad(...)) are
    # batched wrappers with no storage; summarizing them raised "recording error"s.
    code, run = run_inprocess(HEADER + """
from torch.func import functional_call, grad, vmap
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def sample_loss(params, x, y):
    return nn.functional.cross_entropy(functional_call(model, params, (x[None],)), y[None])
for _ in range(2):
    x, y = torch.randn(8, 4), torch.randint(0, 2, (8,))
    params = {k: v.detach() for k, v in model.named_parameters()}
    grads = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
    for k, p in model.named_parameters():
        p.grad = grads[k].mean(0)
    opt.step()
""")
    assert code == 0 and run.meta()["steps_recorded"] == 2
    warnings = run.meta()["warnings"]
    assert warnings == ["calls inside torch.func transforms (vmap, grad, jacrev, ...) were not "
                        "recorded: their tensors are batched or wrapped, with no values to read"]
    assert "recording error" not in capsys.readouterr().err
    step = next(c for c in run.calls(1, run.call_count()) if c.kind == "optimizer")
    assert len(run.slots(step.seq, "param_grad")) == 4


@pytest.mark.filterwarnings("ignore:`torch.jit.:DeprecationWarning")  # torch 2.13 deprecates it
@pytest.mark.parametrize("make", ["torch.jit.script(net)", "torch.jit.trace(net, torch.ones(2, 4))"])
def test_a_torchscript_module_is_recorded_as_one_call_and_said_so(run_inprocess, make):
    code, run = run_inprocess(HEADER + f"""
net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
scripted = {make}
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for _ in range(2):
    opt.zero_grad()
    scripted(torch.ones(2, 4)).sum().backward()
    opt.step()
""")
    assert code == 0 and run.meta()["steps_recorded"] == 2
    assert "Sequential is TorchScript (torch.jit): the calls inside it were not recorded " \
        "(its own inputs and outputs were)" in run.meta()["warnings"]
    second = run.steps()[1]  # step 1 holds the eager run torch.jit.trace checks itself by
    calls = run.calls(second.first_seq, second.last_seq)
    assert [c.kind for c in calls] == ["module", "backward", "optimizer"]
    assert calls[0].type.endswith(("ScriptModule", "TracedModule"))
    # The class the script wrote, not torch's wrapper; one name for it and the model it
    # was made from (trace runs `net` itself first).
    assert calls[0].name == "Sequential"
    assert [s.shape for s in run.slots(calls[0].seq, "output")] == [(2, 1)]


COMPILED_STEP = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.Adam(net.parameters(), lr=0.1)

@torch.compile(backend="aot_eager")
def train_step(x):
    opt.zero_grad()
    loss = net(x).sum()
    loss.backward()
    opt.step()
    return loss

for _ in range(3):
    print("loss", train_step(torch.ones(2, 4)).item())
torch.save({"model": net.state_dict(), "opt": opt.state_dict()}, sys.argv[1])
"""


# Dynamo traces into the functions tvis wraps (F.cross_entropy, decoded for predictions):
# it crashed there (InternalTorchDynamoError) before the wrappers stood aside while compiling.
COMPILED_CLASSIFIER_STEP = COMPILED_STEP.replace("nn.Linear(4, 1)", "nn.Linear(4, 3)").replace(
    "net(x).sum()", "nn.functional.cross_entropy(net(x), torch.tensor([0, 2]))")


@pytest.mark.parametrize("script", [COMPILED_STEP, COMPILED_CLASSIFIER_STEP], ids=["sum", "cross_entropy"])
def test_a_compiled_training_step_records_its_steps_and_trains_the_same(tmp_path, script):
    write_script(tmp_path, script)
    traced = train_plain_and_under_tvis(tmp_path, "train.py", ["plain.pt"], ["traced.pt"],
                                        flags=("--steps", "3"))
    assert_same_state(tmp_path / "plain.pt", tmp_path / "traced.pt")
    assert "Warning" not in traced.stderr  # dynamo never traced tvis's own code
    with RunReader(next((tmp_path / "runs").iterdir())) as run:
        assert [(s.step, s.rule) for s in run.steps()] == [(1, "optimizer"), (2, "optimizer"), (3, "optimizer")]
        step = next(c for c in run.calls(1, run.call_count()) if c.kind == "optimizer")
        assert [s.ratio is not None for s in run.slots(step.seq, "update")] == [True, True]


def test_phases_follow_the_caller(run_inprocess):
    code, run = run_inprocess(HEADER + """
from torch.utils.data import DataLoader, Dataset
class Noisy(Dataset):
    blur = nn.AvgPool1d(1)  # an nn.Module used as a transform
    def __len__(self): return 4
    def __getitem__(self, i): return self.blur(torch.ones(1, 3) * i)
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for x in DataLoader(Noisy(), batch_size=2):
    opt.zero_grad()
    nn.MSELoss()(net(x), torch.zeros(2, 1, 1)).backward()
    opt.step()
""", steps=1)
    got = [(c.depth, c.kind, c.name, c.phase) for c in run.calls(1, run.steps()[0].last_seq)]
    assert got == [(0, "data", "DataLoader", "data"), (1, "module", "AvgPool1d", "data"),
                   (1, "module", "AvgPool1d", "data"), (0, "module", "Linear", "forward"),
                   (0, "module", "MSELoss", "loss"), (0, "backward", "backward", "backward"),
                   (0, "optimizer", "SGD", "optimizer")]


def test_checkpoint_recompute_inside_backward_is_not_a_step(run_inprocess):
    code, run = run_inprocess(HEADER + """
from torch.utils.checkpoint import checkpoint
fc = nn.Linear(2, 2)
x = torch.ones(1, 2, requires_grad=True)
for _ in range(2):
    checkpoint(fc, x, use_reentrant=True).sum().backward()
""")
    assert code == 0 and run.meta()["steps_recorded"] == 2
    first = run.steps()[0]
    calls = run.calls(first.first_seq, first.last_seq)
    assert [(c.depth, c.kind, c.phase) for c in calls] == [
        (0, "module", "forward"), (0, "backward", "backward"), (1, "module", "backward"),
        (1, "backward", "backward")]
    assert first.loss is not None and "losses" not in first.extra


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # torch.jit.trace's own
def test_jit_trace_sees_none_of_tviss_own_ops(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
import warnings
warnings.simplefilter("error", torch.jit.TracerWarning)  # one from tvis fails the script
net = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
traced = torch.jit.trace(net, torch.ones(1, 2), check_trace=False)
print(sorted({n.kind() for n in traced.inlined_graph.nodes()}))
net(torch.ones(1, 2))
""")
    assert code == 0
    ops = capsys.readouterr().out
    assert "aten::linear" in ops and "aminmax" not in ops and "count_nonzero" not in ops
    assert [c.name for c in run.calls(1, run.call_count())] == ["Sequential", "0", "1"]


def test_loss_scaled_by_a_grad_scaler_is_recorded_unscaled(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
fc = nn.Linear(2, 1)
opt = torch.optim.SGD(fc.parameters(), lr=0.1)
scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
loss = fc(torch.ones(3, 2)).pow(2).mean()
scaler.scale(loss).backward()
scaler.step(opt)
scaler.update()
print(repr(loss.item()))
""")
    assert code == 0
    assert run.steps()[0].loss == float(capsys.readouterr().out)


def test_step_loss_under_gradient_accumulation_sums_its_micro_batches(run_inprocess):
    code, run = run_inprocess(HEADER + """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
ACC = 4
for i in range(8):
    loss = nn.MSELoss()(net(torch.full((2, 3), float(i))), torch.zeros(2, 1)) / ACC
    loss.backward()
    print("micro", loss.item())
    if (i + 1) % ACC == 0:
        opt.step()
        opt.zero_grad()
""")
    assert code == 0
    steps = run.steps()
    assert len(steps) == 2
    for step in steps:
        micro = step.extra["losses"]
        assert len(micro) == 4 and len(set(micro)) == 4
        assert step.loss == pytest.approx(sum(micro), rel=1e-12)


@pytest.mark.parametrize("zero", ["opt.zero_grad()", "net.zero_grad()",
                                  "part.zero_grad(); net[1].zero_grad()"])
def test_step_loss_leaves_out_losses_whose_gradients_were_zeroed_before_a_step(run_inprocess, capsys, zero):
    # A pass skipped after a non-finite loss joins the next step (the gradients zeroed by
    # the optimizer, the model, or its parts one after the other); SAM's first pass is
    # dropped by zero_grad() (the optimizer's or the module's) before the perturbed one is
    # stepped.
    code, run = run_inprocess(HEADER + f"""
part = nn.Linear(3, 2)
net = nn.Sequential(part, nn.Linear(2, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.1)
x = torch.randn(4, 3)
for i in range(3):
    loss = net(x).pow(2).mean() * (float("inf") if i == 1 else 1.0)
    {zero}; loss.backward()
    if not torch.isfinite(loss):
        continue
    opt.step(); print(repr(loss.item()))
for zero in ("opt.zero_grad()", "net.zero_grad()"):
    net(x).pow(2).mean().backward()
    eval(zero)
    perturbed = net(x + 0.1).pow(2).mean(); perturbed.backward(); opt.step(); opt.zero_grad()
    print(repr(perturbed.item()))
""")
    assert code == 0
    printed = [float(v) for v in capsys.readouterr().out.split()]
    steps = run.steps()
    assert [s.loss for s in steps] == printed
    assert steps[1].extra["losses"][1:] == [printed[1]]
    assert [s.extra.get("losses_not_applied") for s in steps] == [None, [0], [0], [0]]


def test_zeroing_part_of_an_optimizers_parameters_keeps_the_earlier_loss(run_inprocess, capsys):
    # head.zero_grad() drops loss1's gradients on the head only: its gradients on the
    # encoder are still applied, so it stays in the step's loss.
    code, run = run_inprocess(HEADER + """
enc, head = nn.Linear(2, 2), nn.Linear(2, 1)
model = nn.Sequential(enc, head)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(4, 2)
opt.zero_grad()
loss1 = model(x).pow(2).mean(); loss1.backward()
head.zero_grad()
loss2 = enc(x).pow(2).mean(); loss2.backward()
opt.step()
print(repr(loss1.item()), repr(loss2.item()))
""")
    assert code == 0
    l1, l2 = map(float, capsys.readouterr().out.split())
    (step,) = run.steps()
    assert step.loss == pytest.approx(l1 + l2, rel=1e-12) and "losses_not_applied" not in step.extra


def test_each_optimizer_keeps_the_loss_of_its_own_gradients_never_their_sum(run_inprocess, capsys):
    # DCGAN's shape: D applies its real and fake losses, G one of its own; G's zero_grad()
    # between D's step and G's backward does not drop D's loss. D + G is no loss at all:
    # the step's is the first optimizer's, each one's in extra["optimizer_losses"].
    code, run = run_inprocess(HEADER + """
class Critic(nn.Linear): pass
class Maker(nn.Linear): pass
d, g = Critic(2, 1), Maker(2, 2)
opt_d, opt_g = torch.optim.SGD(d.parameters(), lr=0.1), torch.optim.Adam(g.parameters(), lr=0.1)
for i in range(2):
    opt_d.zero_grad()
    real = d(torch.randn(4, 2)).mean(); real.backward()
    fake = -d(g(torch.randn(4, 2)).detach()).mean(); fake.backward()
    opt_d.step()
    opt_g.zero_grad(); lg = d(g(torch.randn(4, 2))).mean(); lg.backward(); opt_g.step()
    print(repr(real.item()), repr(fake.item()), repr(lg.item()))
""")
    assert code == 0
    printed = [[float(v) for v in line.split()] for line in capsys.readouterr().out.splitlines()]
    steps = run.steps()
    assert [s.extra["losses"] for s in steps] == printed
    assert [s.loss for s in steps] == [pytest.approx(r + f, rel=1e-12) for r, f, _ in printed]
    for step, (r, f, lg) in zip(steps, printed):
        optimizers = {c.name: c.seq for c in run.calls(step.first_seq, step.last_seq) if c.kind == "optimizer"}
        assert step.extra["optimizer_losses"] == [
            {"optimizer": "SGD", "model": "Critic", "seq": optimizers["SGD"], "loss": pytest.approx(r + f, rel=1e-12)},
            {"optimizer": "Adam", "model": "Maker", "seq": optimizers["Adam"], "loss": pytest.approx(lg, rel=1e-12)}]
        # What each trains, on its call too (the `w` view's learning rates are named by it).
        assert [run.call(optimizers[n]).extra["trains"] for n in ("SGD", "Adam")] == ["Critic", "Maker"]
    assert not any("losses_not_applied" in s.extra for s in steps)


def test_optimizers_over_parts_of_one_model_are_told_apart_by_the_part(run_inprocess, capsys):
    # Actor-critic with an optimizer per head, each head its own loss.
    code, run = run_inprocess(HEADER + """
class Agent(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor, self.critic = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2)), nn.Linear(2, 1)
agent = Agent()
actor_opt = torch.optim.SGD(agent.actor.parameters(), lr=0.1)
critic_opt = torch.optim.SGD(agent.critic.parameters(), lr=0.1)
x = torch.randn(4, 2)
actor_opt.zero_grad(); la = agent.actor(x).pow(2).mean(); la.backward(); actor_opt.step()
critic_opt.zero_grad(); lc = agent.critic(x).pow(2).mean(); lc.backward(); critic_opt.step()
print(repr(la.item()), repr(lc.item()))
""")
    assert code == 0
    la, lc = map(float, capsys.readouterr().out.split())
    (step,) = run.steps()
    assert [(o["model"], o["loss"]) for o in step.extra["optimizer_losses"]] == [
        ("agent.actor", la), ("agent.critic", lc)]  # the roots the script called
    assert step.loss == la


def test_optimizers_applying_one_loss_share_it(run_inprocess, capsys):
    # An encoder's optimizer and a head's, one loss between them: it is the step's, once.
    code, run = run_inprocess(HEADER + """
model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
opts = [torch.optim.SGD(model[0].parameters(), lr=0.1), torch.optim.SGD(model[1].parameters(), lr=0.1)]
for o in opts: o.zero_grad()
loss = model(torch.randn(4, 2)).pow(2).mean(); loss.backward()
for o in opts: o.step()
print(repr(loss.item()))
""")
    assert code == 0
    (step,) = run.steps()
    assert step.loss == float(capsys.readouterr().out) and "optimizer_losses" not in step.extra


def test_several_losses_backward_at_once_are_the_steps_loss(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
out = net(torch.randn(4, 3))
l1, l2 = out.pow(2).mean(), out.abs().mean()
torch.autograd.backward([l1, l2])
opt.step()
print(repr(l1.item()), repr(l2.item()))
""")
    assert code == 0
    l1, l2 = map(float, capsys.readouterr().out.split())
    (step,) = run.steps()
    assert step.extra["losses"] == [l1, l2] and step.loss == pytest.approx(l1 + l2, rel=1e-12)


def test_lbfgs_step_loss_is_what_step_returned_and_checkpoint_recompute_is_no_error(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
from torch.utils.checkpoint import checkpoint
class Blk(nn.Module):
    def __init__(s): super().__init__(); s.a = nn.Linear(4, 4); s.b = nn.Linear(4, 4)
    def forward(s, x): return x + s.b(torch.tanh(s.a(x)))
class M(nn.Module):
    def __init__(s): super().__init__(); s.blk = Blk(); s.out = nn.Linear(4, 1)
    def forward(s, x): return s.out(checkpoint(s.blk, x, use_reentrant=False))
m = M(); X = torch.randn(16, 4); Y = X.sum(1, keepdim=True)
opt = torch.optim.LBFGS(m.parameters(), lr=0.5, max_iter=4)
for step in range(2):
    def closure():
        opt.zero_grad(); l = nn.functional.mse_loss(m(X), Y); l.backward(); return l
    print("returned", repr(opt.step(closure).item()))
""")
    assert code == 0
    returned = [float(line.split()[1]) for line in capsys.readouterr().out.splitlines()
                if line.startswith("returned")]
    steps = run.steps()
    assert [s.loss for s in steps] == pytest.approx(returned, rel=1e-6)
    assert len(steps[0].extra["losses"]) > 1  # the line search's evaluations, kept beside it
    assert "losses_not_applied" not in steps[0].extra  # each evaluation zeroes the gradients
    calls = _calls(run)
    assert not [c for c in calls if c.error]
    assert any(c.extra.get("recompute_stopped") for c in calls)


def test_a_caught_exceptions_whole_message_is_kept(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class Picky(nn.Module):
    def forward(self, x):
        raise ValueError("shapes disagree\\n  expected [4, 8]\\n  got [4, 7]")

opt_model = nn.Linear(7, 1)
opt = torch.optim.SGD(opt_model.parameters(), lr=0.1)
for step in range(2):
    try:
        Picky()(torch.ones(4, 7))
    except ValueError:
        pass
    opt.zero_grad(); opt_model(torch.ones(4, 7)).sum().backward(); opt.step()
""")
    assert code == 0
    raised = [c for c in run.calls(1, run.call_count()) if c.error]
    assert raised and raised[0].error == "ValueError: shapes disagree"
    assert raised[0].extra["error_text"] == "ValueError: shapes disagree\n  expected [4, 8]\n  got [4, 7]"


def test_a_message_starting_with_a_newline_keeps_its_text(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class Picky(nn.Module):
    def forward(self, x):
        raise ValueError("\\nshape mismatch")

try:
    Picky()(torch.ones(1))
except ValueError:
    pass
""")
    assert code == 0
    raised = next(c for c in run.calls(1, run.call_count()) if c.error)
    assert raised.error == "ValueError: shape mismatch" and "error_text" not in raised.extra


def test_a_step_gradscaler_skipped_is_a_step_of_its_own(run_inprocess, capsys):
    """A float16 GradScaler skips optimizer.step() while its scale is too high: each loop
    pass is still one step, with its own loss, marked as skipped (not accumulation)."""
    code, run = run_inprocess(HEADER + """
m = nn.Linear(6, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 30)
for it in range(3):
    x, y = torch.randn(8, 6) * 100, torch.randint(0, 4, (8,))
    with torch.autocast("cpu", dtype=torch.float16):
        loss = nn.functional.cross_entropy(m(x), y)
    opt.zero_grad()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    print(f"loss {loss.item()!r} scale {scaler.get_scale()}")
""")
    assert code == 0
    printed = [line.split() for line in capsys.readouterr().out.splitlines() if line.startswith("loss")]
    assert len(printed) == 3 and all(float(scale) < 2.0 ** 30 for *_, scale in printed)  # all skipped
    steps = run.steps()
    assert [s.loss for s in steps] == [float(loss) for _, loss, *_ in printed]
    assert all(s.extra["optimizer_step_skipped"] == "GradScaler: inf/NaN gradients" for s in steps)
    # The scaled gradients' Inf is the scaler's signal, not a NaN to hunt: no call is marked.
    linear = [c for c in run.calls(1, run.call_count()) if c.name == "Linear"]
    assert run.slots(linear[0].seq, "grad")[0].stats.posinf + run.slots(linear[0].seq, "grad")[0].stats.neginf > 0
    assert not any(run.nonfinite_grad(c.seq) for c in linear)


def test_parts_of_a_called_model_keep_their_names_when_called_on_their_own(run_inprocess):
    """Reentrant checkpointing recomputes a block in backward with no module call open, and a loop
    may call a ModuleDict head itself: both read as parts of the model, not new models."""
    code, run = run_inprocess(HEADER + """
from torch.utils.checkpoint import checkpoint

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 2)})
    def forward(self, x):
        return checkpoint(self.block, x, use_reentrant=True)

net = Net()
x = torch.randn(3, 4, requires_grad=True)
net.heads["cls"](net(x)).sum().backward()
""")
    assert code == 0
    calls = [(c.phase, c.depth, c.name) for c in _calls(run) if c.kind == "module"]
    assert calls == [("forward", 0, "Net"), ("forward", 1, "block"), ("forward", 2, "block.0"),
                     ("forward", 2, "block.1"), ("forward", 0, "heads.cls"),
                     ("backward", 1, "block"), ("backward", 2, "block.0"), ("backward", 2, "block.1")]


WRAPPER = """
class Wrapper(nn.Module):
    def __init__(self, module):
        super().__init__()
        self.module = module
    def forward(self, x):
        return self.module(x)
"""
"""A wrapper that holds the model as `module`, as DDP and DataParallel do."""


def test_parts_called_before_their_model_have_the_names_they_have_after(run_inprocess):
    """`D[0](x)` before the first `D(x)`: step 1 named the parts `Linear`, `Tanh`,
    `Linear#2` and steps 2 on `0`, `1`, `2` (sweep Q). A wrapper's model (`ddp.module`)
    called itself stays a model of its own."""
    code, run = run_inprocess(HEADER + WRAPPER + """
D = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
G = nn.Linear(2, 4)
wrapped = Wrapper(G)
opt = torch.optim.SGD([*D.parameters(), *G.parameters()], lr=0.1)
for i in range(2):
    h = D[0](G(torch.randn(6, 2)))
    loss = D[2](D[1](h)).mean() + D(wrapped(torch.randn(6, 2))).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    names = [[(c.depth, c.name) for c in _calls(run) if c.kind == "module" and c.step == step]
             for step in (1, 2)]
    assert names[0] == names[1] == [(0, "Linear"), (0, "0"), (0, "1"), (0, "2"), (0, "Wrapper"),
                                    (1, "module"), (0, "Sequential"), (1, "0"), (1, "1"), (1, "2")]


def test_a_module_that_holds_the_model_and_is_never_called_is_not_its_root(run_inprocess):
    """A LightningModule-style step (here a lambda: no recorded function to name calls
    within `self`) calls `self.model` and `self.crit`: `self` is no model that calls
    them (review). A part of a wrapper's model keeps the wrapper's name for it."""
    code, run = run_inprocess(HEADER + WRAPPER + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)
    def forward(self, x):
        return self.fc(x)

class Lit(nn.Module):
    def __init__(self):
        super().__init__()
        self.model, self.crit = Net(), nn.MSELoss()
    training_step = lambda self, x, y: self.crit(self.model(x), y)

lit = Lit()
wrapped = Wrapper(nn.Sequential(nn.Linear(2, 2), nn.ReLU()))
opt = torch.optim.SGD(lit.parameters(), lr=0.1)
for i in range(2):
    loss = lit.training_step(wrapped(torch.randn(4, 2)), torch.randn(4, 1))
    opt.zero_grad(); loss.backward(); opt.step()
    wrapped.module[0](torch.randn(4, 2))
""")
    assert code == 0
    names = [[(c.depth, c.name) for c in _calls(run) if c.kind == "module" and c.step == step]
             for step in (1, 2)]
    assert names[0] == names[1] == [(0, "Wrapper"), (1, "module"), (2, "module.0"), (2, "module.1"),
                                    (0, "Net"), (1, "fc"), (0, "MSELoss"), (0, "module.0")]


def test_parts_of_a_model_the_loop_calls_itself_are_named_by_their_path_in_it(run_inprocess):
    """`b.body(x)` and `b.out(h)` with `b` never called: they read `Linear` and
    `Linear#2`, and so did their parameters in the optimizer's view. A class of the
    script's own keeps its name; the script's own variable for a part is its name."""
    code, run = run_inprocess(HEADER + """
class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.out, self.norm = nn.Linear(4, 8), nn.Linear(8, 2), Norm()

class Norm(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(2))
    def forward(self, x):
        return x * self.scale

b = Block()
head = nn.Linear(2, 1)
b.head = head
opt = torch.optim.SGD(b.parameters(), lr=0.1)
for i in range(2):
    loss = head(b.norm(b.out(b.body(torch.randn(5, 4))))).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    assert [c.name for c in _calls(run) if c.kind == "module" and c.step == 2] == [
        "b.body", "b.out", "Norm", "head"]
    step = next(c for c in _calls(run) if c.kind == "optimizer" and c.step == 2)
    assert [s.path for s in run.slots(step.seq, "param_grad")] == [
        "b.body.weight", "b.body.bias", "b.out.weight", "b.out.bias", "Norm.scale", "head.weight", "head.bias"]


def test_a_call_open_when_the_step_limit_stops_the_script_is_unfinished_not_failed(run_inprocess, capsys):
    code, run = run_inprocess(HEADER + """
class Trainer(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Linear(2, 1)

    def forward(self, steps):
        opt = torch.optim.SGD(self.net.parameters(), lr=0.1)
        for step in range(steps):
            self.net(torch.ones(3, 2)).sum().backward()
            opt.step()
            opt.zero_grad()
        return torch.zeros(1)

Trainer()(5)
""", steps=2)
    assert code == 0
    (trainer,) = [c for c in run.calls(1, run.call_count()) if c.name == "Trainer"]
    assert trainer.error is None and trainer.extra.get("unfinished") is True
    assert run.meta()["steps_recorded"] == 2


CAUGHT_CTRL_C = """
import torch
from torch import nn

class Stop(torch.autograd.Function):  # a Ctrl-C landing in backward
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        raise KeyboardInterrupt

class Slow(nn.Module):  # a Ctrl-C landing in a forward
    def __init__(self):
        super().__init__()
        self.lin, self.calls = nn.Linear(4, 4), 0

    def forward(self, x):
        self.calls += 1
        if self.calls == 3:  # in the second step's forward (the second call evaluated)
            raise KeyboardInterrupt
        return self.lin(x)

class Interrupting(torch.optim.SGD):  # and one in optimizer.step()
    def step(self, closure=None):
        raise KeyboardInterrupt

model = nn.Sequential(nn.Linear(4, 4), Slow(), nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
def evaluate():
    with torch.no_grad():
        return model(torch.randn(2, 4)).shape

for step in range(3):
    try:
        out = model(torch.randn(2, 4))
        (Stop.apply(out) if step == 0 else out).sum().backward()
        opt.step(); opt.zero_grad()
    except KeyboardInterrupt:
        print("interrupted: evaluating", evaluate())
try:
    Interrupting(model.parameters(), lr=0.1).step()
except KeyboardInterrupt:
    pass  # the handler is over before the next call
print(evaluate())
"""


def test_calls_a_caught_ctrl_c_left_are_closed_with_it(run_inprocess, capsys):
    """torch runs no closing hook for a KeyboardInterrupt: the calls it left are closed
    when the next call opens, and what the script does next is not nested in them."""
    code, run = run_inprocess(CAUGHT_CTRL_C)
    assert code == 0
    assert capsys.readouterr().out.count("torch.Size([2, 1])") == 3
    calls = run.calls(1, run.call_count())
    raised = [(c.kind, c.name, c.error) for c in calls if c.error]
    assert raised == [("backward", "backward", "KeyboardInterrupt"),
                      ("function", "Stop.backward", "KeyboardInterrupt"),
                      ("module", "Sequential", "KeyboardInterrupt"), ("module", "1", "KeyboardInterrupt"),
                      # closed at the next call, once the script's handler was over
                      ("optimizer", "Interrupting", "Interrupted: left by an exception no hook saw "
                       "(a KeyboardInterrupt or SystemExit the script caught)"),
                      ("function", "Interrupting.step", "KeyboardInterrupt")]
    evaluations = [c for c in calls if c.name == "Sequential" and c.phase == "no_grad"]
    assert len(evaluations) == 3 and all(c.depth == 1 and c.error is None for c in evaluations)
    assert {c.name for c in calls if c.parent in {e.seq for e in evaluations}} == {"0", "1", "2"}


MANUAL_UPDATES = """
import sys
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
params = list(model.parameters())
for it in range(5):
    x = torch.randn(16, 4)
    loss = ((model(x) - x.sum(1, keepdim=True)) ** 2).mean()
    grads = torch.autograd.grad(loss, model.parameters())
    torch.save(grads, f"{sys.argv[1]}/grads{it}.pt")
    with torch.no_grad():
        for p, g in zip(params, grads):
            p -= 0.1 * g
    print(f"loss {loss.item():.6f}")
"""


def test_a_loop_that_updates_with_autograd_grad_has_steps(run_inprocess, tmp_path, capsys):
    """No torch.optim, no backward(): torch.autograd.grad is the training's gradient. Its
    loss is the step's, it ends the step, and the gradients it returned are recorded."""
    code, run = run_inprocess(MANUAL_UPDATES, str(tmp_path), steps=2)
    assert code == 0
    printed = [float(line.split()[1]) for line in capsys.readouterr().out.splitlines()]
    steps = run.steps()
    assert len(printed) == 2 and [s.rule for s in steps] == ["backward", "backward"]
    assert [round(s.loss, 6) for s in steps] == printed
    grad_calls = [c for c in _calls(run) if c.name == "autograd.grad"]
    assert [(c.kind, c.step, c.phase) for c in grad_calls] == [("backward", 1, "backward"), ("backward", 2, "backward")]
    slots = [s for s in run.slots(grad_calls[1].seq) if s.role == "param_grad"]
    assert [s.path for s in slots] == ["Sequential.0.weight", "Sequential.0.bias", "Sequential.2.weight",
                                       "Sequential.2.bias"]
    returned = torch.load(tmp_path / "grads1.pt")
    for slot, grad in zip(slots, returned):
        np.testing.assert_array_equal(run.values(grad_calls[1].seq, slot), grad.numpy())


def test_autograd_grad_beside_an_optimizer_is_part_of_its_step(run_inprocess):
    """A gradient penalty: recorded, its gradient as its output, its loss not the step's.
    torch.autograd.functional's own calls of it are the library's: not recorded."""
    code, run = run_inprocess("""
import torch
from torch import nn

critic = nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(critic.parameters(), lr=0.1)
for _ in range(2):
    x = torch.randn(4, 2, requires_grad=True)
    score = critic(x).sum()
    grad, = torch.autograd.grad(score, x, create_graph=True)
    loss = -score + 10 * ((grad.norm(dim=1) - 1) ** 2).mean()
    opt.zero_grad(); loss.backward(); opt.step()
    torch.autograd.functional.jacobian(lambda t: t ** 2, torch.ones(3))
""")
    assert code == 0
    calls = _calls(run)
    steps = run.steps()
    assert len(steps) == 2 and [s.rule for s in steps] == ["optimizer", "optimizer"]
    assert [c.name for c in calls if c.kind == "backward"] == ["autograd.grad", "backward"] * 2
    penalty = next(c for c in calls if c.name == "autograd.grad")
    assert [(s.role, s.path, s.shape) for s in run.slots(penalty.seq) if s.role != "input"] == [
        ("output", "grads[0]", (4, 2))]
    losses = [c for c in calls if c.name == "backward"]
    assert steps[0].loss == pytest.approx(run.slots(losses[0].seq)[0].stats.mean)


def test_autograd_grad_inputs_in_each_form_torch_takes(run_inprocess, capsys):
    """A dict of named tensors (torch returns a dict then), a GradientEdge, a generator."""
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.autograd.graph import get_gradient_edge

model = nn.Linear(3, 1)
x = torch.randn(4, 3, requires_grad=True)
h = x * 2
loss = model(h).pow(2).mean()
named = torch.autograd.grad(loss, dict(model.named_parameters()), retain_graph=True)
print(sorted(named), [tuple(g.shape) for g in named.values()])
edge, = torch.autograd.grad(loss, get_gradient_edge(h), retain_graph=True)
print(tuple(edge.shape))
print(len(torch.autograd.grad(loss, model.parameters())))
""")
    assert code == 0
    assert capsys.readouterr().out == "['bias', 'weight'] [(1, 3), (1,)]\n(4, 3)\n2\n"
    calls = [c for c in _calls(run) if c.name == "autograd.grad"]
    assert [sorted(s.path for s in run.slots(c.seq) if s.role != "input") for c in calls] == [
        ["Linear.bias", "Linear.weight"], ["grads[0]"], ["Linear.bias", "Linear.weight"]]


def test_a_part_called_through_a_functions_argument_or_a_methods_self(run_inprocess):
    """`run_out(m, h)` on two models named one part `m.out` and the other `Linear`
    (review); a holder's method calling `self.out(x)` names it `out`."""
    code, run = run_inprocess(HEADER + """
class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.out = nn.Linear(4, 8), nn.Linear(8, 2)
    def step(self, x):
        return self.out(self.body(x))

def run_out(m, h):
    return m.out(h)

def main():
    a, b, c = Pair(), Pair(), Pair()
    opt = torch.optim.SGD([*a.parameters(), *b.parameters(), *c.parameters()], lr=0.1)
    for i in range(2):
        loss = run_out(a, a.body(torch.randn(3, 4))).sum() + run_out(b, b.body(torch.randn(3, 4))).sum()
        loss = loss + c.step(torch.randn(3, 4)).sum()
        opt.zero_grad(); loss.backward(); opt.step()

main()
""")
    assert code == 0
    names = [c.name for c in _calls(run) if c.kind == "module" and c.step == 2]
    # Seen from run_out, `m` is any model: its part keeps its class name, numbered.
    assert names == ["a.body", "Linear", "b.body", "Linear#2", "body", "out"]
