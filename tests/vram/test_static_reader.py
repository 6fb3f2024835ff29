"""What the static reader takes from scripts written in different styles."""

from __future__ import annotations

import pytest

from tvis_tui.vram.estimate import estimate
from tvis_tui.vram.facts import Settings


@pytest.mark.parametrize("name, model, batch", [
    ("mlp", "Sequential", (256, 2048)),            # top level, batch from a constant
    ("cnn", "Net", (256, 3, 32, 32)),               # Net(...).to(device), argparse, DataLoader
    ("resnet", "ResNet", (256, 3, 32, 32)),          # function defaults, nested blocks
    ("unet", "UNet", (16, 3, 128, 128)),               # config dict
    ("gpt_sdpa", "GPT", (16, 128)),                 # GPT(GPTConfig(...))
    ("gpt_manual", "LM", (8, 256)),                 # argparse sizes, checkpoint()
    ("lstm", "RNNModel", (32, 64)),                 # forward(x, hidden)
    ("lm_noflash", "Sequential", (12, 192)),        # module constants, slicing
    ("vae", "VAE", (1024, 1, 28, 28)),               # tuple outputs, randn_like, exp
    ("vit", "ViT", (64, 3, 64, 64)),                # Parameters, cat/expand, MHA weights
    ("gru", "Classifier", (64, 200)),               # bidirectional GRU, loss module
])
def test_every_bundled_script_is_followed(script, name, model, batch):
    est = estimate(script(name))
    assert est.confidence == "high", est.assumptions
    assert est.facts.model.kind == model
    assert est.facts.inputs[0].shape == batch
    assert est.breakdown["activations"] > 0


def test_settings_read_from_scripts(script):
    assert estimate(script("resnet")).facts.autocast == "bfloat16"
    assert estimate(script("unet")).facts.accumulation == 4
    assert estimate(script("gpt_manual")).facts.checkpoint_line == 61
    assert estimate(script("gpt_sdpa")).facts.tied
    assert [o.kind for o in estimate(script("lstm")).facts.optimizers] == ["SGD"]


def test_weight_tying_counts_the_shared_matrix_once(script):
    params = estimate(script("gpt_sdpa")).facts.model.params()
    # 4 blocks of 12*256^2 + 13*256, embeddings 4096*256 (tied) + 128*256, final norm.
    blocks = 4 * (12 * 256 * 256 + 13 * 256)
    assert sum(p.numel for p in params) == blocks + 4096 * 256 + 128 * 256 + 2 * 256


def test_sibling_module_and_known_models(fixture):
    sibling = estimate(fixture("sibling/train"))
    assert sibling.facts.model.kind == "Net" and sibling.facts.inputs[0].shape == (128, 256)
    vision = estimate(fixture("torchvision_finetune"))
    assert vision.facts.model.known_params == 25_557_032 - 2049 * 990
    lm = estimate(fixture("hf_finetune"))
    assert lm.facts.model.kind == "gpt2" and lm.confidence == "medium"


def test_cpu_and_cuda_differ_only_where_kernels_do(script):
    cuda = estimate(script("mlp"))
    cpu = estimate(script("mlp"), Settings(device="cpu"))
    assert cpu.breakdown["cuda_context"] == 0 and cuda.breakdown["cuda_context"] > 0
    assert cpu.tensor_bytes == cuda.tensor_bytes  # no dropout, no foreach temporaries for SGD


def test_nanogpt_style_training_script(fixture):
    est = estimate(fixture("nanogpt/train"))
    facts = est.facts
    assert facts.model.kind == "GPT" and facts.model_line == 41
    assert sum(p.numel for p in facts.model.params()) == 124_475_904
    assert facts.inputs[0].shape == (12, 1024)  # batch_size and block_size, latest values
    assert facts.accumulation == 8 and facts.accumulation_line == 51
    # configure_optimizers() lives in model.py: the line reported is the script's call.
    assert facts.optimizers[0].kind == "AdamW" and facts.optimizers[0].line == 44
    assert (facts.autocast, facts.scaler_line, facts.compile_line) == ("bfloat16", 43, 46)
    assert est.confidence == "medium"
    assert any(a.startswith("model input 12x1024 int64") for a in est.assumptions)


