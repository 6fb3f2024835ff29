"""Activation gradients: each recorded module output's gradient, read back as role "grad"."""

from __future__ import annotations

import io
import json

import numpy as np
import torch

from tvis_tui.export import export_jsonl
from tvis_tui.record.options import CaptureOptions

HEADER = """
import sys
import torch
from torch import nn
torch.manual_seed(0)
seen = {}

def keep(name):
    def hook(grad):
        seen[name] = grad.detach().clone()
    return hook
"""


def _by_name(run):
    return {c.name: c for c in run.calls(1, run.call_count()) if c.kind == "module"}


def _slot(run, seq, role, path="out"):
    found = [s for s in run.slots(seq, role) if s.path == path]
    return found[0] if found else None


def test_grads_equal_what_a_plain_tensor_hook_sees(run_inprocess, tmp_path):
    """The recorded grad of every output equals the one the script's own hook got."""
    code, run = run_inprocess(HEADER + """
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x):
        h = self.lin(x)
        h.register_hook(keep("lin"))
        y = self.head(torch.tanh(h))
        y.register_hook(keep("head"))
        return y

net = Net()
x = torch.randn(5, 4)
(net(x) * torch.arange(3.0)).sum().backward()
torch.save(seen, sys.argv[1])
""", str(tmp_path / "seen.pt"))
    assert code == 0
    seen = torch.load(tmp_path / "seen.pt")
    calls = _by_name(run)
    for name in ("lin", "head"):
        grad = _slot(run, calls[name].seq, "grad")
        assert grad is not None and grad.index == 0 and grad.shape == tuple(seen[name].shape)
        np.testing.assert_array_equal(run.values(calls[name].seq, grad), seen[name].numpy())
        assert abs(grad.stats.norm - float(seen[name].norm())) < 1e-5
    # The root's output is head's output: one summary, stored once.
    root = _slot(run, calls["Net"].seq, "grad")
    np.testing.assert_array_equal(run.values(calls["Net"].seq, root), seen["head"].numpy())


def test_in_place_relu_after_a_module(run_inprocess, tmp_path):
    """A Linear followed by ReLU(inplace=True): the Linear's grad is the one of the value it
    returned (masked by the ReLU), the ReLU's is the one of its result."""
    code, run = run_inprocess(HEADER + """
lin, act = nn.Linear(4, 6), nn.ReLU(inplace=True)
model = nn.Sequential(lin, act)
def grab(module, args, out):
    out.register_hook(keep(type(module).__name__))
lin.register_forward_hook(grab)
out = model(torch.randn(7, 4))
(out * torch.tensor([-1.0, -0.5, 0.0, 0.5, 1.0, 2.0])).sum().backward()
torch.save(seen, sys.argv[1])
""", str(tmp_path / "seen.pt"))
    assert code == 0
    seen = torch.load(tmp_path / "seen.pt")
    calls = _by_name(run)
    lin_grad = run.values(calls["0"].seq, _slot(run, calls["0"].seq, "grad"))
    act_seq = calls["1"].seq
    act_grad = run.values(act_seq, _slot(run, act_seq, "grad"))
    act_out = run.values(act_seq, _slot(run, act_seq, "output"))
    np.testing.assert_array_equal(lin_grad, seen["Linear"].numpy())
    np.testing.assert_array_equal(act_grad, np.broadcast_to(np.float32([-1, -0.5, 0, 0.5, 1, 2]), (7, 6)))
    np.testing.assert_array_equal(lin_grad, act_grad * (act_out > 0))


def test_outputs_never_backpropagated_have_no_grad(run_inprocess):
    """An unused second output, a module run under no_grad and an eval pass: no grad slot."""
    code, run = run_inprocess(HEADER + """
class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(3, 2), nn.Linear(3, 2)

    def forward(self, x):
        return self.a(x), self.b(x)

net, probe = TwoHeads(), nn.Linear(3, 1)
x = torch.randn(4, 3)
used, unused = net(x)
with torch.no_grad():
    probe(x)
used.sum().backward()
""")
    assert code == 0
    calls = _by_name(run)
    seq = calls["TwoHeads"].seq
    assert [s.path for s in run.slots(seq, "output")] == ["out[0]", "out[1]"]
    assert [(s.index, s.path) for s in run.slots(seq, "grad")] == [(0, "out[0]")]
    assert run.slots(calls["a"].seq, "grad") and not run.slots(calls["b"].seq, "grad")
    assert not run.slots(calls["Linear"].seq, "grad")
    assert not run.meta()["warnings"]


