"""Per-sample loss: every standard criterion, module and functional form, read back through
RunReader and `tvis export`; reduced the way the criterion reduces, the per-sample values
give the recorded loss back. Custom criteria get none, and training stays bitwise identical."""

from __future__ import annotations

import io
import json
import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from tvis_tui.export import export_jsonl
from tvis_tui.record import per_sample_loss

from .helpers import assert_same_state, train_plain_and_under_tvis, tvis_cli, tvis_env, write_script

SCRIPT = '''
import sys
import torch
from torch import nn
import torch.nn.functional as F

FORM = sys.argv[1]
torch.manual_seed(0)
model = nn.Linear(4, 12)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
w5 = torch.rand(5) + 0.1


class Focal(nn.modules.loss._Loss):
    """A custom criterion: recorded as a loss call, with no per-sample loss."""
    def forward(self, x, t):
        return F.cross_entropy(x, t) * 2


class MyCE(nn.CrossEntropyLoss):
    def forward(self, x, t):
        return super().forward(x, t) + 0.0


def criteria(h, step):
    """(label, module call, functional call) for every case, on features of h."""
    logits = h[:, :5]                      # (N, C)
    y = torch.randint(5, (8,))
    y_ign = y.clone(); y_ign[1] = -100; y_ign[5] = -100
    seq = h[:, :10].reshape(8, 5, 2)       # (N, C, d1)
    y_seq = torch.randint(5, (8, 2)); y_seq[2] = 3; y_seq[3, 0] = 3
    tokens = h[:, :10].reshape(16, 5)      # a token LM's (N*T, C)
    y_tok = torch.randint(5, (16,)); y_tok[::3] = -100
    probs = torch.sigmoid(h[:, :3]); bits = torch.randint(2, (8, 3)).float()
    reg, goal = h[:, :3], torch.randn(8, 3)
    elem_w = torch.rand(8, 3)
    return [
        ("ce", lambda: nn.CrossEntropyLoss()(logits, y), lambda: F.cross_entropy(logits, y)),
        ("ce_smooth_weight_ignore",
         lambda: nn.CrossEntropyLoss(weight=w5, ignore_index=-100, label_smoothing=0.1)(logits, y_ign),
         lambda: F.cross_entropy(logits, y_ign, w5, label_smoothing=0.1)),
        ("ce_seq_weight_ignore",
         lambda: nn.CrossEntropyLoss(weight=w5, ignore_index=3)(seq, y_seq),
         lambda: F.cross_entropy(seq, y_seq, weight=w5, ignore_index=3)),
        ("ce_tokens", lambda: nn.CrossEntropyLoss()(tokens, y_tok), lambda: F.cross_entropy(tokens, y_tok)),
        ("ce_sum", lambda: nn.CrossEntropyLoss(reduction="sum")(logits, y),
         lambda: F.cross_entropy(logits, y, reduction="sum")),
        ("ce_probs", lambda: nn.CrossEntropyLoss(label_smoothing=0.2)(logits, logits.softmax(1).detach()),
         lambda: F.cross_entropy(logits, logits.softmax(1).detach(), label_smoothing=0.2)),
        ("nll", lambda: nn.NLLLoss(weight=w5)(logits.log_softmax(1), y_ign),
         lambda: F.nll_loss(logits.log_softmax(1), y_ign, weight=w5)),
        ("bce", lambda: nn.BCELoss(weight=torch.rand(3))(probs, bits),
         lambda: F.binary_cross_entropy(probs, bits, weight=torch.rand(3))),
        ("bce_logits", lambda: nn.BCEWithLogitsLoss(pos_weight=torch.rand(3) + 0.5)(reg, bits),
         lambda: F.binary_cross_entropy_with_logits(reg, bits, pos_weight=torch.rand(3) + 0.5)),
        ("mse", lambda: nn.MSELoss()(reg, goal), lambda: F.mse_loss(reg, goal, weight=elem_w)),
        ("l1", lambda: nn.L1Loss()(reg, goal), lambda: F.l1_loss(reg, goal, weight=elem_w)),
        ("smooth_l1", lambda: nn.SmoothL1Loss(beta=0.5)(reg, goal), lambda: F.smooth_l1_loss(reg, goal, beta=0.5)),
        ("huber", lambda: nn.HuberLoss(delta=0.3)(reg, goal), lambda: F.huber_loss(reg, goal, delta=0.3)),
        ("focal", lambda: Focal()(logits, y), lambda: Focal()(logits, y)),
        ("my_ce", lambda: MyCE()(logits, y), lambda: MyCE()(logits, y)),
    ]


for step in range(2):
    h = model(torch.randn(8, 4)).repeat(1, 1)
    losses = []
    for label, module_form, functional_form in criteria(h, step):
        losses.append((module_form if FORM == "module" else functional_form)())
    total = sum(losses)
    opt.zero_grad()
    total.backward()
    opt.step()
    print(f"loss {total.item():.10f}")
if len(sys.argv) > 2:
    torch.save({"params": model.state_dict(), "rng": torch.get_rng_state()}, sys.argv[2])
'''