def test_fsdp_shards_over_the_scripts_world_size(fixture):
    est = estimate(fixture("fsdp"))
    full = sum(p.numel for p in est.facts.model.params()) * 4
    assert est.facts.sharding == "fsdp"
    assert est.breakdown["parameters"] == full // 4
    assert est.breakdown["optimizer_state"] == 2 * full // 4
    assert "data parallel fsdp (line 6)" in est.read


def test_a_generator_updated_every_n_critic_iterations_is_not_gradient_accumulation(write):
    est = estimate(write("wgan.py", """
import torch
from torch import nn
G = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 8))
D = nn.Sequential(nn.Linear(8, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
opt_g = torch.optim.Adam(G.parameters())
opt_d = torch.optim.Adam(D.parameters())
n_critic = 5
for i in range(1000):
    real = torch.randn(64, 8)
    d_loss = D(G(torch.randn(64, 4)).detach()).mean() - D(real).mean()
    opt_d.zero_grad(); d_loss.backward(); opt_d.step()
    if i % n_critic == 0:
        g_loss = -D(G(torch.randn(64, 4))).mean()
        opt_g.zero_grad(); g_loss.backward(); opt_g.step()
"""))
    assert est.facts.accumulation == 1


@pytest.mark.parametrize("params", [
    None,  # the script as it is: Adam(G.parameters()), Adam(D.parameters())
    "filter(lambda p: p.requires_grad, {}.parameters())",
    "itertools.chain({}.parameters())",
])
def test_every_trained_model_and_each_optimizers_state_is_counted(script, write, params):
    path = script("gan")
    if params is not None:
        source = open(path).read().replace("import torch\n", "import itertools\nimport torch\n", 1)
        for name in "GD":
            source = source.replace(f"Adam({name}.parameters()", "Adam(" + params.format(name))
        path = write("gan.py", source)
    est = estimate(path)
    g = (128 * 1024 + 1024) + (1024 * 3072 + 3072)
    d = (3072 * 1024 + 1024) + (1024 + 1)
    assert est.breakdown["parameters"] == (g + d) * 4
    assert est.breakdown["optimizer_state"] == 2 * (g + d) * 4  # Adam: two moments each
    shift = params is not None  # the import added
    assert est.read[:2] == [f"model Sequential: {g:,} parameters (line {10 + shift})",
                            f"parameters outside the model stepped by Adam (line {13 + shift}): {d:,}"]
    assert f"optimizers Adam (line {12 + shift}), Adam (line {13 + shift})" in est.read


def test_a_model_trained_before_and_replaced_is_not_resident_beside_the_next(write):
    # Each model trains in a loop of its own: the first one's optimizer holds nothing by
    # the time the second trains.
    loop = """
opt = torch.optim.Adam(model.parameters())
for step in range(100):
    loss = model(torch.randn(32, 512)).square().mean()
    opt.zero_grad(); loss.backward(); opt.step()
"""
    make = "model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))"
    once = estimate(write("once.py", f"import torch\nfrom torch import nn\n{make}{loop}"))
    twice = estimate(write("twice.py", f"import torch\nfrom torch import nn\n{make}{loop}{make}{loop}"))
    assert twice.breakdown == once.breakdown
    # Folds, each trained by one helper: its loop is a new one each time it runs.
    helper = "def train(model):" + loop.replace("\n", "\n    ")
    folds = estimate(write("folds.py", f"import torch\nfrom torch import nn\n{helper}\n"
                                       f"for fold in range(3):\n    {make}\n    train(model)\n"))
    assert folds.breakdown == once.breakdown
    assert sum(line.startswith("optimizer") for line in folds.read) == 1


BODY, HEAD = 512 * 1024 + 1024, 1024 * 10 + 10


def _split(optimizers: str) -> str:
    return f"""
import torch
from torch import nn
model = nn.Sequential(nn.Linear(512, 1024), nn.ReLU(), nn.Linear(1024, 10))
{optimizers}
for x in range(10):
    loss = model(torch.randn(32, 512)).square().mean()
    for opt in opts:
        opt.zero_grad()
    loss.backward()
    for opt in opts:
        opt.step()
"""


