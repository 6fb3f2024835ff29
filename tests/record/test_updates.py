"""Optimizer steps: the update of each parameter (after - before), its update-to-weight ratio,
the parameters without a gradient and each param group's learning rate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

from tvis_tui.record import updates
from tvis_tui.store.parameters import parameter_history, totals

from .helpers import assert_same_state, train_plain_and_under_tvis, tvis_cli, write_script

MODEL = """
import sys
import torch
from torch import nn
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 8)
        self.act = nn.ReLU(inplace=True)
        self.head = nn.Linear(8, 2)
        self.frozen = nn.Linear(2, 2)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.frozen(self.head(self.act(self.lin(x))))

net = Net().to(DTYPE)
"""

STEPS = """
manual = []
for step in range(3):
    x = torch.randn(5, 4).to(DTYPE)
    loss = net(x).float().pow(2).mean()
    opt.zero_grad()
    loss.backward()
    params = [p for g in opt.param_groups for p in g["params"] if p.grad is not None]
    before = [p.detach().clone() for p in params]
    opt.step()
    manual.append([(p.detach() - b).float() for p, b in zip(params, before)]
                  + [float(b.float().norm()) for b in before])
torch.save(manual, sys.argv[1])
"""

SGD = """
opt = torch.optim.SGD([{"params": net.lin.parameters()},
                       {"params": [*net.head.parameters(), *net.frozen.parameters()], "lr": 0.5}],
                      lr=0.1, momentum=0.9)
"""

ADAM = """
opt = torch.optim.Adam([{"params": net.lin.parameters(), "lr": 1e-3},
                        {"params": [*net.head.parameters(), *net.frozen.parameters()]}], lr=1e-2)
"""

NAMES = ["Net.lin.weight", "Net.lin.bias", "Net.head.weight", "Net.head.bias"]


def _steps(run):
    return [c for c in run.calls(1, run.call_count()) if c.kind == "optimizer"]


@pytest.mark.parametrize("optimizer, lrs", [(SGD, [0.1, 0.5]), (ADAM, [1e-3, 1e-2])], ids=["sgd", "adam"])
@pytest.mark.parametrize("dtype", ["torch.float32", "torch.bfloat16"])
def test_updates_are_after_minus_before_exactly(run_inprocess, tmp_path, optimizer, lrs, dtype):
    source = f"import torch\nDTYPE = {dtype}\n" + MODEL + optimizer + STEPS
    code, run = run_inprocess(source, str(tmp_path / "manual.pt"))
    assert code == 0
    manual = torch.load(tmp_path / "manual.pt")
    steps = _steps(run)
    assert len(steps) == 3
    for call, expected in zip(steps, manual):
        assert call.extra["lrs"] == lrs and call.extra["lr"] == lrs[0]
        hyper = call.extra["hyper"]
        assert len(hyper) == 2 and hyper[0] == hyper[1] and "lr" not in hyper[0]
        assert (hyper[0]["momentum"], hyper[0]["nesterov"]) == (0.9, False) if "momentum" in hyper[0] \
            else (hyper[0]["betas"], hyper[0]["eps"]) == ([0.9, 0.999], 1e-08)
        assert call.extra["no_grad"] == ["Net.frozen.weight", "Net.frozen.bias"]
        assert call.extra["no_grad_count"] == 2
        slots = run.slots(call.seq, "update")
        assert [s.path for s in slots] == NAMES
        assert [s.dtype for s in slots] == [dtype.removeprefix("torch.")] * 4
        deltas, norms = expected[:4], expected[4:]
        for slot, delta, norm in zip(slots, deltas, norms):
            np.testing.assert_array_equal(run.values(call.seq, slot), delta.numpy())
            assert slot.ratio == pytest.approx(float(delta.norm()) / norm, rel=1e-4)
        # Frozen parameters: neither a gradient, nor an update, nor an updated value.
        for role in ("param_grad", "update", "param"):
            assert not any("frozen" in s.path for s in run.slots(call.seq, role))
    assert not run.meta()["warnings"]


def test_parameters_past_the_snapshot_budget_get_a_warning(run_inprocess, tmp_path, monkeypatch):
    # In order: lin.weight 128 bytes (over), lin.bias 32, head.weight 64, head.bias 8 (over).
    monkeypatch.setattr(updates, "SNAPSHOT_BUDGET_BYTES", 100)
    code, run = run_inprocess("import torch\nDTYPE = torch.float32\n" + MODEL + SGD + STEPS, str(tmp_path / "m.pt"))
    assert code == 0
    step = _steps(run)[0]
    assert [s.path for s in run.slots(step.seq, "update")] == ["Net.lin.bias", "Net.head.weight"]
    assert [s.path for s in run.slots(step.seq, "param_grad")] == NAMES
    assert any("updates of 2 parameters were not recorded" in w for w in run.meta()["warnings"])


def test_export_shows_updates_ratios_and_no_grad_params(tmp_path):
    script = write_script(tmp_path, "import torch\nDTYPE = torch.float32\n" + MODEL + SGD + STEPS)
    done = tvis_cli("run", "--steps", "1", "--out", "runs", str(script), "m.pt", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    run_dir = next((tmp_path / "runs").iterdir())
    out = tvis_cli("export", str(run_dir), "--format", "jsonl", cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    objs = [json.loads(line) for line in out.stdout.splitlines()]
    calls = [o for o in objs if o.get("kind") == "optimizer"]
    assert calls and calls[0]["extra"]["no_grad"] == ["Net.frozen.weight", "Net.frozen.bias"]
    assert calls[0]["extra"]["lrs"] == [0.1, 0.5]
    updates_ = [s for s in calls[0]["slots"] if s["role"] == "update"]
    assert [s["path"] for s in updates_] == NAMES and all(s["ratio"] > 0 for s in updates_)
    lin = next(o for o in objs if o.get("kind") == "module" and o.get("name") == "lin")
    assert [s["path"] for s in lin["slots"] if s["role"] == "grad"] == ["out"]


IDENTITY = """
import torch
DTYPE = torch.float32
""" + MODEL + """
opt = torch.optim.SGD([{"params": net.lin.parameters()},
                       {"params": [*net.head.parameters(), *net.frozen.parameters()], "lr": 0.5}],
                      lr=0.1, momentum=0.9)