LABELS = ["ce", "ce_smooth_weight_ignore", "ce_seq_weight_ignore", "ce_tokens", "ce_sum", "ce_probs",
          "nll", "bce", "bce_logits", "mse", "l1", "smooth_l1", "huber", "focal", "my_ce"]
CUSTOM = {"focal", "my_ce"}
SAMPLES = {"ce_tokens": 16}


def _outer_loss_calls(run, step: int) -> list:
    """The step's outermost loss calls, in call order (one per criterion of the script)."""
    s = run.step(step)
    calls = run.calls(s.first_seq, s.last_seq)
    loss_seqs = {c.seq for c in calls if c.phase == "loss"}
    return [c for c in calls if c.phase == "loss" and c.parent not in loss_seqs]


def _reduce(values: np.ndarray, weights: np.ndarray | None, reduction: str) -> float:
    if reduction == "sum":
        return float(values.astype(np.float64).sum())
    if weights is None:
        return float(values.astype(np.float64).mean())
    return float((values.astype(np.float64) * weights).sum() / weights.astype(np.float64).sum())


@pytest.mark.parametrize("chunk", [None, 7], ids=["whole", "chunked"])
@pytest.mark.parametrize("form", ["module", "functional"])
def test_per_sample_values_reproduce_each_recorded_loss(run_inprocess, monkeypatch, form, chunk):
    if chunk is not None:  # a big batch is recomputed a few rows at a time: same values
        monkeypatch.setattr(per_sample_loss, "CHUNK_ELEMENTS", chunk)
    code, run = run_inprocess(SCRIPT, form)
    assert code == 0
    for step in (1, 2):
        calls = _outer_loss_calls(run, step)
        assert len(calls) == len(LABELS), [c.name for c in calls]
        for label, call in zip(LABELS, calls):
            per_sample = {s.path: s for s in run.slots(call.seq, "per_sample")}
            if label in CUSTOM:
                assert per_sample == {}, label
                continue
            assert per_sample["per_sample"].role == "per_sample"
            values = run.values(call.seq, per_sample["per_sample"])
            weight_slot = per_sample.get("per_sample.weight")
            weights = run.values(call.seq, weight_slot) if weight_slot else None
            assert values.shape == (SAMPLES.get(label, 8),), label
            out = run.slots(call.seq, "output")[0]
            recorded = float(run.values(call.seq, out))
            reduction = "sum" if label == "ce_sum" else "mean"
            assert _reduce(values, weights, reduction) == pytest.approx(recorded, rel=1e-5, abs=1e-6), label
        # What the class weights and ignore_index did to the weights of each sample.
        by_label = dict(zip(LABELS, calls))
        tok = {s.path: s for s in run.slots(by_label["ce_tokens"].seq, "per_sample")}
        tok_w = run.values(by_label["ce_tokens"].seq, tok["per_sample.weight"])
        assert list(tok_w[::3]) == [0.0] * 6 and set(np.delete(tok_w, np.s_[::3])) == {1.0}
        assert "per_sample.weight" not in {s.path for s in run.slots(by_label["ce"].seq, "per_sample")}
    steps = run.steps()
    summary = steps[0].extra["per_sample_loss"]  # the step's last standard criterion: huber
    assert summary["seq"] == _outer_loss_calls(run, 1)[LABELS.index("huber")].seq
    assert summary["count"] == 8 and len(summary["worst"]) == 8
    assert [v for _, v in summary["worst"]] == sorted((v for _, v in summary["worst"]), reverse=True)


def test_label_smoothing_and_weights_change_the_per_sample_values(run_inprocess):
    """Each option reaches the recomputation: values agree with torch's own unreduced loss."""
    code, run = run_inprocess(SCRIPT, "module", steps=1)
    assert code == 0
    calls = dict(zip(LABELS, _outer_loss_calls(run, 1)))
    call = calls["ce_smooth_weight_ignore"]
    inputs = run.slots(call.seq, "input")
    logits = torch.from_numpy(run.values(call.seq, inputs[0]).copy())
    target = torch.from_numpy(run.values(call.seq, inputs[1]).copy())
    slots = {s.path: s for s in run.slots(call.seq, "per_sample")}
    values = run.values(call.seq, slots["per_sample"])
    weights = run.values(call.seq, slots["per_sample.weight"])
    torch.manual_seed(0)
    torch.nn.Linear(4, 12)
    w5 = torch.rand(5) + 0.1  # the script's class weights (same seed, same draws)
    unreduced = torch.nn.functional.cross_entropy(logits, target, weight=w5, label_smoothing=0.1,
                                                  reduction="none")
    kept = target != -100
    expected_w = torch.where(kept, w5[target.clamp(min=0)], torch.zeros(()))
    np.testing.assert_allclose(weights, expected_w.numpy(), rtol=1e-6)
    expected = torch.where(kept, unreduced / expected_w.clamp(min=1e-12), torch.zeros(()))
    np.testing.assert_allclose(values, expected.numpy(), rtol=1e-5, atol=1e-6)
    assert values[1] == 0.0 and weights[1] == 0.0  # ignored