@pytest.mark.parametrize("optimizers, state", [
    # Each optimizer holds state for its own part: AdamW two moments, plain SGD none.
    ("opts = [torch.optim.AdamW(model[0].parameters()), torch.optim.SGD(model[2].parameters(), lr=0.1)]",
     2 * BODY * 4),
    # Only the head is stepped: the body's gradients are still made, its state is not.
    ("opts = [torch.optim.Adam(model[2].parameters())]", 2 * HEAD * 4),
    # Param groups, one naming a single tensor.
    ("opts = [torch.optim.Adam([{'params': model[0].weight}, {'params': model[2].parameters(), 'lr': 1e-3}])]",
     2 * (512 * 1024 + HEAD) * 4),
    # Unreadable parameters: the optimizer is taken to step the whole model.
    ("opts = [torch.optim.Adam(params_from_somewhere())]", 2 * (BODY + HEAD) * 4),
    # A group added later steps with the rest; an unreadable one makes it unread.
    ("opts = [torch.optim.Adam(model[2].parameters())]; opts[0].add_param_group({'params': model[0].parameters()})",
     2 * (BODY + HEAD) * 4),
    ("opts = [torch.optim.Adam(model[2].parameters())]; opts[0].add_param_group({'params': more()})",
     2 * (BODY + HEAD) * 4),
    ("opts = [torch.optim.Adam(filter(lambda p: p.requires_grad, model[0].parameters()))]", 2 * BODY * 4),
])
def test_optimizer_state_covers_what_each_optimizer_steps(write, optimizers, state):
    est = estimate(write("split.py", _split(optimizers)))
    assert est.breakdown["optimizer_state"] == state
    assert est.breakdown["parameters"] == (BODY + HEAD) * 4


def test_a_property_is_read_as_its_value_not_its_method(write):
    """`nn.Embedding(tok.vocab_size, 8)` with vocab_size a @property (the bundled char LM):
    the reader calls the getter; a setter of the same name does not replace it."""
    est = estimate(write("prop.py", """\
        import torch
        from torch import nn

        class Tok:
            def __init__(self, chars):
                self.chars = chars
                self._dim = 8

            @property
            def vocab_size(self):
                return len(self.chars)

            @property
            def dim(self):
                return self._dim

            @dim.setter
            def dim(self, value):
                self._dim = value

        tok = Tok("abcdefghij")
        model = nn.Embedding(tok.vocab_size, tok.dim)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = model(torch.zeros(4, 16, dtype=torch.long)).sum()
            loss.backward()
            opt.step()
        """))
    assert est.breakdown["parameters"] == 10 * 8 * 4


@pytest.mark.parametrize("item, loop", [
    ("torch.randn(3, self.size, self.size), torch.randint(10, ())", "x, y in loader:"),
    ("torch.randn(3, self.size, self.size)", "x in loader:"),
    ("[torch.randn(3, self.size, self.size), 1]", "x, _ in loader:"),
    ("{'image': torch.randn(3, self.size, self.size)}", "b in loader:\n            x = b['image']"),
])
def test_a_scripts_own_dataset_is_followed_to_its_items_shape(write, item, loop):
    est = estimate(write("ds.py", f"""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, Dataset

        class Noise(Dataset):
            def __init__(self, n, size):
                self.n, self.size = n, size

            def __len__(self):
                return self.n

            def __getitem__(self, i):
                return {item}

        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU())
        loader = DataLoader(Noise(1000, 64), batch_size=128, shuffle=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for {loop}
            loss = model(x).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """))
    assert est.facts.inputs[0].shape == (128, 3, 64, 64)
    assert est.breakdown["activations"] >= 128 * 16 * 64 * 64 * 4  # the conv's output, kept


@pytest.mark.parametrize("heads", [
    "{name: nn.Linear(32, out) for name, out in TASKS.items()}",
    "{name: nn.Linear(32, TASKS[name]) for name in TASKS.keys()}",
    "{name: nn.Linear(32, out) for name, out in zip(TASKS, TASKS.values())}",
    "{str(i): nn.Linear(32, out) for i, out in enumerate(TASKS.values())}",
])
def test_heads_built_from_a_dicts_views_are_counted(write, heads):
    """A comprehension over `.items()` (a view, not a list) gave no heads at all, with
    high confidence (sweep P)."""
    est = estimate(write("heads.py", f"""\
        import torch
        from torch import nn
        TASKS = {{"a": 1, "b": 10}}

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.trunk = nn.Linear(32, 32)
                self.heads = nn.ModuleDict({heads})

            def forward(self, x):
                h = self.trunk(x)
                return sum(head(h).sum() for head in self.heads.values())

        model = Net()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            model(torch.randn(4, 32)).backward()
            opt.step()
        """))
    assert est.breakdown["parameters"] == (32 * 32 + 32 + 32 * 1 + 1 + 32 * 10 + 10) * 4


