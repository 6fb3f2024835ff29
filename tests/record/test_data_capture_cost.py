"""What the data capture leaves out to stay cheap: only the first samples of a batch in
detail (all indices kept), one description per unchanged tensor, no sample histograms."""

from __future__ import annotations

import numpy as np

import torch

from tvis_tui.record.images import image_view
from tvis_tui.record.samples import DETAILED_SAMPLES
from tvis_tui.store import samples as S

SCRIPT = """
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset
torch.manual_seed(0)

class Compose:
    def __init__(self, transforms):
        self.transforms = transforms
    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

class Keep:
    def __call__(self, x):
        return x

class Scale:
    def __call__(self, x):
        return x * 2.0

class Tok:
    def encode(self, text):
        return [ord(c) - 97 for c in text]
    def decode(self, ids):
        return "".join(chr(i + 97) for i in ids)

class Data(Dataset):
    def __init__(self):
        self.x = torch.randn(24, 3, 8, 8)
        self.transform = Compose([Keep(), Scale()])
        self.tok = Tok()
    def __len__(self):
        return 24
    def __getitem__(self, i):
        self.tok.encode("ab")
        return self.transform(self.x[i]), i % 2

loader = DataLoader(Data(), batch_size=12, shuffle=True)
model = nn.Sequential(nn.Flatten(), nn.Linear(192, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in loader:
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""


def test_first_samples_in_detail_all_indices_kept(run_inprocess):
    code, run = run_inprocess(SCRIPT)
    assert code == 0
    assert run.meta()["data_detail_samples"] == DETAILED_SAMPLES == 8
    batches = S.batches(run)
    assert len(batches) == 2
    for batch in batches:
        samples = S.samples(run, batch["seq"])
        assert batch["size"] == 12 and batch["detailed"] == 8
        assert [s["index"] for s in samples] == batch["indices"] and len(set(batch["indices"])) == 12
        for s in samples[:8]:
            entry = s["transforms"][0]
            assert [st["name"] for st in entry["stages"]] == ["0:Keep", "1:Scale"]
            assert s["tokens"][0]["ids"] == [0, 1]
            raw, kept, scaled = (S.array(v) for v in
                                 (entry["input"], entry["stages"][0]["value"], entry["stages"][1]["value"]))
            np.testing.assert_array_equal(kept, raw)  # Keep returned its input: same description
            np.testing.assert_allclose(scaled, raw * 2.0, rtol=1e-6)
            # Drawn from the statistics' min/max: the same pixels as computing them anew.
            fresh = image_view(torch.from_numpy(scaled.copy()))
            np.testing.assert_array_equal(S.image(entry["stages"][1]["value"]), fresh.pixels)
            item = s["item"]["items"][0][1]
            assert item == entry["stages"][1]["value"]  # the item is the pipeline's output
            assert "hist" not in item and item["stats"]["numel"] == 192
        for s in samples[8:]:
            assert set(s) == {"position", "index"}