opt2 = torch.optim.Adam(net.head.parameters(), lr=1e-2)
for step in range(4):
    x = torch.randn(5, 4)
    aux = net.lin(x)  # never backpropagated
    loss = nn.functional.dropout(net(x), 0.2).pow(2).mean()
    opt.zero_grad()
    opt2.zero_grad()
    loss.backward()
    opt.step()
    opt2.step()
    print(f"loss {loss.item():.10f}")
torch.save({"params": net.state_dict(), "opt": opt.state_dict(), "opt2": opt2.state_dict(),
            "rng": torch.get_rng_state()}, sys.argv[1])
"""


def test_grads_and_updates_leave_training_bitwise_identical(tmp_path):
    script = write_script(tmp_path, IDENTITY)
    train_plain_and_under_tvis(tmp_path, str(script), ["plain.pt"], ["tvis.pt"])
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")


def test_inspector_shows_the_ratio_beside_an_update(run_inprocess, tmp_path):
    from tvis_tui.widgets.inspector import OPTIMIZER_COLUMNS, slot_cells

    def cells(slot) -> dict[str, str]:
        return dict(zip(OPTIMIZER_COLUMNS, (c.plain for c in slot_cells(slot, columns=OPTIMIZER_COLUMNS))))

    code, run = run_inprocess("import torch\nDTYPE = torch.float32\n" + MODEL + SGD + STEPS, str(tmp_path / "m.pt"))
    assert code == 0
    step = _steps(run)[0]
    update = cells(run.slots(step.seq, "update")[0])
    assert update["name"].startswith("update Net.lin.weight")
    assert update["Δ/w"] == f"{run.slots(step.seq, 'update')[0].ratio:.2g}" != ""
    assert cells(run.slots(step.seq, "param_grad")[0])["Δ/w"] == ""


def test_inspector_lists_learning_rates_and_parameters_without_gradient(run_inprocess, tmp_path):
    from tvis_tui.widgets.inspector import optimizer_rows

    code, run = run_inprocess("import torch\nDTYPE = torch.float32\n" + MODEL + SGD + STEPS, str(tmp_path / "m.pt"))
    assert code == 0
    rows = optimizer_rows(_steps(run)[0])
    assert [(f"{r.role} {r.path}", r.repr) for r in rows] == [
        # Each group's settings that do something beside its lr: SGD's momentum, not its zeros.
        ("lr group 0", "0.1  momentum 0.9"), ("lr group 1", "0.5  momentum 0.9"),
        ("no grad Net.frozen.weight", "requires_grad=False: not updated"),
        ("no grad Net.frozen.bias", "requires_grad=False: not updated")]
    module = next(c for c in run.calls(1, run.call_count()) if c.kind == "module")
    assert optimizer_rows(module) == []


def test_lbfgs_closure_computes_the_gradients_inside_the_step(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
lin = nn.Linear(3, 1)
opt = torch.optim.LBFGS(lin.parameters(), lr=0.5, max_iter=3)
x, y = torch.randn(8, 3), torch.randn(8, 1)

def closure():
    opt.zero_grad()
    loss = (lin(x) - y).pow(2).mean()
    loss.backward()
    return loss

for step in range(2):
    opt.step(closure)
""")
    assert code == 0
    step = _steps(run)[0]
    assert [s.path for s in run.slots(step.seq, "update")] == ["Linear.weight", "Linear.bias"]
    assert "no_grad" not in step.extra
    assert all(s.ratio and s.ratio > 0 for s in run.slots(step.seq, "update"))