@pytest.mark.parametrize("argv, hidden, batch", [
    ((), 16, 8),
    (("--hidden", "4096"), 4096, 8),
    (("--hidden=4096", "--bs", "32", "--wide", "--unknown", "x"), 8192, 32),  # width doubled
    (("--hidden", "not-a-number"), 16, 8),  # argparse refuses it: the defaults stay
])
def test_script_args_are_what_parse_args_returns(write, argv, hidden, batch):
    est = estimate(write("args.py", """\
        import argparse
        import torch
        from torch import nn
        p = argparse.ArgumentParser()
        p.add_argument("--hidden", type=int, default=16)
        p.add_argument("--batch-size", "--bs", type=int, default=8)
        p.add_argument("--wide", action="store_true")
        args = p.parse_args()
        width = args.hidden * 2 if args.wide else args.hidden
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(args.batch_size, 64)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """), Settings(script_args=argv))
    assert est.breakdown["parameters"] == (64 * hidden + hidden + hidden + 1) * 4
    assert est.facts.inputs[0].shape == (batch, 64)


@pytest.mark.parametrize("optimizer, states, more", [("SGD", 0, ""), ("LBFGS", 202, ""),
                                                     ("LBFGS", 22, ", history_size=10")])
def test_a_forward_run_only_inside_a_step_closure_is_followed(write, optimizer, states, more):
    """`opt.step(closure)`: the model was "not followed" (sweep P); LBFGS's history of
    100 pairs of flat vectors, and two more, is its state."""
    est = estimate(write("closure.py", f"""\
        import torch
        from torch import nn
        model = nn.Sequential(nn.Linear(3, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = torch.optim.{optimizer}(model.parameters(), lr=0.1{more})
        x, y = torch.randn(64, 3), torch.randn(64, 1)
        for step in range(4):
            def closure():
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                return loss
            opt.step(closure)
        """))
    assert est.facts.no_model is None and est.facts.inputs[0].shape == (64, 3)
    assert est.breakdown["parameters"] == 81 * 4
    assert est.breakdown["optimizer_state"] == states * 81 * 4


@pytest.mark.parametrize("split", [
    "train_ds, val_ds = random_split(ds, [48, 16])",
    "train_ds, val_ds = Subset(ds, range(48)), Subset(ds, range(48, 64))",
])
def test_the_parts_of_a_split_dataset_keep_its_items_shape(write, split):
    """The training loader's batch, not a 224x224 guess at the validation loader's
    batch size (sweep P)."""
    est = estimate(write("split.py", f"""\
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, Subset, TensorDataset, random_split

        model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                              nn.Linear(8 * 32 * 32, 10))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        ds = TensorDataset(torch.randn(64, 3, 32, 32), torch.randint(0, 10, (64,)))
        {split}
        train_loader = DataLoader(train_ds, batch_size=8, shuffle=True)
        val_loader = DataLoader(val_ds, batch_size=64)
        for x, y in train_loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        """))
    assert est.facts.inputs[0].shape == (8, 3, 32, 32)
    assert not [a for a in est.assumptions if "224" in a]


def test_script_args_argparse_refuses_leave_the_defaults_and_say_so(write):
    path = write("args.py", """\
        import argparse
        import torch
        from torch import nn
        p = argparse.ArgumentParser()
        p.add_argument("data", nargs="+")
        p.add_argument("--hidden", type=int, default=16)
        p.add_argument("--amp", action="store_const", const=True, default=False)
        p.add_argument("--ema", action=argparse.BooleanOptionalAction, default=False)
        args = p.parse_args()
        model = nn.Sequential(nn.Linear(64, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(8, 64)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """)
    for argv in (("--amp", "--no-ema", "--hidden", "4096"), ("x", "--hidden=4096")):
        assert estimate(path, Settings(script_args=argv)).breakdown["parameters"] == 270_337 * 4
    est = estimate(path, Settings(script_args=("--hidden", "4k")))
    assert est.breakdown["parameters"] == 1_057 * 4
    assert "--script-args not understood (argument --hidden: invalid int value: '4k'): the " \
           "script's defaults were read" in est.assumptions


