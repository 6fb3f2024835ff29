"""Which phase a call is filed under, and so which of a step's phase times it counts in."""

from __future__ import annotations

from tvis_tui.record.options import CaptureOptions

SCRIPT = """
import time
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, 8), nn.ReLU())
        with torch.no_grad():  # the usual probe for the head's input size
            n = self.features(torch.zeros(1, 4)).shape[1]
        self.head = nn.Linear(n, 3)

    def forward(self, x):
        return self.head(self.features(x))

@torch.no_grad()
def evaluate(model, x, y):
    return nn.CrossEntropyLoss()(model(x), y).item()

torch.manual_seed(0)
model = Net()
frozen = nn.Linear(4, 4).requires_grad_(False)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
criterion = nn.CrossEntropyLoss()
x, y = torch.randn(6, 4), torch.randint(3, (6,))
for step in range(2):
    with torch.no_grad():
        x_in = frozen(x)  # a frozen part, run without autograd
    loss = criterion(model(x_in), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    evaluate(model, x, y)
    with torch.inference_mode():
        torch.nn.functional.cross_entropy(model(x), y)
"""


def _top_level(run, step):
    return [(c.phase, c.name) for c in run.calls(1, run.call_count()) if c.step == step and c.depth == 0]


def test_calls_made_with_autograd_off_are_the_no_grad_phase(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    assert _top_level(run, 2) == [
        ("no_grad", "Linear"),  # the frozen layer
        ("forward", "Net"),
        ("loss", "CrossEntropyLoss"),
        ("backward", "backward"),
        ("optimizer", "SGD"),
        ("no_grad", "evaluate"),  # a @torch.no_grad() user function
        ("no_grad", "Net"),  # inference_mode
        ("no_grad", "F.cross_entropy"),
    ]
    calls = run.calls(1, run.call_count())
    evaluate = next(c for c in calls if c.step == 2 and c.name == "evaluate")
    inside = [(c.phase, c.name) for c in calls if c.parent == evaluate.seq]
    assert inside == [("no_grad", "Net"), ("no_grad", "CrossEntropyLoss")]
    # A criterion's own F.cross_entropy is not recorded again as a call inside it.
    criteria = {c.seq for c in calls if c.name == "CrossEntropyLoss"}
    assert not [c for c in calls if c.parent in criteria]


def test_a_probe_while_building_the_model_is_not_the_first_steps_forward(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    first = _top_level(run, 1)
    # The probe in Net.__init__ (no Net call yet), named as Net's forward names it later.
    assert first[0] == ("no_grad", "features")
    one, two = run.steps()
    # The probe, the frozen layer and the evaluations are timed apart from the forward.
    assert one.phase_ns["no_grad"] > 0 and two.phase_ns["no_grad"] > 0
    calls = run.calls(1, run.call_count())
    for step in (one, two):
        forward = sum(c.duration_ns for c in calls
                      if c.step == step.step and c.depth == 0 and c.phase == "forward")
        assert step.phase_ns["forward"] == forward
    assert sum(one.phase_ns.values()) == one.extra["wall_ns"]


def test_no_grad_inside_a_model_call_stays_in_its_forward(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.target = nn.Linear(4, 4)
        self.online = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            t = self.target(x)
        return (self.online(x) - t).pow(2).mean()

model = Net()
opt = torch.optim.SGD(model.online.parameters(), lr=0.1)
model(torch.randn(2, 4)).backward()
opt.step()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert [(c.phase, c.name) for c in run.calls(1, run.call_count()) if c.kind == "module"] == \
        [("forward", "Net"), ("forward", "target"), ("forward", "online")]


def test_per_sample_loss_still_comes_from_the_training_loss(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    step = run.steps()[1]
    assert step.extra["per_sample_loss"]["trains"] is True
    train_loss = next(c for c in run.calls(1, run.call_count())
                      if c.step == 2 and c.phase == "loss" and c.name == "CrossEntropyLoss")
    assert step.extra["per_sample_loss"]["seq"] == train_loss.seq


def _phases(run, **where):
    return [(c.phase, c.name) for c in run.calls(1, run.call_count())
            if all(getattr(c, k) == v for k, v in where.items())]


def test_grad_turned_back_on_inside_a_no_grad_function_is_a_forward(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

model = nn.Sequential(nn.Linear(5, 3))
opt = torch.optim.SGD(model.parameters(), lr=0.1)

@torch.no_grad()
def adapt_and_predict(x):  # test-time adaptation: a training step inside
    with torch.enable_grad():
        logits = model(x)
        entropy = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
        entropy.backward()
    opt.step()
    opt.zero_grad()
    return model(x).argmax(-1)

for _ in range(2):
    adapt_and_predict(torch.randn(4, 5))
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert _phases(run, depth=1, kind="module") == [("forward", "Sequential"), ("no_grad", "Sequential")] * 2
    complete = [step for step in run.steps() if step.complete]
    assert len(complete) == 2 and all(step.phase_ns.get("forward", 0) > 0 for step in complete)


def test_a_checkpointed_model_evaluated_under_no_grad_is_no_grad(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

blocks = nn.ModuleList(nn.Linear(6, 6) for _ in range(2))
head = nn.Linear(6, 2)
opt = torch.optim.SGD([*blocks.parameters(), *head.parameters()], lr=0.1)

def run(x):
    h = x
    for b in blocks:
        h = checkpoint(b, h, use_reentrant=True)
    return head(h)

for _ in range(2):
    run(torch.randn(4, 6, requires_grad=True)).sum().backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        run(torch.randn(4, 6))
""", capture=CaptureOptions(lines=False))
    assert code == 0
    # From the second step `run` (a loop of its own, called by the training loop) is a call.
    calls = run.calls(1, run.call_count())
    runs = [c for c in calls if c.step == 2 and c.kind == "function"]
    assert [(c.phase, c.name) for c in runs] == [("forward", "run"), ("no_grad", "run")]
    top = [(c.phase, c.name) for c in calls if c.parent in {r.seq for r in runs} and c.kind == "module"]
    assert top == [("forward", "blocks.0"), ("forward", "blocks.1"), ("forward", "Linear"),
                   ("no_grad", "blocks.0"), ("no_grad", "blocks.1"), ("no_grad", "Linear")]


def test_a_criterion_inside_a_model_evaluated_under_no_grad_is_no_grad(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class WithLoss(nn.Module):  # computes its loss in forward, as Hugging Face models do
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.ce = nn.CrossEntropyLoss()
    def forward(self, x, y):
        return self.ce(self.fc(x), y)

model = WithLoss()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(5, 4), torch.randint(3, (5,))
for _ in range(2):
    model(x, y).backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        model(x, y)
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert _phases(run, step=2) == [
        ("forward", "WithLoss"), ("forward", "fc"), ("loss", "ce"), ("backward", "backward"),
        ("optimizer", "SGD"), ("no_grad", "WithLoss"), ("no_grad", "fc"), ("no_grad", "ce")]


def test_a_functional_loss_inside_a_criterions_helper_is_not_recorded_again(run_inprocess):
    code, run = run_inprocess("""
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules.loss import _Loss

def focal(logits, y):
    ce = F.cross_entropy(logits, y, reduction="none")
    return ((1 - torch.exp(-ce)) ** 2 * ce).mean()

class FocalLoss(_Loss):
    def forward(self, logits, y):
        return focal(logits, y)

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(5, 4), torch.randint(3, (5,))
for _ in range(2):
    FocalLoss()(model(x), y).backward()
    opt.step()
    opt.zero_grad()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert _phases(run, step=2) == [("forward", "Linear"), ("loss", "FocalLoss"), ("loss", "focal"),
                                    ("backward", "backward"), ("optimizer", "SGD")]


def test_per_sample_loss_is_not_taken_from_a_metric_under_no_grad(run_inprocess):
    code, run = run_inprocess("""
import torch
import torch.nn.functional as F
from torch import nn

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(5, 4), torch.randint(3, (5,))
for _ in range(2):
    logits = model(x)
    loss = F.cross_entropy(logits, y)
    loss.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        smoothed = F.cross_entropy(logits, y, label_smoothing=0.1)  # a metric on live logits
""", capture=CaptureOptions(lines=False))
    assert code == 0
    loss_call = next(c for c in run.calls(1, run.call_count()) if c.step == 2 and c.phase == "loss")
    assert run.steps()[1].extra["per_sample_loss"]["seq"] == loss_call.seq


def test_library_code_calling_user_functions_back_is_not_a_call_of_the_loop(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

def ema_avg(averaged, current, n):
    return 0.9 * averaged + 0.1 * current

def reset(m):
    if isinstance(m, nn.Linear):
        nn.init.zeros_(m.bias)

model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 2)))
ema = AveragedModel(model, avg_fn=ema_avg)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(2):
    model.apply(reset)
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
    opt.zero_grad()
    ema.update_parameters(model)
""", capture=CaptureOptions(lines=False))
    assert code == 0
    assert not [c for c in run.calls(1, run.call_count()) if c.name in ("ema_avg", "reset")]


def test_a_loss_module_of_the_scripts_own_is_the_loss_phase(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

class FocalLoss(nn.Module):  # not a torch _Loss: its name, and no parameters, say what it is
    def forward(self, logits, target):
        ce = nn.functional.cross_entropy(logits, target, reduction="none")
        return ((1 - torch.exp(-ce)) ** 2 * ce).mean()

model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
FocalLoss()(model(torch.randn(6, 4)), torch.randint(3, (6,))).backward()
opt.step()
""", capture=CaptureOptions(lines=False))
    assert code == 0
    phases = [(c.name, c.phase) for c in run.calls(1, run.call_count()) if c.kind != "backward"]
    assert phases == [("Linear", "forward"), ("FocalLoss", "loss"), ("F.cross_entropy", "loss"),
                      ("SGD", "optimizer")]
    assert run.steps()[0].phase_ns["loss"] > 0


LOOP_HELPERS = """
import torch
from torch import nn

def grad_norm(model):
    return torch.sqrt(sum((p.grad ** 2).sum() for p in model.parameters()))

def log(step, loss):
    return f"{step} {loss:.3f}"

def square(t):
    return t * t

def micro_step(model, x, y):
    loss = nn.functional.cross_entropy(model(x), y) / 2
    loss.backward()

def train_step(model, opt, x, y):
    x = square(x)  # a helper before the model: the wrapper is still the forward
    opt.zero_grad()
    micro_step(model, x[:3], y[:3])
    micro_step(model, x[3:], y[3:])  # after a backward(): a forward all the same
    grad_norm(model)
    opt.step()

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(6, 4), torch.randint(2, (6,))
for step in range(2):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    grad_norm(model)
    opt.step()
    log(step, loss.item())
for step in range(2):
    train_step(model, opt, x, y)
"""


def test_a_helper_the_loop_calls_takes_the_phase_of_what_it_runs_or_follows(run_inprocess):
    code, run = run_inprocess(LOOP_HELPERS)
    assert code == 0
    # A helper after backward() is in the backward phase, one after the step in the
    # optimizer's: neither starts a forward span between them.
    assert _top_level(run, 2) == [
        ("forward", "Sequential"),
        ("loss", "F.cross_entropy"),
        ("backward", "backward"),
        ("backward", "grad_norm"),
        ("optimizer", "SGD"),
        ("optimizer", "log"),
    ]
    spans = [(s.phase, s.last_seq - s.first_seq + 1) for s in run.phases(2)]
    assert spans == [("forward", 4), ("loss", 1), ("backward", 2), ("optimizer", 2)]


def test_a_wrapper_and_the_helpers_in_it_take_the_phase_of_the_first_call_inside(run_inprocess):
    code, run = run_inprocess(LOOP_HELPERS)
    assert code == 0
    calls = [c for c in run.calls(1, run.call_count()) if c.step == 4 and c.kind == "function"]
    assert [(c.phase, c.name) for c in calls] == [
        ("forward", "train_step"),
        ("forward", "square"),  # waited for the model call after it
        ("forward", "micro_step"),
        ("loss", "F.cross_entropy"),
        ("forward", "micro_step"),  # its first call is the model's
        ("loss", "F.cross_entropy"),
        ("backward", "grad_norm"),
    ]
    assert all(c.duration_ns is not None for c in calls)
    spans = run.phases(4)
    assert spans[0].phase == "forward" and spans[0].first_seq == calls[0].seq
    every = {seq for s in spans for seq in range(s.first_seq, s.last_seq + 1)}
    assert every == {c.seq for c in run.calls(1, run.call_count()) if c.step == 4}


def test_a_helper_that_fails_after_backward_is_listed_with_its_error(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

def check(model):
    raise ValueError("gradient check failed")

model = nn.Linear(4, 2)
for i in range(2):
    nn.functional.mse_loss(model(torch.randn(3, 4)), torch.zeros(3, 2)).backward()
    if i == 1:
        check(model)
""")
    assert code == 1
    failed = run.calls(1, run.call_count())[-1]
    assert (failed.name, failed.phase) == ("check", "backward")
    assert "gradient check failed" in failed.error
    assert run.phases(2)[-1].phase == "backward" and run.phases(2)[-1].last_seq == failed.seq


def test_many_helpers_before_any_model_call_are_not_held_back(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn

def clean(i):
    return i * 2

def prepare():
    return [clean(i) for i in range(600)]

def step(model, x):
    prepare()
    model(x).sum().backward()

model = nn.Linear(4, 2)
for i in range(2):
    step(model, torch.randn(3, 4))
""")
    assert code == 0
    calls = [c for c in run.calls(1, run.call_count()) if c.step == 2]
    assert len(calls) > 600 and all(c.duration_ns is not None for c in calls)
    listed = {seq for s in run.phases(2) for seq in range(s.first_seq, s.last_seq + 1)}
    assert listed == {c.seq for c in calls}


def test_a_helper_after_an_evaluation_is_not_part_of_it(run_inprocess):
    """nanoGPT's loop: `estimate_loss()` under no_grad, then `get_batch('train')` with
    autograd on read as no_grad in the steps that evaluated, forward in the others
    (sweep U)."""
    code, run = run_inprocess("""
import torch
from torch import nn

data = torch.randn(64, 4)

def get_batch():
    i = torch.randint(0, 60, (4,))
    return data[i], data[i].sum(1, keepdim=True)

@torch.no_grad()
def estimate_loss(model):
    x, y = get_batch()
    return nn.functional.mse_loss(model(x), y).item()

model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for it in range(3):
    if it % 2 == 0:
        estimate_loss(model)
    x, y = get_batch()
    loss = nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    batches = [(c.step, c.phase) for c in run.calls(1, run.call_count()) if c.name == "get_batch" and c.depth == 0]
    assert batches == [(1, "forward"), (2, "forward"), (3, "forward")]


def test_a_train_step_that_starts_with_a_frozen_encoder_is_forward(run_inprocess):
    """Its first call is under no_grad, but the function runs with autograd on: it is no
    evaluation (review)."""
    code, run = run_inprocess("""
import torch
from torch import nn

encoder, head = nn.Linear(4, 4), nn.Linear(4, 1)
opt = torch.optim.SGD(head.parameters(), lr=0.1)

def train_step(x):
    with torch.no_grad():
        z = encoder(x)
    loss = head(z).pow(2).mean()
    opt.zero_grad(); loss.backward(); opt.step()

for step in range(2):
    train_step(torch.randn(3, 4))
""")
    assert code == 0
    assert [(c.phase, c.name) for c in run.calls(1, run.call_count()) if c.step == 2][:3] == [
        ("forward", "train_step"), ("no_grad", "encoder"), ("forward", "head")]


def test_calls_from_another_thread_leave_every_call_in_one_span(run_inprocess):
    """A helper waiting for its phase while another thread's call is listed: the spans
    overlapped, and the helper fell out of them (review)."""
    code, run = run_inprocess("""
import threading, torch
from torch import nn
model, probe = nn.Linear(4, 2), nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
go, done = threading.Event(), threading.Event()

def background():
    for grad in (False, True, False):
        go.wait(); go.clear()
        with torch.set_grad_enabled(grad):
            probe(torch.randn(1, 4))
        done.set()

threading.Thread(target=background, daemon=True).start()

def train_step(x):
    go.set(); done.wait(); done.clear()
    loss = model(x).sum()
    opt.zero_grad(); loss.backward(); opt.step()

for step in range(3):
    train_step(torch.randn(3, 4))
""")
    assert code == 0
    for step in (1, 2, 3):
        seqs = [c.seq for c in run.calls(1, run.call_count()) if c.step == step]
        listed = [seq for s in run.phases(step) for seq in range(s.first_seq, s.last_seq + 1)]
        assert sorted(listed) == seqs  # each call once: no overlap, none left out