def test_export_jsonl_shows_per_sample_slots_and_step_summary(run_inprocess):
    code, run = run_inprocess(SCRIPT, "functional", steps=1)
    assert code == 0
    out = io.StringIO()
    export_jsonl(run, out)
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    step = next(r for r in records if r["record"] == "step")
    assert step["extra"]["per_sample_loss"]["count"] == 8
    roles = [s["role"] for r in records if r["record"] == "call" for s in r["slots"]]
    assert roles.count("per_sample") >= len(LABELS) - len(CUSTOM)
    ce = next(r for r in records if r["record"] == "call" and r["name"] == "F.cross_entropy")
    per_sample = next(s for s in ce["slots"] if s["path"] == "per_sample")
    output = next(s for s in ce["slots"] if s["role"] == "output")
    assert len(per_sample["values"]) == 8
    assert np.mean(per_sample["values"]) == pytest.approx(output["stats"]["mean"], rel=1e-5)


def test_training_stays_bitwise_identical_with_per_sample_loss(tmp_path):
    script = write_script(tmp_path, SCRIPT)
    for form in ("module", "functional"):
        train_plain_and_under_tvis(tmp_path, str(script), [form, f"plain-{form}.pt"],
                                   [form, f"tvis-{form}.pt"], flags=("--no-lines",), out=f"runs-{form}")
        assert_same_state(tmp_path / f"plain-{form}.pt", tmp_path / f"tvis-{form}.pt")


def test_the_worst_samples_leave_out_ignored_ones_and_put_a_nan_loss_first():
    values = torch.tensor([1.5, float("nan"), 2.0, 0.0, 0.5])
    weights = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0])  # position 3: ignore_index
    summary = per_sample_loss.step_summary(7, per_sample_loss.PerSample(values, weights, "mean"))
    worst = summary["worst"]
    assert [i for i, _ in worst] == [1, 2, 0, 4] and math.isnan(worst[0][1])
    assert [v for _, v in worst[1:]] == [2.0, 1.5, 0.5]
    unweighted = per_sample_loss.step_summary(7, per_sample_loss.PerSample(values[[0, 2]], None, "sum"))
    assert unweighted["worst"] == [[1, 2.0], [0, 1.5]] and unweighted["count"] == 2