@pytest.mark.parametrize("imports, partial", [("from functools import partial", "partial"),
                                              ("import functools", "functools.partial")])
def test_partial_optimizers_and_loaders_are_followed(write, imports, partial):
    """`partial(torch.optim.RMSprop, ...)` was taken for no optimizer (AdamW assumed), and a
    `partial(DataLoader, ...)` batch for a 224-wide guess (sweep P)."""
    est = estimate(write("partial.py", f"""\
        {imports}
        import torch
        from torch import nn
        from torch.utils.data import DataLoader, TensorDataset
        make_loader = {partial}(DataLoader, batch_size=32, drop_last=True)
        loader = make_loader(TensorDataset(torch.randn(256, 1, 64), torch.randint(0, 2, (256,))),
                             shuffle=True)
        model = nn.Sequential(nn.Conv1d(1, 8, 5, padding=2), nn.ReLU(), nn.Flatten(),
                              nn.Linear(8 * 64, 2))
        make_opt = {partial}(torch.optim.RMSprop, lr=1e-3, alpha=0.9)
        opt = make_opt(model.parameters())
        for x, y in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        """))
    assert [o.kind for o in est.facts.optimizers] == ["RMSprop"]
    assert est.facts.inputs[0].shape == (32, 1, 64)
    assert not [a for a in est.assumptions if "224" in a or "AdamW" in a]


def test_a_tensor_named_like_a_size_is_not_replaced_by_the_command_lines_size(write):
    """`context = a @ h` is attention's output, not a sequence length: `--seq-len 64`
    replaced it by 64 and the step was no longer followed (review)."""
    path = write("attn.py", """\
        import torch
        from torch import nn

        class Block(nn.Module):
            def __init__(self, d):
                super().__init__()
                self.emb = nn.Embedding(1000, d)
                self.q = nn.Linear(d, d)
                self.head = nn.Linear(d, 1000)
            def forward(self, ids):
                h = self.emb(ids)
                a = torch.softmax(self.q(h) @ h.transpose(1, 2), -1)
                context = a @ h
                return self.head(context)

        model = Block(256)
        opt = torch.optim.AdamW(model.parameters())
        seq_len = 128
        for step in range(10):
            ids = torch.randint(0, 1000, (8, seq_len))
            loss = nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
            opt.zero_grad(); loss.backward(); opt.step()
        """)
    est = estimate(path, Settings(seq_len=64))
    assert est.confidence == "high" and est.facts.inputs[0].shape == (8, 64)


@pytest.mark.parametrize("frozen", [
    "with torch.no_grad():\n        f = encoder(x)",
    "with torch.inference_mode():\n        f = encoder(x)",
])
def test_a_frozen_model_the_loop_calls_is_resident_but_gets_no_gradients(write, frozen):
    """A frozen encoder that no optimizer steps was left out: its parameters were not
    counted at all ("parameters 0.00 GiB" for a 21M-parameter encoder)."""
    est = estimate(write("frozen.py", f"""\
import torch, torch.nn as nn, torch.nn.functional as F
encoder = nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096))
head = nn.Linear(4096, 10)
opt = torch.optim.AdamW(head.parameters(), lr=1e-3)
for step in range(100):
    x, y = torch.randn(64, 1024), torch.randint(0, 10, (64,))
    {frozen}
    loss = F.cross_entropy(head(f), y)
    opt.zero_grad(); loss.backward(); opt.step()
"""))
    encoder = 1024 * 4096 + 4096 + 4096 * 4096 + 4096
    head = 4096 * 10 + 10
    assert est.breakdown["parameters"] == (encoder + head) * 4
    assert est.breakdown["gradients"] <= head * 4
    assert est.breakdown["optimizer_state"] == 2 * head * 4
    assert f"parameters not trained, of Sequential (line 2): {encoder:,}" in est.read


GAN_HEAD = """\
    import argparse
    import numpy as np
    import torch
    from torch import nn
    p = argparse.ArgumentParser()
    p.add_argument("--img_size", type=int, default=28)
    p.add_argument("--width", type=int, required=True)
    opt = p.parse_args()
    img_shape = (1, opt.img_size, opt.img_size)
    G = nn.Sequential(nn.Linear(100, 128), nn.Linear(128, {out}), nn.Tanh())
    optimizer = torch.optim.Adam(G.parameters())
    for i in range(10):
        optimizer.zero_grad()
        loss = G(torch.randn(64, 100)).mean()
        loss.backward()
        optimizer.step()
    """