def test_summary_capture_keeps_grad_stats_without_values(run_inprocess):
    code, run = run_inprocess(HEADER + """
lin = nn.Linear(3, 3)
lin(torch.ones(2, 3)).sum().backward()
""", capture=CaptureOptions(capture="summary"))
    assert code == 0
    seq = _by_name(run)["Linear"].seq
    grad = _slot(run, seq, "grad")
    assert grad.stats.min == grad.stats.max == 1.0 and not grad.has_values


def test_excluded_modules_get_no_grad_hooks(run_inprocess):
    code, run = run_inprocess(HEADER + """
net = nn.Sequential(nn.Linear(3, 3), nn.Linear(3, 1))
net(torch.ones(2, 3)).sum().backward()
""", capture=CaptureOptions(exclude_modules=("0",)))
    assert code == 0
    calls = _by_name(run)
    assert "0" not in calls and _slot(run, calls["1"].seq, "grad") is not None


def test_reentrant_checkpoint_grads_go_to_the_recompute(run_inprocess):
    """Under reentrant checkpointing the forward runs without grad; the calls recomputed
    inside backward get the grads, and training is unaffected."""
    code, run = run_inprocess(HEADER + """
from torch.utils.checkpoint import checkpoint
block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
x = torch.randn(3, 4, requires_grad=True)
checkpoint(block, x, use_reentrant=True).sum().backward()
assert x.grad is not None
""")
    assert code == 0
    linears = [c for c in run.calls(1, run.call_count()) if c.name == "0"]
    assert len(linears) == 2
    first, recompute = linears
    assert not run.slots(first.seq, "grad") and run.slots(recompute.seq, "grad")
    assert recompute.phase == "backward"


def test_hooks_left_on_live_tensors_after_the_run_stay_quiet(run_inprocess):
    """A tensor kept past the run still carries tvis's hook: backward through it later
    works as without tvis and writes nothing (the store is closed)."""
    code, run = run_inprocess(HEADER + """
lin = nn.Linear(3, 3)
torch._tvis_test_kept = lin(torch.ones(2, 3))
""")
    assert code == 0
    kept = torch._tvis_test_kept
    del torch._tvis_test_kept
    seq = _by_name(run)["Linear"].seq
    kept.sum().backward()
    assert kept.grad_fn is not None and not run.slots(seq, "grad")


def test_a_gradient_penalty_does_not_take_the_place_of_the_loss_grad(run_inprocess, tmp_path):
    """torch.autograd.grad runs the output hooks too; the grad recorded is backward()'s."""
    code, run = run_inprocess(HEADER + """
lin = nn.Linear(3, 3)
x = torch.randn(4, 3, requires_grad=True)
out = lin(x)
out.register_hook(keep("lin"))  # the last grad it sees is backward()'s
g, = torch.autograd.grad(out.pow(2).sum(), x, create_graph=True)
(out.sum() + g.pow(2).sum()).backward()
torch.save(seen, sys.argv[1])
""", str(tmp_path / "seen.pt"))
    assert code == 0
    seen = torch.load(tmp_path / "seen.pt")
    seq = _by_name(run)["Linear"].seq
    np.testing.assert_array_equal(run.values(seq, _slot(run, seq, "grad")), seen["lin"].numpy())


def test_a_backward_that_raises_is_recorded_with_its_error(run_inprocess):
    code, run = run_inprocess(HEADER + """
lin, act = nn.Linear(3, 3), nn.Sigmoid()
h = act(lin(torch.ones(2, 3)))
h.mul_(2)  # sigmoid saved its output: backward fails
h.sum().backward()
""")
    assert code != 0
    backward = [c for c in run.calls(1, run.call_count()) if c.kind == "backward"]
    assert backward and backward[0].error.startswith("RuntimeError: one of the variables")
    assert not run.meta()["warnings"]


