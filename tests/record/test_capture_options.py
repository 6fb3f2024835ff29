"""`tvis run --capture summary` and the module include/exclude patterns."""

from __future__ import annotations

import pytest

from tvis_tui.record.options import CaptureOptions

SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)

class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.0)
    def forward(self, x):
        return self.drop(self.lin(x))

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = Block()
        self.head = nn.Linear(4, 2)
    def forward(self, x):
        return self.head(self.encoder(x))

Net()(torch.ones(3, 4))
"""


def _module_names(run):
    return [c.name for c in run.calls(1, run.call_count()) if c.kind == "module"]


def test_default_records_every_module_with_values(run_inprocess):
    _, run = run_inprocess(SCRIPT)
    assert _module_names(run) == ["Net", "encoder", "encoder.lin", "encoder.drop", "head"]
    out = run.slots(1, "output")[0]
    assert out.has_values and run.meta()["capture"] == "values"


def test_summary_keeps_statistics_but_no_values(run_inprocess):
    _, run = run_inprocess(SCRIPT, capture=CaptureOptions(capture="summary"))
    out = run.slots(1, "output")[0]
    assert out.shape == (3, 2) and out.stats.numel == 6 and sum(out.hist) == 6
    assert not out.has_values and run.values(1, out) is None
    assert run.meta()["capture"] == "summary"


def test_exclude_a_module_drops_its_subtree(run_inprocess):
    _, run = run_inprocess(SCRIPT, capture=CaptureOptions(exclude_modules=("encoder",)))
    assert _module_names(run) == ["Net", "head"]


def test_exclude_by_class_name(run_inprocess):
    _, run = run_inprocess(SCRIPT, capture=CaptureOptions(exclude_modules=("Dropout",)))
    assert "encoder.drop" not in _module_names(run)


def test_include_keeps_only_matching_modules(run_inprocess):
    _, run = run_inprocess(SCRIPT, capture=CaptureOptions(include_modules=("head", "encoder.*")))
    assert _module_names(run) == ["encoder.lin", "encoder.drop", "head"]


GAN = """
import torch
from torch import nn
G = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
D = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 1))
D(G(torch.randn(8, 4)))
D[2](torch.randn(3, 8))  # a part of D called on its own (a checkpointed block's recompute)
"""


@pytest.mark.parametrize("flag, pattern, recorded", [
    ("include_modules", "D", ["D", "0", "1", "2", "2"]),  # a model's name takes all of it
    ("exclude_modules", "G", ["D", "0", "1", "2", "2"]),
    ("exclude_modules", "D", ["G", "0", "1", "2"]),
    ("include_modules", "G.2", ["2"]),  # a layer named as the optimizer names its parameters
    ("include_modules", "Net", ["Net", "encoder", "encoder.lin", "encoder.drop", "head"]),
    ("exclude_modules", "Net", []),
])
def test_a_models_own_name_takes_its_subtree(run_inprocess, flag, pattern, recorded):
    """Sweep S: `--include-modules D` recorded D's call and none of its layers, and
    `--exclude-modules G` left G's layers recorded as top-level calls."""
    script = SCRIPT if pattern == "Net" else GAN
    _, run = run_inprocess(script, capture=CaptureOptions(**{flag: (pattern,)}))
    assert _module_names(run) == recorded


@pytest.mark.parametrize("pattern, recorded", [
    ("encoder", ["encoder", "encoder.lin", "encoder.drop"]),  # an ancestor takes its subtree
    ("encoder.lin", ["encoder.lin"]),
    ("Block", ["encoder"]),
    ("head", ["head"]),
])
def test_include_by_name_needs_no_pattern_for_the_model_itself(run_inprocess, pattern, recorded):
    _, run = run_inprocess(SCRIPT + "Net()(torch.ones(3, 4))\n",
                           capture=CaptureOptions(include_modules=(pattern,)))
    assert _module_names(run) == recorded * 2  # named alike in a second call


def test_unknown_capture_mode_is_refused():
    with pytest.raises(ValueError, match="values, summary"):
        CaptureOptions(capture="everything")


def test_file_patterns_match_relative_path_or_base_name():
    opts = CaptureOptions(exclude_files=("data/*.py",), include_files=("*.py",))
    assert opts.file_recorded("train.py")
    assert not opts.file_recorded("data/loader.py")
    assert CaptureOptions(include_files=("utils.py",)).file_recorded("pkg/utils.py")


GRAD_SCRIPT = SCRIPT.replace("Net()(torch.ones(3, 4))", "Net()(torch.ones(3, 4)).sum().backward()")


def test_activation_grads_recorded_by_default_and_off_with_no_grads(run_inprocess):
    _, run = run_inprocess(GRAD_SCRIPT)
    assert [s.shape for s in run.slots(1, "grad")] == [(3, 2)]
    _, run = run_inprocess(GRAD_SCRIPT, capture=CaptureOptions(grads=False))
    assert run.slots(1, "grad") == [] and run.meta()["grads"] is False


def test_cli_flags_reach_the_run(tmp_path):
    from tvis_tui.cli import main
    from tvis_tui.store import RunReader

    script = tmp_path / "train.py"
    script.write_text(GRAD_SCRIPT)
    code = main(["run", "--out", str(tmp_path / "runs"), "--name", "r", "--capture", "summary",
                 "--no-lines", "--no-grads", "--exclude-modules", "head", str(script)])
    assert code == 0
    with RunReader(tmp_path / "runs" / "r") as run:
        meta = run.meta()
        assert (meta["capture"], meta["lines"], meta["grads"]) == ("summary", False, False)
        assert meta["exclude_modules"] == ["head"]
        assert "head" not in _module_names(run)