def test_a_layer_sized_by_numpy_prod_of_the_image_shape_is_counted(write):
    """Sweep V: PyTorch-GAN's `nn.Linear(1024, int(np.prod(img_shape)))` ended the estimate
    in a TypeError traceback."""
    est = estimate(write("gan.py", GAN_HEAD.format(out="int(np.prod(img_shape))")))
    assert est.breakdown["parameters"] == (100 * 128 + 128 + 128 * 784 + 784) * 4


@pytest.mark.parametrize("argv, params", [((), 100 * 128 + 128), (("--width", "10"), 100 * 128 + 128 + 1290)])
def test_a_layer_sized_by_a_required_argument_says_which_to_give(write, argv, params):
    """Sweep V: super_resolution's `--upscale_factor` (required, no default) sized a Conv2d
    and the estimate ended in a TypeError traceback."""
    est = estimate(write("gan.py", GAN_HEAD.format(out="opt.width")), Settings(script_args=argv))
    assert est.breakdown["parameters"] == params * 4
    unread = [a for a in est.facts.assumed if a.startswith("size of Linear")]
    assert unread == ([] if argv else [
        "size of Linear at line 10 not readable (give --width, which the script requires, with "
        "--script-args); its parameters and outputs are not counted"])


@pytest.mark.parametrize("cell, gates, returns", [("LSTMCell", 4, "h, c = "), ("GRUCell", 3, "h = "),
                                                   ("RNNCell", 1, "h = ")])
def test_recurrent_cells_unrolled_by_the_script_are_counted(write, cell, gates, returns):
    """Sweep V: time_sequence_prediction's two LSTMCells were not counted: 52 parameters
    of 32,284, listed as read from the script."""
    state = "(h, c)" if cell == "LSTMCell" else "h"
    est = estimate(write("cells.py", f"""\
        import torch
        from torch import nn
        class Seq(nn.Module):
            def __init__(self):
                super().__init__()
                self.cell = nn.{cell}(1, 51)
                self.linear = nn.Linear(51, 1)
            def forward(self, x):
                h = c = torch.zeros(x.size(0), 51)
                outs = []
                for t in range(20):
                    {returns}self.cell(x[:, t:t + 1], {state})
                    outs.append(self.linear(h))
                return torch.cat(outs, dim=1)
        model = Seq()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(3):
            loss = model(torch.randn(64, 20)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        """))
    cell_params = gates * 51 * (1 + 51 + 2)
    assert est.breakdown["parameters"] == (cell_params + 52) * 4
    # each of the 20 steps keeps its input, its state and its gates
    assert est.breakdown["activations"] >= 20 * 64 * (1 + 51 + gates * 51) * 4
    assert not est.facts.assumed or all("not readable" not in a for a in est.facts.assumed)


MNIST = """\
    import torch
    import torch.nn.functional as F
    from torch import nn
    from torchvision import datasets, transforms
    {imports}

    def train(model, loader, opt):
        for {loop}:
            opt.zero_grad()
            F.nll_loss(F.log_softmax(model(data), 1), target).backward()
            opt.step()

    def main():
        train_kwargs = {{'batch_size': 64}}
        test_kwargs = {{'batch_size': 1000}}
        tf = transforms.Compose([transforms.ToTensor()])
        train_loader = torch.utils.data.DataLoader(datasets.MNIST('../data', train=True, transform=tf), **train_kwargs)
        test_loader = torch.utils.data.DataLoader(datasets.MNIST('../data', train=False, transform=tf), **test_kwargs)
        model = nn.Sequential(nn.Conv2d(1, 32, 3, 1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 10))
        opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
        train(model, train_loader, opt)

    main()
    """


@pytest.mark.parametrize("imports, loop", [
    ("", "batch_idx, (data, target) in enumerate(loader)"),
    ("from tqdm import tqdm", "data, target in tqdm(loader, desc='train')"),
    ("from tqdm import tqdm", "i, (data, target) in enumerate(tqdm(loader))"),
])
def test_a_loader_wrapped_in_enumerate_or_a_progress_bar_gives_its_batch(write, imports, loop):
    # pytorch/examples' mnist: its batch was not followed through enumerate(), and the
    # model was fed 1000x1x224x224, the test loader's batch size at ImageNet's size (sweep V).
    est = estimate(write("mnist.py", MNIST.format(imports=imports, loop=loop)))
    assert est.facts.inputs[0].shape == (64, 1, 28, 28) and not est.facts.input_assumed
    assert est.confidence == "high", est.assumptions