def test_a_closure_step_records_the_gradients_at_the_parameters_it_started_from(run_inprocess, tmp_path):
    """.grad before an LBFGS step holds the last step's final closure gradient; the
    step's own starts with its closure's first backward."""
    expected = tmp_path / "grads.pt"
    code, run = run_inprocess(f"""
import torch
from torch import nn
torch.manual_seed(0)
lin = nn.Linear(3, 1)
opt = torch.optim.LBFGS(lin.parameters(), lr=0.5, max_iter=3)
x, y = torch.randn(8, 3), torch.randn(8, 1)

def loss_fn():
    return (lin(x) - y).pow(2).mean()

def closure():
    opt.zero_grad()
    loss = loss_fn()
    loss.backward()
    return loss

grads = []
for step in range(2):
    grads.append([g.clone() for g in torch.autograd.grad(loss_fn(), list(lin.parameters()))])
    opt.step(closure)
torch.save(grads, {str(expected)!r})
""")
    assert code == 0
    import torch
    for step, grads in zip(_steps(run), torch.load(expected)):
        slots = run.slots(step.seq, "param_grad")
        assert [s.path for s in slots] == ["Linear.weight", "Linear.bias"]
        for slot, grad in zip(slots, grads):
            np.testing.assert_allclose(run.values(step.seq, slot), grad.numpy(), rtol=1e-6, atol=1e-7)


def test_a_sparse_embedding_gradient_has_statistics(run_inprocess, tmp_path):
    expected = tmp_path / "grads.pt"
    code, run = run_inprocess(f"""
import torch
from torch import nn
torch.manual_seed(0)
emb = nn.Embedding(10, 3, sparse=True)
opt = torch.optim.SparseAdam(emb.parameters(), lr=0.1)
grads = []
for step in range(2):
    opt.zero_grad()
    emb(torch.tensor([[1, 2, 2]])).pow(2).sum().backward()
    grads.append(emb.weight.grad.to_dense())
    opt.step()
torch.save(grads, {str(expected)!r})
""")
    assert code == 0
    for step, grad in zip(_steps(run), torch.load(expected)):
        slot = run.slots(step.seq, "param_grad")[0]
        assert slot.path == "Embedding.weight" and slot.shape == (10, 3)
        assert slot.stats.zeros == 24 and slot.stats.norm == pytest.approx(float(grad.norm()))
        np.testing.assert_array_equal(run.values(step.seq, slot), grad.numpy())