def test_a_summed_loss_leaves_out_the_samples_it_ignores_too(run_inprocess):
    """With reduction="sum" the weights were dropped, and a sample whose every position
    was ignore_index ranked among the worst with a loss of 0 (sweep Q)."""
    code, run = run_inprocess("""
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
m = nn.Linear(2, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
out = m(torch.randn(3, 5, 2)).transpose(1, 2)          # N=3, C=4, T=5
tgt = torch.randint(0, 4, (3, 5)); tgt[1] = -1          # sample 1: every position ignored
loss = F.nll_loss(F.log_softmax(out, 1), tgt, ignore_index=-1, reduction="sum")
opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    summary = run.step(1).extra["per_sample_loss"]
    assert sorted(i for i, _ in summary["worst"]) == [0, 2] and summary["count"] == 3
    call = run.call(summary["seq"])
    slots = {s.path: s for s in run.slots(call.seq, "per_sample")}
    values = run.values(call.seq, slots["per_sample"])
    assert list(run.values(call.seq, slots["per_sample.weight"])) == [5, 0, 5]
    assert float(values.sum()) == pytest.approx(run.step(1).loss, rel=1e-6) and values[1] == 0


def test_the_step_view_reads_every_samples_loss_back(run_inprocess):
    from tvis_tui.store.step_details import sample_losses

    code, run = run_inprocess(SCRIPT, "functional", steps=1)
    assert code == 0
    step = run.steps()[0]
    summary = step.extra["per_sample_loss"]
    losses, worst, count = sample_losses(run, step)
    assert sorted(losses) == list(range(summary["count"])) and count == summary["count"]
    assert worst == {pos for pos, _ in summary["worst"]}
    assert all(losses[pos] == pytest.approx(value) for pos, value in summary["worst"])


def test_a_warning_the_loss_raises_shows_once_as_under_python(tmp_path):
    # Recomputing the loss must not make python forget the warnings it showed once
    # (changing the warning filters would): here MSELoss's broadcasting warning, each step.
    write_script(tmp_path, """
import torch
from torch import nn
lin = nn.Linear(5, 4)
for _ in range(3):
    loss = nn.MSELoss()(lin(torch.ones(6, 5))[:, :1], torch.ones(6))
    loss.backward()
""")
    plain = subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=tvis_env(),
                           capture_output=True, text=True, timeout=60)
    traced = tvis_cli("run", "train.py", cwd=tmp_path)
    assert traced.returncode == plain.returncode == 0, traced.stderr
    assert plain.stderr.count("UserWarning") == traced.stderr.count("UserWarning") == 1


def test_a_validation_loss_after_the_training_one_does_not_take_its_place(run_inprocess):
    code, run = run_inprocess("""
import torch
import torch.nn.functional as F
torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randint(0, 3, (16,))
loss = F.cross_entropy(m(x), y)
opt.zero_grad(); loss.backward(); opt.step()
with torch.no_grad():  # a validation batch of another size, in the same loop pass
    F.cross_entropy(m(torch.randn(20, 4)), torch.randint(0, 3, (20,)))
""")
    assert code == 0
    summary = run.steps()[0].extra["per_sample_loss"]
    train_ce = next(c for c in run.calls(1, run.call_count()) if c.name == "F.cross_entropy")
    assert (summary["seq"], summary["count"], summary["trains"]) == (train_ce.seq, 16, True)


@pytest.mark.parametrize("loss", ["nn.MSELoss()(pred, y)", "F.l1_loss(pred, y, reduction='sum')"])
def test_a_loss_that_compares_every_prediction_with_every_target_says_so(run_inprocess, loss):
    # Predictions (8, 1) against targets (8,): an (8, 8) loss. Its row means would read as
    # per-sample losses, all alike, hiding the bug (sweep N).
    code, run = run_inprocess(f"""
import warnings
import torch
from torch import nn
import torch.nn.functional as F
warnings.simplefilter("ignore")
torch.manual_seed(0)
model = nn.Linear(5, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
pred, y = model(torch.randn(8, 5)), torch.randn(8)
{loss}.backward()
opt.step()
""")
    assert code == 0
    summary = run.steps()[0].extra["per_sample_loss"]
    assert summary["broadcast"] == {"input": [8, 1], "target": [8], "shape": [8, 8]} and summary["trains"]
    assert "count" not in summary and not run.slots(summary["seq"], "per_sample")


def test_a_target_broadcast_to_the_predictions_shape_still_has_a_loss_per_sample(run_inprocess):
    code, run = run_inprocess("""
import torch
import torch.nn.functional as F
pred = torch.tensor([1.0, 2.0, 4.0], requires_grad=True)
F.mse_loss(pred, torch.tensor([2.0])).backward()  # every sample against one constant
""")
    assert code == 0
    summary = run.steps()[0].extra["per_sample_loss"]
    values = run.values(summary["seq"], run.slots(summary["seq"], "per_sample")[0])
    assert "broadcast" not in summary and values.tolist() == [1.0, 0.0, 4.0]


@pytest.mark.parametrize("loss, fed", [
    ("F.cross_entropy(logits.softmax(1), y)", "softmax"),  # softmax twice: the loss barely moves
    ("F.nll_loss(logits.softmax(1), y)", "softmax"),  # softmax where log_softmax belongs
    ("nn.CrossEntropyLoss()(logits, y)", None),
    ("F.nll_loss(logits.log_softmax(1), y)", None),
    ("F.cross_entropy(logits, logits.detach().softmax(1))", None),  # probability targets
    # A model ending in nn.Sigmoid before BCEWithLogitsLoss: scores squeezed into (0.27, 0.73) (sweep O).
    ("nn.BCEWithLogitsLoss()(logits.sigmoid(), (y[:, None] == torch.arange(4)).float())", "sigmoid"),
    ("nn.BCEWithLogitsLoss()(logits, (y[:, None] == torch.arange(4)).float())", None),
    # Logits that all happen to lie in (0, 1): too few scores to say.
    ("F.binary_cross_entropy_with_logits(logits.sigmoid()[:4], (y[:4, None] == torch.arange(4)).float())", None),
])
def test_a_loss_fed_probabilities_where_it_wants_logits_says_so(run_inprocess, loss, fed):
    code, run = run_inprocess(f"""
import torch
from torch import nn
import torch.nn.functional as F
torch.manual_seed(0)
model = nn.Linear(5, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
logits, y = model(torch.randn(8, 5)), torch.randint(0, 4, (8,))
{loss}.backward()
opt.step()
""")
    assert code == 0
    summary = run.steps()[0].extra["per_sample_loss"]
    assert summary.get("probabilities", False) is (fed is not None) and summary.get("probabilities_from") == fed