def test_a_batch_not_followed_is_made_from_the_first_loaders_samples(write):
    est = estimate(write("mnist.py", MNIST.format(imports="from magic import prefetch",
                                                    loop="data, target in prefetch(loader, 2)")))
    assert est.facts.inputs[0].shape == (64, 1, 28, 28) and est.facts.input_assumed
    assert any("the first field of a batch of the DataLoader at line 17" in a for a in est.assumptions)


@pytest.mark.parametrize("bf16, dtype", [(False, "float16"), (True, "bfloat16"), (None, "bfloat16")])
def test_bf16_support_is_the_gpus_checked_against(write, bf16, dtype):
    # nanoGPT's `'bfloat16' if torch.cuda.is_bf16_supported() else 'float16'` read as
    # bfloat16 on a T4 (sweep V); a GPU known only by its memory may do either.
    est = estimate(write("amp.py", """\
        import torch
        from torch import nn
        model = nn.Linear(64, 64).cuda()
        opt = torch.optim.AdamW(model.parameters())
        dtype = 'bfloat16' if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else 'float16'
        ptdtype = {'bfloat16': torch.bfloat16, 'float16': torch.float16}[dtype]
        for step in range(10):
            with torch.autocast(device_type='cuda', dtype=ptdtype):
                loss = model(torch.randn(8, 64, device='cuda')).pow(2).mean()
            loss.backward()
            opt.step()
        """), Settings(bf16=bf16))
    if bf16 is None:  # not known: either branch may be taken
        assert est.facts.autocast in ("bfloat16", "float16")
    else:
        assert est.facts.autocast == dtype


@pytest.mark.parametrize("size, says", [
    ("int(sys.argv[1])", "size of the nn.Parameter at line 9 not readable; it is not counted"),
    ("args.dim", "size of the nn.Parameter at line 9 not readable (give --dim, which the script "
                 "requires, with --script-args); it is not counted"),
])
def test_a_parameter_of_unreadable_size_is_named_not_silently_dropped(write, size, says):
    est = estimate(write("par.py", f"""\
        import argparse, sys
        import torch
        from torch import nn
        parser = argparse.ArgumentParser()
        parser.add_argument("--dim", type=int, required=True)
        args = parser.parse_args()
        class Net(nn.Module):
            def __init__(self):
                super().__init__(); self.table = nn.Parameter(torch.randn({size}, 64))
                self.fc = nn.Linear(64, 64)
            def forward(self, x):
                return self.fc(x)
        model = Net()
        opt = torch.optim.Adam(model.parameters())
        for i in range(3):
            model(torch.randn(8, 64)).mean().backward(); opt.step(); opt.zero_grad()
        """))
    assert says in est.assumptions
    assert est.confidence == "medium"


@pytest.mark.parametrize("wrap, call", [
    ("model = nn.DataParallel(model).cuda()", "model(x)"),
    ("model = torch.nn.DataParallel(model, device_ids=[0, 1])", "model.module(x)"),
    ("model = model.cuda()", "nn.parallel.data_parallel(model, x, [0, 1])"),
])
def test_data_parallel_is_followed_as_the_model_on_one_gpu(write, wrap, call):
    # pytorch/examples' imagenet wraps with DataParallel: "the model could not be
    # followed", and data_parallel() left the activations out without a word (sweep V).
    est = estimate(write("dp.py", f"""\
        import torch
        from torch import nn
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(16 * 32 * 32, 10))
        {wrap}
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for i in range(10):
            x = torch.randn(64, 3, 32, 32, device='cuda')
            loss = nn.functional.cross_entropy({call}, torch.randint(0, 10, (64,), device='cuda'))
            opt.zero_grad(); loss.backward(); opt.step()
        """))
    assert est.facts.model.kind == "Sequential" and est.facts.inputs[0].shape == (64, 3, 32, 32)
    assert est.breakdown["activations"] >= 64 * 16 * 32 * 32 * 4  # the conv's output, kept
    assert any(a.startswith("DataParallel at line") for a in est.assumptions)