def test_a_step_without_a_closure_updates_only_parameters_with_a_gradient(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
unused = nn.Linear(1, 1)  # trainable, registered first, never called
used = nn.Linear(3, 1)
opt = torch.optim.SGD([*unused.parameters(), *used.parameters()], lr=0.1, weight_decay=0.5)
for step in range(2):
    opt.zero_grad()
    used(torch.randn(4, 3)).sum().backward()
    opt.step()
""")
    assert code == 0
    step = _steps(run)[0]
    # Named by the script's variable: it holds two Linear models.
    assert [s.path for s in run.slots(step.seq, "update")] == ["used.weight", "used.bias"]
    assert all(s.ratio > 0 for s in run.slots(step.seq, "update"))
    assert step.extra["no_grad_count"] == 2


def test_updates_past_the_slot_cap_are_not_copied(run_inprocess, tmp_path, monkeypatch):
    monkeypatch.setattr(updates, "MAX_SLOTS", 2)
    code, run = run_inprocess("import torch\nDTYPE = torch.float32\n" + MODEL + SGD + STEPS, str(tmp_path / "m.pt"))
    assert code == 0
    slots = run.slots(_steps(run)[0].seq, "update")
    assert [s.path for s in slots[:2]] == NAMES[:2] and slots[2].repr == "… more not recorded (cap 2)"
    assert len(slots) == 3 and not run.meta()["warnings"]


def test_weight_norms_count_finite_values_and_read_once(monkeypatch):
    reads = []
    tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: reads.append(1) or tolist(self))
    got = updates._norms([torch.tensor([3.0, 4.0]), torch.tensor([math.nan, 3.0, math.inf, 4.0]),
                  torch.tensor([3.0, 4.0], dtype=torch.float16), torch.zeros(3), torch.zeros(0),
                  torch.tensor([3e38, 4e38], dtype=torch.float64)])
    assert got == [5.0, 5.0, 5.0, None, None, pytest.approx(5e38)]
    assert len(reads) == 1  # one wait for all parameters of a device


def test_two_models_of_one_class_are_named_by_the_scripts_names_for_them(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
encoder = nn.Sequential(nn.Linear(3, 4), nn.ReLU())
decoder = nn.Sequential(nn.Linear(4, 2))
pair = nn.ModuleList([encoder, decoder])  # the script's own names still tell them apart
opt = torch.optim.SGD([*encoder.parameters(), *decoder.parameters()], lr=0.1)
for step in range(2):
    opt.zero_grad()
    nn.MSELoss()(decoder(encoder(torch.randn(5, 3))), torch.zeros(5, 2)).backward()
    opt.step()
""")
    assert code == 0
    step = _steps(run)[0]
    assert [s.path for s in run.slots(step.seq, "update")] == [
        "encoder.0.weight", "encoder.0.bias", "decoder.0.weight", "decoder.0.bias"]
    roots = [c.name for c in run.calls(1, run.call_count()) if c.depth == 0 and c.kind == "module"]
    assert roots == ["encoder", "decoder", "MSELoss"] * 2  # a loss made each step keeps its name


def test_models_of_one_class_held_by_a_trainer_are_named_by_its_attributes(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)

class Distiller:
    def __init__(self):
        self.teacher = nn.Sequential(nn.Linear(3, 2))
        self.student = nn.Sequential(nn.Linear(3, 2))
        self.head = nn.Linear(2, 2)  # the only Linear model: its class names it
        self.opt = torch.optim.SGD(self.student.parameters(), lr=0.1)

    def step(self, x):
        with torch.no_grad():
            target = self.teacher(x)
        loss = (self.head(self.student(x)) - target).pow(2).mean()
        self.opt.zero_grad(); loss.backward(); self.opt.step()

trainer = Distiller()
for _ in range(2):
    trainer.step(torch.randn(4, 3))
