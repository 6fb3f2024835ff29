"""`tvis vram` on PyTorch Lightning scripts: the LightningModule is the model, and
`Trainer.fit` is its training loop (sweep S: "no model found in the script")."""

from __future__ import annotations

import pytest

from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings

MODEL = """\
        class Lit({base}):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
            def forward(self, x):
                return self.net(x)
"""

LIGHTNING = """\
        import torch, torch.nn as nn, torch.nn.functional as F
        {imports}
        from torch.utils.data import DataLoader, TensorDataset

""" + MODEL + """\
            def training_step(self, batch, batch_idx):
                x, y = batch
                loss = F.cross_entropy(self(x), y)
                self.log("loss", loss)
                return loss
            def configure_optimizers(self):
                {configure}

        if __name__ == "__main__":
            ds = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
            trainer = {trainer}({trainer_args})
            trainer.fit(Lit(), DataLoader(ds, batch_size=256, shuffle=True))
"""

PLAIN = """\
        import torch, torch.nn as nn, torch.nn.functional as F
        from torch.utils.data import DataLoader, TensorDataset

""" + MODEL.format(base="nn.Module") + """\

        if __name__ == "__main__":
            ds = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
            model = Lit()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
            for x, y in DataLoader(ds, batch_size=256, shuffle=True):
                {autocast}loss = F.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
"""

PARAMS = 512 * 1024 + 1024 + 1024 * 10 + 10


def lightning(write, imports: str = "import pytorch_lightning as pl", base: str = "pl.LightningModule",
              trainer: str = "pl.Trainer", trainer_args: str = "max_epochs=1",
              configure: str = "return torch.optim.AdamW(self.parameters(), lr=1e-3)") -> str:
    return write("lit.py", LIGHTNING.format(imports=imports, base=base, trainer=trainer,
                                            trainer_args=trainer_args, configure=configure))


@pytest.mark.parametrize("imports, base, trainer", [
    ("import pytorch_lightning as pl", "pl.LightningModule", "pl.Trainer"),
    ("import lightning as L", "L.LightningModule", "L.Trainer"),
    ("from lightning.pytorch import LightningModule, Trainer", "LightningModule", "Trainer"),
])
def test_a_lightning_script_is_estimated_as_its_plain_loop_is(write, imports, base, trainer):
    est = estimate(lightning(write, imports, base, trainer))
    plain = estimate(write("plain.py", PLAIN.format(autocast="")))
    assert est.facts.no_model is None and est.confidence == "high", est.assumptions
    assert est.facts.model.kind == "Lit" and est.facts.inputs[0].shape == (256, 512)
    assert est.breakdown == plain.breakdown
    assert f"model Lit: {PARAMS:,} parameters (line 22)" in est.read
    assert "optimizer AdamW (line 17)" in est.read


def test_the_trainers_mixed_precision_is_the_scripts_autocast(write):
    big = Settings(batch_size=65536)  # activations make the peak
    est = estimate(lightning(write, trainer_args='precision="bf16-mixed"'), big)
    plain = estimate(write("plain.py", PLAIN.format(
        autocast='with torch.autocast("cuda", dtype=torch.bfloat16):\n                    ')), big)
    assert est.facts.autocast == "bfloat16" and "autocast bfloat16 (line 21)" in est.read
    assert est.breakdown == plain.breakdown and est.phase == plain.phase == "backward"
    assert est.peak_bytes < estimate(lightning(write), big).peak_bytes
    fp16 = estimate(lightning(write, trainer_args="precision=16"))
    assert fp16.facts.autocast == "float16" and "GradScaler (line 21)" in fp16.read


