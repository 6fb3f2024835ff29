"""Nested tensors (torch.nested; nn.TransformerEncoder's fast path in eval mode passes them
between its layers) are summarized over their components' values, ragged sizes as -1."""

from __future__ import annotations

import torch

from tvis_tui.record.stats import shape_of, summarize
from tvis_tui.store.lines import LineShape
from tvis_tui.widgets.format import shape as shape_text


def _parts() -> list[torch.Tensor]:
    return [torch.arange(12.0).reshape(3, 4), -torch.arange(20.0).reshape(5, 4)]


def test_nested_tensors_summarize_their_components_values():
    flat = torch.cat([p.reshape(-1) for p in _parts()])
    for layout in (torch.strided, torch.jagged):
        nested = torch.nested.nested_tensor(_parts(), layout=layout)
        summary = summarize(nested, 1 << 20)
        assert summary.shape == (2, -1, 4)
        assert summary.stats.numel == 32 and summary.stats.zeros == 2
        assert (summary.stats.min, summary.stats.max) == (-19.0, 11.0)
        assert summary.stats.mean == flat.mean().item()
        assert sum(summary.hist) == 32
        assert summary.values is None  # ragged rows have no grid to show them in


def test_a_dimension_the_components_share_keeps_its_size():
    same = torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(3, 4)])
    assert shape_of(same) == (2, 3, 4)
    assert shape_of(torch.nested.nested_tensor([])) == (0,)
    assert shape_text((2, -1, 4)) == "[2, ragged, 4]"


ENCODER = """
import torch
from torch import nn

def jagged():
    nt = torch.nested.nested_tensor([torch.ones(3, 4), torch.ones(5, 4)], layout=torch.jagged)
    return nt

torch.manual_seed(0)
encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), 2)
opt = torch.optim.SGD(encoder.parameters(), lr=0.1)
x = torch.randn(3, 5, 8)
pad = torch.tensor([[False] * 5, [False] * 3 + [True] * 2, [False] * 2 + [True] * 3])
for step in range(2):
    encoder.train()
    encoder(x).pow(2).mean().backward()
    opt.step()
    opt.zero_grad()
    encoder.eval()
    with torch.no_grad():
        encoder(x, src_key_padding_mask=pad)  # the fast path: nested between the layers
    jagged()
"""


def test_the_transformer_fast_path_is_recorded_without_warnings(run_inprocess, tmp_path):
    code, run = run_inprocess(ENCODER)
    assert code == 0
    assert not [w for w in run.meta().get("warnings", []) if "not summarized" in w]
    calls = run.calls(1, run.call_count())
    layer = next(c for c in calls if c.step == 2 and c.phase == "no_grad" and c.name == "layers.0")
    first = run.slots(layer.seq, "input")[0]
    assert first.shape == (3, -1, 8)
    assert first.stats.numel == (5 + 3 + 2) * 8  # the padded positions are not in it
    shapes = run.line_shapes(str(tmp_path / "train.py"), 2)
    assert shapes[6] == [LineShape("nt", (2, -1, 4), "float32", 1)]