""")
    assert code == 0
    calls = run.calls(1, run.call_count())
    steps = {c.seq for c in calls if c.name == "Distiller.step"}
    roots = [c.name for c in calls if c.parent in steps and c.kind == "module"]
    assert roots == ["teacher", "student", "Linear"] * 2
    assert [s.path for s in run.slots(_steps(run)[0].seq, "update")] == ["student.0.weight", "student.0.bias"]


def test_members_of_a_module_list_or_dict_are_named_by_the_container(run_inprocess):
    # The container is never called: each member is a root, named as in its state_dict.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
blocks = nn.ModuleList([nn.Linear(3, 3), nn.Linear(3, 3)])
heads = nn.ModuleDict({"cls": nn.Linear(3, 2)})
opt = torch.optim.SGD([*blocks.parameters(), *heads.parameters()], lr=0.1)
first = blocks[0]  # another name for a member does not name it
def run_block(block, h):
    return block(h)
for step in range(2):
    h = first(torch.randn(4, 3))
    for block in blocks[1:]:
        h = run_block(block, h)
    opt.zero_grad(); heads["cls"](h).sum().backward(); opt.step()
""")
    assert code == 0
    roots = [c.name for c in run.calls(1, run.call_count()) if c.kind == "module" and "." in c.name]
    assert roots == ["blocks.0", "blocks.1", "heads.cls"] * 2
    assert [s.path for s in run.slots(_steps(run)[0].seq, "update")] == [
        "blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias", "heads.cls.weight", "heads.cls.bias"]


def test_a_model_made_anew_after_the_old_one_is_gone_keeps_its_name(run_inprocess):
    code, run = run_inprocess("""
import gc
import torch
from torch import nn
for trial in range(3):
    model = nn.Sequential(nn.Linear(2, 1))
    model(torch.ones(1, 2))
    del model
    gc.collect()
models = [nn.Sequential(nn.Linear(2, 1)), nn.Sequential(nn.Linear(2, 1))]
for member in models:  # the loop's variable names neither
    member(torch.ones(1, 2))
""")
    assert code == 0
    roots = [c.name for c in run.calls(1, run.call_count()) if c.depth == 0]
    assert roots == ["Sequential"] * 4 + ["Sequential#2"]