@pytest.mark.parametrize("args, read, parameters", [
    ('precision="bf16-true"', "parameters in bfloat16 (line 21)", PARAMS * 2),
    ("accumulate_grad_batches=4", "gradient accumulation over 4 steps (line 21)", PARAMS * 4),
    ('strategy="fsdp", devices=4', "data parallel fsdp (line 21)", PARAMS * 4 // 4),
    ('strategy="fsdp", devices=2, num_nodes=2', "data parallel fsdp (line 21)", PARAMS * 4 // 4),
    ('strategy="ddp", devices=8', "data parallel ddp (line 21)", PARAMS * 4),
    ("strategy=FSDPStrategy(), devices=[0, 1]", "data parallel fsdp (line 21)", PARAMS * 4 // 2),
    ("devices=8", "data parallel ddp (line 21)", PARAMS * 4),  # Lightning's default for several
    ('precision="64-true"', "parameters in float64 (line 21)", PARAMS * 8),
])
def test_the_trainers_arguments_are_read(write, args, read, parameters):
    imports = "import pytorch_lightning as pl\n        from pytorch_lightning.strategies import FSDPStrategy"
    est = estimate(write("lit.py", LIGHTNING.format(
        imports=imports, base="pl.LightningModule", trainer="pl.Trainer", trainer_args=args,
        configure="return torch.optim.AdamW(self.parameters(), lr=1e-3)")))
    assert read.replace("line 21", "line 22") in est.read
    assert est.breakdown["parameters"] == parameters


def test_deepspeed_below_stage_3_is_counted_as_ddp_and_says_so(write):
    est = estimate(lightning(write, trainer_args='strategy="deepspeed_stage_2", devices=8'))
    assert est.facts.sharding == "ddp"
    assert "deepspeed_stage_2 counted as DDP (its sharded optimizer state is not modelled)" in est.assumptions


@pytest.mark.parametrize("configure", [
    "return torch.optim.AdamW(self.parameters(), lr=1e-3)",
    "opt = torch.optim.AdamW(self.parameters(), lr=1e-3)\n"
    "                return {'optimizer': opt, 'lr_scheduler': torch.optim.lr_scheduler.StepLR(opt, 10)}",
    "opt = torch.optim.AdamW(self.parameters(), lr=1e-3)\n"
    "                return [opt], [torch.optim.lr_scheduler.StepLR(opt, 10)]",
])
def test_every_form_of_configure_optimizers_gives_its_optimizer(write, configure):
    est = estimate(lightning(write, configure=configure))
    assert [opt.kind for opt in est.facts.trained_optimizers()] == ["AdamW"]
    assert est.breakdown["optimizer_state"] == 2 * PARAMS * 4


@pytest.mark.parametrize("hook", ["configure_model(self)", "setup(self, stage)"])
def test_layers_built_in_configure_model_or_setup_are_the_models(write, hook):
    """Review: built there, the model had no layers when configure_optimizers() ran, and
    the estimate said "fits" for 0 parameters."""
    est = estimate(write("late.py", f"""\
        import torch, torch.nn as nn, torch.nn.functional as F
        import lightning as L
        from torch.utils.data import DataLoader, TensorDataset

        class Lit(L.LightningModule):
            def {hook}:
                self.net = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
            def training_step(self, batch, batch_idx):
                x, y = batch
                return F.cross_entropy(self.net(x), y)
            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)

        ds = TensorDataset(torch.randn(4096, 512), torch.randint(0, 10, (4096,)))
        L.Trainer().fit(Lit(), DataLoader(ds, batch_size=256))
        """))
    assert est.breakdown["parameters"] == PARAMS * 4
    assert est.breakdown["optimizer_state"] == 2 * PARAMS * 4


def test_a_datamodules_train_dataloader_gives_the_batch(write):
    est = estimate(write("dm.py", """\
        import torch, torch.nn as nn, torch.nn.functional as F
        import lightning as L
        from torch.utils.data import DataLoader, TensorDataset

        class Data(L.LightningDataModule):
            def __init__(self, batch_size=64):
                super().__init__()
                self.batch_size = batch_size
            def setup(self, stage):
                self.train = TensorDataset(torch.randn(1000, 3, 32, 32), torch.randint(0, 10, (1000,)))
            def train_dataloader(self):
                return DataLoader(self.train, batch_size=self.batch_size)

        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 16, 3)
                self.head = nn.Linear(16 * 30 * 30, 10)
            def training_step(self, batch, batch_idx):
                x, y = batch
                return F.cross_entropy(self.head(self.conv(x).flatten(1)), y)
            def configure_optimizers(self):
                return torch.optim.SGD(self.parameters(), lr=0.1)

        L.Trainer().fit(Lit(), datamodule=Data(batch_size=48))
        """))
    assert est.facts.inputs[0].shape == (48, 3, 32, 32)
    assert est.facts.no_model is None
    assert [opt.kind for opt in est.facts.trained_optimizers()] == ["SGD"]


def test_manual_optimization_with_two_optimizers_trains_both(write):
    est = estimate(write("gan.py", """\
        import torch, torch.nn as nn
        import pytorch_lightning as pl

        class GAN(pl.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
                self.G = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 784))
                self.D = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 1))
            def train_dataloader(self):
                return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(512, 784)), batch_size=32)
            def training_step(self, batch, batch_idx):
                opt_g, opt_d = self.optimizers()
                (real,) = batch
                fake = self.G(torch.randn(32, 64))
                d_loss = self.D(real).mean() - self.D(fake.detach()).mean()
                opt_d.zero_grad()
                self.manual_backward(d_loss)
                opt_d.step()
                g_loss = -self.D(fake).mean()
                opt_g.zero_grad()
                self.manual_backward(g_loss)
                opt_g.step()
            def configure_optimizers(self):
                return [torch.optim.Adam(self.G.parameters()), torch.optim.Adam(self.D.parameters())]

        pl.Trainer(max_steps=100).fit(GAN())
        """))
    g = 64 * 256 + 256 + 256 * 784 + 784
    d = 784 * 256 + 256 + 256 + 1
    assert [opt.kind for opt in est.facts.trained_optimizers()] == ["Adam", "Adam"]
    assert est.breakdown["optimizer_state"] == 2 * (g + d) * 4
    assert est.facts.backward_line == 18


def test_a_trainer_from_another_library_is_not_lightnings(write):
    """transformers' Trainer trains differently; it is not followed as Lightning's."""
    est = estimate(write("hf.py", """\
        import torch.nn as nn
        from transformers import Trainer
        model = nn.Linear(4, 4)
        Trainer(model=model).fit(model)
        """))
    assert est.facts.model is None


def test_every_part_of_a_lightning_module_is_resident_and_only_the_stepped_ones_trained(write):
    """Lightning puts the whole module on the device: a frozen part the step never calls
    was not counted. A teacher it calls under no_grad gets no gradients (review: making
    the whole module the model gave it 4 GiB of them)."""
    est = estimate(write("parts.py", """\
        import torch, torch.nn as nn, torch.nn.functional as F
        import lightning as L
        from torch.utils.data import DataLoader, TensorDataset

        class Lit(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.stem = nn.Linear(64, 64).requires_grad_(False)
                self.teacher = nn.Sequential(nn.Linear(3 * 32 * 32, 4096), nn.Linear(4096, 10))
                self.conv = nn.Conv2d(3, 16, 3)
                self.head = nn.Linear(16 * 30 * 30, 10)
            def training_step(self, batch, batch_idx):
                x, y = batch
                with torch.no_grad():
                    soft = self.teacher(x.flatten(1))
                out = self.head(self.conv(x).flatten(1))
                return F.cross_entropy(out, y) + F.mse_loss(out, soft)
            def configure_optimizers(self):
                return torch.optim.SGD([*self.conv.parameters(), *self.head.parameters()], lr=0.1)

        ds = TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
        L.Trainer().fit(Lit(), DataLoader(ds, batch_size=16))
        """))
    stem, teacher = 64 * 64 + 64, 3 * 32 * 32 * 4096 + 4096 + 4096 * 10 + 10
    conv, head = 3 * 16 * 9 + 16, 16 * 30 * 30 * 10 + 10
    assert est.breakdown["parameters"] == (stem + teacher + conv + head) * 4
    assert 0 < est.breakdown["gradients"] <= (conv + head) * 4
    assert f"parameters not trained, of Lit (line 22): {stem:,}" in est.read