def test_views_returned_by_a_module(run_inprocess):
    """Views get their grads; a view modified in place later has none (as for a plain
    hook), while the module that made its base still has its own."""
    code, run = run_inprocess(HEADER + """
class Split(nn.Module):
    def forward(self, x):
        return x[:, :2], x[:, 2:]

lin, split = nn.Linear(3, 4), Split()
h = lin(torch.ones(2, 3))
a, b = split(h)
(a * 3).sum().backward(retain_graph=True)
c, d = split(lin(torch.ones(2, 3)))
c.mul_(2)
(c.sum() + d.sum()).backward()
""")
    assert code == 0
    splits = [c for c in run.calls(1, run.call_count()) if c.name == "Split"]
    first = {s.path: s for s in run.slots(splits[0].seq, "grad")}
    assert list(first) == ["out[0]"] and first["out[0]"].stats.min == 3.0
    assert not run.slots(splits[1].seq, "grad")
    linears = [c for c in run.calls(1, run.call_count()) if c.name == "Linear"]
    assert all(run.slots(c.seq, "grad") for c in linears)


def test_non_reentrant_checkpoint_grads_stay_on_the_forward_calls(run_inprocess, tmp_path):
    code, run = run_inprocess(HEADER + """
from torch.utils.checkpoint import checkpoint
block = nn.Sequential(nn.Linear(4, 4), nn.Tanh())
x = torch.randn(3, 4, requires_grad=True)
out = checkpoint(block, x, use_reentrant=False)
out.register_hook(keep("out"))
out.sum().backward()
torch.save(seen, sys.argv[1])
""", str(tmp_path / "seen.pt"))
    assert code == 0
    seen = torch.load(tmp_path / "seen.pt")
    tanhs = [c for c in run.calls(1, run.call_count()) if c.name == "1"]
    assert tanhs and tanhs[0].phase == "forward"
    grad = _slot(run, tanhs[0].seq, "grad")
    np.testing.assert_array_equal(run.values(tanhs[0].seq, grad), seen["out"].numpy())
    # What the hooks cost the memory figure is said; nothing else went wrong.
    assert [w.split(": ", 1)[1][:25] for w in run.meta()["warnings"]] == ["saved-tensor hooks are in"]


def test_backward_on_another_thread(run_inprocess):
    """Grads are written by the call's seq, whichever thread runs the hook."""
    code, run = run_inprocess(HEADER + """
import threading
lin = nn.Linear(3, 2)
out = lin(torch.ones(4, 3))
worker = threading.Thread(target=lambda: out.sum().backward())
worker.start()
worker.join()
""")
    assert code == 0
    seq = _by_name(run)["Linear"].seq
    assert _slot(run, seq, "grad").stats.max == 1.0


def test_nan_made_by_backward_marks_the_call_whose_output_gradient_holds_it(run_inprocess):
    # sqrt(0) is finite going forward; backward makes inf * 0 = NaN in the gradient of
    # lin's output (root's own output gradient, from head, is finite).
    code, run = run_inprocess(HEADER + """
class Root(nn.Module):
    def forward(self, x):
        return torch.sqrt(x * 0) + x

lin, root, head = nn.Linear(3, 3), Root(), nn.Linear(3, 1)
opt = torch.optim.SGD([*lin.parameters(), *head.parameters()], lr=0.1)
out = head(root(lin(torch.ones(2, 3))))
opt.zero_grad(); out.sum().backward(); opt.step()
""")
    assert code == 0
    calls = {c.name: c.seq for c in run.calls(1, run.call_count())}
    assert _slot(run, calls["lin"], "grad").stats.nan == 6
    assert _slot(run, calls["Root"], "grad").stats.nan == 0
    # The optimizer's NaN gradients made NaN parameters: its output holds them.
    assert run.nonfinite_calls() == [calls["lin"], calls["SGD"]]
    assert run.nonfinite_grad(calls["lin"]) and not run.nonfinite_grad(calls["SGD"])
    assert not any(c.nonfinite_output for c in run.calls(1, calls["head"]))
    out = io.StringIO()
    export_jsonl(run, out)
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [c["name"] for c in exported if c.get("nonfinite_grad")] == ["lin"]