def test_a_parametrized_weight_is_named_by_the_model_not_its_build_time_call(run_inprocess):
    """spectral_norm runs its parametrization when the model is built, before the model
    is ever called: that first root must not name the parameter."""
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm
torch.manual_seed(0)
m = nn.Sequential(spectral_norm(nn.Linear(3, 3)), nn.Linear(3, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
m(torch.randn(4, 3)).sum().backward()
opt.step()
""")
    assert code == 0
    paths = [s.path for s in run.slots(_steps(run)[0].seq, "param_grad")]
    assert paths == ["Sequential.0.bias", "Sequential.0.parametrizations.weight.original",
                     "Sequential.1.weight", "Sequential.1.bias"]


def test_a_parameter_renamed_during_training_is_named_anew(run_inprocess):
    """Pruning moves a weight to `weight_orig` (the same Parameter object) mid-run."""
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.nn.utils import prune
torch.manual_seed(0)
m = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
opt = torch.optim.SGD(m.parameters(), lr=0.1)
for i in range(2):
    if i == 1:
        prune.l1_unstructured(m[0], "weight", amount=0.5)
    opt.zero_grad(); m(torch.randn(4, 3)).sum().backward(); opt.step()
""")
    assert code == 0
    first, second = ([s.path for s in run.slots(step.seq, "param_grad")] for step in _steps(run))
    assert first[0] == "Sequential.0.weight"
    assert "Sequential.0.weight_orig" in second and "Sequential.0.weight" not in second


def test_parameters_no_model_holds_take_the_names_the_optimizer_was_given(run_inprocess):
    """A torch.func loop trains tensors of its own: named as the script named them for the
    optimizer (`named_parameters()` or a dict's items), else by their place."""
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.func import functional_call

model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
params = {k: v.detach().clone().requires_grad_() for k, v in model.named_parameters()}
extra = torch.zeros(1, requires_grad=True)
opt = torch.optim.Adam(params.items(), lr=0.1)
opt_extra = torch.optim.SGD([extra], lr=0.1)
loss = (functional_call(model, params, (torch.randn(5, 3),)) + extra).pow(2).mean()
loss.backward()
opt.step()
opt_extra.step()
""")
    assert code == 0
    adam, sgd = [c for c in run.calls(1, run.call_count()) if c.kind == "optimizer"]
    for role in ("param_grad", "update", "param"):
        assert [s.path for s in run.slots(adam.seq, role)] == ["0.weight", "0.bias", "2.weight", "2.bias"]
        assert [s.path for s in run.slots(sgd.seq, role)] == ["param[0]"]


def test_a_complex_parameter_has_an_update_ratio(run_inprocess, tmp_path):
    expected = tmp_path / "ratios.pt"
    code, run = run_inprocess(f"""
import torch
torch.manual_seed(0)
w = torch.nn.Parameter(torch.randn(5, dtype=torch.cfloat))
opt = torch.optim.SGD([w], lr=0.1)
ratios = []
for step in range(2):
    opt.zero_grad()
    (w * w.conj()).real.sum().backward()
    before = w.detach().clone()
    opt.step()
    ratios.append(float((w.detach() - before).norm() / before.norm()))
torch.save(ratios, {str(expected)!r})
""")
    assert code == 0
    for step, ratio in zip(_steps(run), torch.load(expected)):
        update = run.slots(step.seq, "update")[0]
        assert update.dtype == "complex64" and update.ratio == pytest.approx(ratio, rel=1e-5)


def test_a_parameter_backward_did_not_reach_reads_apart_from_a_frozen_one(run_inprocess, tmp_path):
    # A head the forward skips by mistake, beside a layer frozen on purpose: the fixes differ.
    from tvis_tui.widgets.inspector import optimizer_rows

    source = """
import torch
from torch import nn
torch.manual_seed(0)

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.aux, self.frozen = nn.Linear(4, 2), nn.Linear(4, 2), nn.Linear(2, 2)
        self.frozen.requires_grad_(False)

    def forward(self, x):
        return self.frozen(self.body(x))

net = Net()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(2):
    opt.zero_grad()
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
"""
    code, run = run_inprocess(source)
    assert code == 0
    step = _steps(run)[0]
    assert step.extra["no_grad_frozen"] == ["Net.frozen.weight", "Net.frozen.bias"]
    assert (step.extra["no_grad_count"], step.extra["no_grad_frozen_count"]) == (4, 2)
    rows = [(f"{r.role} {r.path}", r.repr) for r in optimizer_rows(step)]
    assert rows[1:] == [("no grad Net.aux.weight", "no gradient (unused by the loss, or zeroed before the step): not updated"),
                        ("no grad Net.aux.bias", "no gradient (unused by the loss, or zeroed before the step): not updated"),
                        ("no grad Net.frozen.weight", "requires_grad=False: not updated"),
                        ("no grad Net.frozen.bias", "requires_grad=False: not updated")]


def test_a_missing_zero_grad_shows_as_a_gradient_norm_growing_step_after_step(run_inprocess, tmp_path):
    # The bug the parameters view (`w`) is for: each step's gradient is the sum of all so far.
    from tvis_tui.store.parameters import parameter_history, totals

    source = """
import sys, torch
from torch import nn
torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.01)
x, y = torch.randn(8, 4), torch.randn(8, 1)
norms = []
for step in range(3):
    nn.functional.mse_loss(net(x), y).backward()  # no opt.zero_grad()
    before = [p.detach().clone() for p in net.parameters()]
    total = torch.nn.utils.clip_grad_norm_(net.parameters(), float("inf"))  # clips nothing
    opt.step()
    moved = torch.stack([(p.detach() - b).norm() for p, b in zip(net.parameters(), before)]).norm()
    norms.append([float(net.weight.grad.norm()), float(net.bias.grad.norm()), float(total),
                  float(moved / torch.stack([b.norm() for b in before]).norm())])
torch.save(norms, sys.argv[1])
"""
    code, run = run_inprocess(source, str(tmp_path / "norms.pt"))
    assert code == 0
    history = parameter_history(run)
    assert history.steps == [1, 2, 3] and history.names == ["Linear.weight", "Linear.bias"]
    expected = torch.load(tmp_path / "norms.pt")
    for i, name in enumerate(history.names):
        got = [history.points[name][step].grad_norm for step in history.steps]
        assert got == pytest.approx([norms[i] for norms in expected], rel=1e-6)
        assert got[0] < got[1] < got[2]
        assert all(history.points[name][step].ratio > 0 for step in history.steps)
    total = totals(history)  # all parameters together: what clip_grad_norm_ returns
    assert [total[step].grad_norm for step in history.steps] == pytest.approx([n[2] for n in expected], rel=1e-6)
    assert [total[step].ratio for step in history.steps] == pytest.approx([n[3] for n in expected], rel=1e-4)


def test_the_parameters_past_the_64_listed_count_in_the_all_parameters_figures(run_inprocess, tmp_path):
    """40 Linear layers hold 80 parameters: the "all parameters" gradient norm covered the
    first 64, 3.8 where clip_grad_norm_ found 600 (sweep R). The rest are taken together."""
    truth = tmp_path / "truth.json"
    code, run = run_inprocess(f"""
import json, torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(40)])
opt = torch.optim.SGD(model.parameters(), lr=0.01)
seen = []
for step in range(2):
    loss = model(torch.randn(3, 4)).pow(2).mean() * 1e3
    opt.zero_grad(); loss.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    if step == 1:
        model[39].bias.grad[0] = float("nan")
    grads = [p.grad.clone() for p in model.parameters()]
    opt.step()
    rest = [torch.nan_to_num(g, nan=0.0).norm() for g in grads[64:]]
    seen.append({{"total": total.item(), "rest": torch.stack(rest).norm().item(),
                 "weights": torch.stack([p.norm() for p in list(model.parameters())[64:]]).norm().item()}})
json.dump(seen, open({str(truth)!r}, "w"))
""")
    assert code == 0
    seen = json.loads(truth.read_text())
    history = parameter_history(run)
    assert len(history.names) == 64
    first, second = (history.unlisted[step] for step in (1, 2))
    assert first[0] == 16 and first[1].grad_norm == pytest.approx(seen[0]["rest"], rel=1e-5)
    assert first[1].weight_norm == pytest.approx(seen[0]["weights"], rel=1e-5)
    all_params = totals(history)
    assert all_params[1].grad_norm == pytest.approx(seen[0]["total"], rel=1e-5)
    assert all_params[1].ratio is None  # it needs each parameter's update
    # A NaN past the 64 listed: counted, and the call marked as holding one.
    assert second[1].grad_nonfinite == 1 and all_params[2].grad_nonfinite == 1
    assert second[1].grad_norm == pytest.approx(seen[1]["rest"], rel=1e-5)
    assert [run.nonfinite_grad(call.seq) for call in _steps(run)] == [False, True]


def test_parameters_past_the_64_on_a_device_that_cannot_be_read_leave_the_step_recorded(run_inprocess):
    """Their norms failed on such a device (a stand-in for a model split over GPUs: `meta`)
    and took the listed parameters' updates and ratios with them (review)."""
    code, run = run_inprocess("""
import torch
from torch import nn
model = nn.Sequential(*[nn.Linear(2, 2) for _ in range(32)])  # 64 parameters
far = [nn.Parameter(torch.zeros(3, device="meta")) for _ in range(6)]
opt = torch.optim.SGD([*model.parameters(), *far], lr=0.1)
for step in range(2):
    opt.zero_grad()
    model(torch.ones(1, 2)).sum().backward()
    for p in far:
        p.grad = torch.ones(3, device="meta")
    opt.step()
""")
    assert code == 0
    call = _steps(run)[0]
    updates_ = [s for s in run.slots(call.seq) if s.role == "update" and s.is_tensor]
    assert len(updates_) == 64 and all(s.ratio is not None for s in updates_[:2])
    assert any("past the 64 listed" in w for w in run.meta()["warnings"])


BEYOND_64 = """
import sys, torch
from torch import nn
torch.manual_seed(0)
model = nn.Sequential(*[nn.Linear(4, 4) for _ in range(35)])
emb = nn.Embedding(10, 4, sparse=True)  # its sparse gradient is past the 64 listed
opt = torch.optim.SGD([*model.parameters(), *emb.parameters()], lr=0.1)
for step in range(3):
    x = emb(torch.randint(0, 10, (5,)))
    loss = nn.functional.dropout(model(x), 0.1).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {loss.item():.10f}")
torch.save({"params": model.state_dict(), "emb": emb.state_dict(), "opt": opt.state_dict(),
            "rng": torch.get_rng_state()}, sys.argv[1])
"""


def test_parameters_past_the_64_listed_leave_training_bitwise_identical(tmp_path):
    script = write_script(tmp_path, BEYOND_64)
    train_plain_and_under_tvis(tmp_path, str(script), ["plain.pt"], ["tvis.pt"])
    assert_same_state(tmp_path / "plain.pt", tmp_path / "tvis.pt")
