"""Data capture: samples with their transform stages, worker batches, tokenizer calls and
decoded predictions, read back through the store's sample API."""

from __future__ import annotations

import numpy as np
import pytest

from tvis_tui.store import samples as S

SCRIPT = """
import torch, sys
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

class Scale:
    def __call__(self, x):
        return x.float() / 255.0

class Shift:
    def __call__(self, x):
        return x - 0.5

class CharTok:
    def __init__(self):
        self.chars = "abcd"
    def encode(self, text):
        return [self.chars.index(c) for c in text]
    def decode(self, ids):
        return "".join(self.chars[i] for i in ids)

class Images(Dataset):
    classes = ["cat", "dog", "cow", "pig"]
    def __init__(self):
        self.images = torch.arange(8 * 3 * 8 * 8).reshape(8, 3, 8, 8).remainder(256).to(torch.uint8)
        self.transform = Compose([Scale(), Shift()])
        self.tok = CharTok()
    def __len__(self):
        return 8
    def __getitem__(self, i):
        ids = torch.tensor(self.tok.encode("abcd"[i % 4] * 2))
        return self.transform(self.images[i]), i % 4, ids

def collate(items):
    return torch.stack([a for a, _, _ in items]), torch.tensor([b for _, b, _ in items])

if __name__ == "__main__":  # a spawned worker imports this file
    workers, context = int(sys.argv[1]), (sys.argv[2:] or [None])[0]
    loader = DataLoader(Images(), batch_size=4, shuffle=True, collate_fn=collate, num_workers=workers,
                        multiprocessing_context=context)
    model = nn.Sequential(nn.Flatten(), nn.Linear(192, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad(); loss.backward(); opt.step()
        print(loss.item())
"""


def _check(run):
    batches = S.batches(run)
    assert len(batches) == 2 and batches[0]["collate"] == "collate" and batches[0]["step"] == 1
    seen = set()
    for batch in batches:
        samples = S.samples(run, batch["seq"])
        assert [s["index"] for s in samples] == batch["indices"] and len(samples) == 4
        for s in samples:
            seen.add(s["index"])
            entry = s["transforms"][0]
            assert entry["name"] == "Compose" and [st["name"] for st in entry["stages"]] == ["0:Scale", "1:Shift"]
            raw = S.array(entry["input"])
            assert raw.dtype == np.uint8 and raw.shape == (3, 8, 8)
            shifted = S.array(entry["stages"][1]["value"])
            np.testing.assert_allclose(shifted, raw.astype(np.float32) / 255 - 0.5, rtol=1e-6)
            assert S.image(entry["input"]).shape == (8, 8, 3)
            assert s["tokens"][0]["method"] == "encode" and s["tokens"][0]["ids"] == [s["index"] % 4] * 2
            image, label, ids = (value for _, value in s["item"]["items"])
            assert (ids["decoded"], ids["tokenizer"]) == ("abcd"[s["index"] % 4] * 2, "CharTok")
            assert "decoded" not in image and "decoded" not in label
    assert seen == set(range(8))
    preds = S.all_predictions(run)
    assert preds[0]["kind"] == "classes"
    names = {p[0] for p in preds[0]["samples"][0]["top"]}
    assert names <= {"cat", "dog", "cow", "pig"} and preds[0]["samples"][0]["target"] in names


def test_samples_stages_tokens_predictions_in_process(run_inprocess):
    code, run = run_inprocess(SCRIPT, "0")
    assert code == 0
    _check(run)


def test_samples_of_a_random_split_keep_their_stages_and_the_index_beneath(run_inprocess):
    # Subset fetches a batch in one __getitems__ call: tvis fetches it item by item, as
    # Subset itself would, so each sample keeps its transform stages.
    script = SCRIPT.replace("loader = DataLoader(Images(),", """part = torch.utils.data.random_split(
        torch.utils.data.Subset(Images(), [7, 6, 5, 4, 3, 2, 1, 0]), [6, 2])[0]
    loader = DataLoader(part,""")
    code, run = run_inprocess(script, "0")
    assert code == 0
    batch = S.batches(run)[0]
    part_indices = {s["index"]: s for s in S.samples(run, batch["seq"])}
    for s in part_indices.values():
        assert [st["name"] for st in s["transforms"][0]["stages"]] == ["0:Scale", "1:Shift"]
        *_, ids = (value for _, value in s["item"]["items"])
        assert ids["decoded"] == "abcd"[s["base_index"] % 4] * 2  # the item is Images()[base_index]
    assert batch["transforms"] == []


def test_samples_of_a_split_of_a_batched_fetch_dataset_keep_the_index_beneath(run_inprocess):
    # A dataset with its own __getitems__ (as Hugging Face datasets have) is fetched a batch
    # at a time through the split: each sample still says which item of it it is.
    code, run = run_inprocess("""
import torch
from torch.utils.data import DataLoader, Dataset, random_split

class Table(Dataset):
    def __len__(self): return 20
    def __getitem__(self, i): return torch.full((3,), float(i)), i
    def __getitems__(self, idxs): return [self[i] for i in idxs]

train, _ = random_split(Table(), [12, 8], generator=torch.Generator().manual_seed(1))
model = torch.nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)
for x, i in DataLoader(train, batch_size=4):
    model(x).sum().backward(); opt.step(); opt.zero_grad()
    print(i.tolist())
""", steps=1)
    assert code == 0
    batch = S.batches(run)[0]
    expected = _split_indices(12, 8)[:4]  # DataLoader's sampler goes in order
    assert [s["base_index"] for s in S.samples(run, batch["seq"])] == expected


def _split_indices(first: int, second: int) -> list[int]:
    """The indices random_split's first part takes, with the test script's generator."""
    import torch
    from torch.utils.data import random_split

    return list(random_split(range(first + second), [first, second],
                             generator=torch.Generator().manual_seed(1))[0].indices)


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_worker_samples_are_as_complete(run_inprocess, context):
    """Spawned workers are fresh interpreters: tvis is installed there as they start."""
    code, run = run_inprocess(SCRIPT, "2", context)
    assert code == 0
    _check(run)
    assert {b["worker"] for b in S.batches(run)} == {0, 1}


def test_token_ids_in_samples_are_decoded_but_masks_and_ignored_labels_are_not(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch.utils.data import DataLoader

class Tok:  # the script's tokenizer, called before training: tvis decodes with a copy
    vocab = "_abcdefgh"
    vocab_size = len(vocab)
    def encode(self, text):
        return [self.vocab.index(c) for c in text]
    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

tok = Tok()
words = ["bad", "cab", "fed", "hag"]
data = [{"input_ids": torch.tensor(tok.encode(w)), "attention_mask": torch.ones(3, dtype=torch.long),
         "labels": torch.tensor([-100] + tok.encode(w)[1:]), "ner_tags": torch.tensor([0, 1, 0]),
         "pixels": torch.tensor([3, 1, 2], dtype=torch.uint8)} for w in words]
emb = torch.nn.Embedding(9, 9)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
for batch in DataLoader(data, batch_size=2):
    logits = emb(batch["input_ids"])
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten())
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    samples = S.samples(run, S.batches(run)[0]["seq"])
    items = [dict(s["item"]["items"]) for s in samples]
    assert [(i["input_ids"]["decoded"], i["input_ids"]["tokenizer"]) for i in items] == [("bad", "Tok"), ("cab", "Tok")]
    for key in ("attention_mask", "labels", "ner_tags", "pixels"):  # ids they are not (or not all)
        assert not any("decoded" in i[key] for i in items), key


TWO_TOKENIZERS = """
import torch
from torch.utils.data import DataLoader, Dataset

class Tok:
    def __init__(self, vocab):
        self.vocab, self.vocab_size = vocab, len(vocab)
    def encode(self, text):
        return [self.vocab.index(c) for c in text]
    def decode(self, ids):
        return "".join(self.vocab[i] for i in ids)

class Pairs(Dataset):  # translation: a tokenizer for each side
    def __init__(self):
        self.source, self.target = Tok("_abc"), Tok("_xyz")
    def __len__(self):
        return 2
    def __getitem__(self, i):
        return torch.tensor(self.source.encode("abc")), torch.tensor(self.target.encode("zyx"))

emb = torch.nn.Embedding(4, 4)
opt = torch.optim.SGD(emb.parameters(), lr=0.1)
loader = DataLoader(Pairs(), batch_size=2)
for step in range(STEPS):
    for src, tgt in loader:
        loss = torch.nn.functional.cross_entropy(emb(src).flatten(0, 1), tgt.flatten())
        opt.zero_grad(); loss.backward(); opt.step()
"""


def test_with_a_tokenizer_for_each_side_neither_decodes_the_other(run_inprocess):
    code, run = run_inprocess(TWO_TOKENIZERS.replace("STEPS", "1"))
    assert code == 0
    sample = S.samples(run, S.batches(run)[0]["seq"])[0]
    assert not any("decoded" in value for _, value in sample["item"]["items"])


def test_the_tokenizer_is_copied_once_for_tvis_own_decoding(run_inprocess, monkeypatch):
    from tvis_tui.record import decoding

    copies = []
    real = decoding.copy.deepcopy
    monkeypatch.setattr(decoding.copy, "deepcopy", lambda obj, *a: copies.append(type(obj).__name__) or real(obj, *a))
    code, run = run_inprocess(TWO_TOKENIZERS.replace("STEPS", "4").replace(
        "self.source, self.target = Tok(\"_abc\"), Tok(\"_xyz\")", "self.source = self.target = Tok(\"_abc\")"
    ).replace("zyx", "cba"))
    assert code == 0 and len(S.all_predictions(run)) == 4
    assert copies == ["Tok"]


def test_predictions_of_nan_logits_are_marked_not_ranked(run_inprocess):
    code, run = run_inprocess("""
import torch
torch.manual_seed(0)
m = torch.nn.Linear(4, 3)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
x = torch.randn(3, 4)
x[1, 0] = float("nan")
masked = torch.tensor([[False, False, True]] * 3)  # class 2 masked out: a -inf logit
loss = torch.nn.functional.cross_entropy(m(x).masked_fill(masked, float("-inf")), torch.tensor([0, 1, 0]))
loss.backward(); opt.step()
""")
    assert code == 0
    record = S.all_predictions(run)[0]
    rows = record["samples"]
    assert (record["rows"], record["leading"]) == (3, 3)
    assert rows[1] == {"top": [], "nonfinite": True, "target": "1", "target_index": 1}
    for row in rows[0], rows[2]:  # masked, not broken: ranked, the masked class last at 0%
        assert len(row["top"]) == 3 and row["top"][2][1:] == [2, 0.0] and "correct" in row
        assert "nonfinite" not in row


def test_token_predictions_count_positions_with_nan_logits():
    import torch

    from tvis_tui.record import decoding

    class Tok:
        vocab_size = 3

        def decode(self, ids):
            return "".join("abc"[i] for i in ids)

    logits = torch.zeros(2, 3, 4)  # (batch, vocab, positions), as cross_entropy takes them
    logits[1, 2, 0] = float("nan")
    logits[1, 0, 3] = float("inf")
    logits[0, 1, 2] = float("-inf")  # a masked token: not a broken one
    record = decoding.predictions(logits, torch.zeros(2, 4, dtype=torch.long), None, Tok(), None, -100,
                                  decoding.TokenizerCopies())
    assert [row.get("nonfinite") for row in record["samples"]] == [None, 2]


def test_predicted_text_leaves_out_the_positions_the_loss_ignores():
    # Padded targets (PAD = 0 is the ignore_index): what the model says at padding is not
    # part of its answer; the ids keep every position.
    import torch

    from tvis_tui.record import decoding

    class Tok:
        vocab_size = 4

        def decode(self, ids):
            return "".join("_abc"[i] for i in ids)

    target = torch.tensor([[1, 2, 0, 0], [3, 3, 3, 3]])
    logits = torch.nn.functional.one_hot(torch.tensor([[1, 3, 2, 2], [3, 3, 1, 3]]), 4).float()
    record = decoding.predictions(logits.reshape(8, 4), target.reshape(8), None, Tok(), 2, 0,
                                  decoding.TokenizerCopies())
    rows = record["samples"]
    assert [(r["predicted"], r["target"]) for r in rows] == [("ac", "ab"), ("ccac", "cccc")]
    assert rows[0]["predicted_ids"] == [1, 3, 2, 2] and rows[0]["accuracy"] == 0.5


def test_export_shows_batches_samples_and_predictions(run_inprocess, tmp_path):
    import io
    import json

    from tvis_tui.export import export_jsonl

    code, run = run_inprocess(SCRIPT, "0")
    out = io.StringIO()
    export_jsonl(run, out)
    kinds = [json.loads(line)["record"] for line in out.getvalue().splitlines()]
    assert kinds.count("batch") == 2 and kinds.count("sample") == 8 and kinds.count("prediction") == 2


def test_predictions_are_the_trained_ones_not_a_metric_logged_after_the_step(run_inprocess):
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
classes = ["cat", "dog", "cow"]
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
xs = [torch.randn(4, 4) for _ in range(3)]
ys = [torch.tensor([0, 1, 2, 1]), torch.tensor([2, 2, 0, 1]), torch.tensor([1, 0, 1, 1])]
for x, y in zip(xs, ys):
    logits = model(x)
    loss = nn.CrossEntropyLoss(ignore_index=1)(logits, y)
    opt.zero_grad(); loss.backward(); opt.step()
    # A metric after the step: recorded in the next step, on detached logits.
    nn.functional.cross_entropy(logits.detach(), torch.zeros(4, dtype=torch.long))
""")
    assert code == 0
    preds = {p["step"]: p for p in S.all_predictions(run)}
    assert {p["loss"] for p in preds.values()} == {"CrossEntropyLoss"}  # as the script called it
    for step, y in zip((1, 2, 3), ([0, 1, 2, 1], [2, 2, 0, 1], [1, 0, 1, 1])):
        rows = preds[step]["samples"]
        assert [r.get("target_index") for r in rows] == [None if t == 1 else t for t in y], step
        assert [r.get("ignored", False) for r in rows] == [t == 1 for t in y], step
        assert all(("correct" in r) != r.get("ignored", False) for r in rows)


def test_predictions_and_per_sample_loss_describe_the_same_training_batch(run_inprocess):
    # nanoGPT's pattern: now and then a validation loss before the training batch, with
    # autograd on. The step's predictions and per-sample loss are both the training loss's.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
classes = ["cat", "dog", "cow"]
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
val_x, val_y = torch.randn(4, 4), torch.tensor([2, 2, 2, 2])
for step in range(2):
    val_loss = nn.functional.cross_entropy(model(val_x), val_y)
    x, y = torch.randn(4, 4), torch.tensor([0, 1, 0, 1])
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    for record in run.steps():
        predicted = S.predictions(run, record.step)
        assert [r["target_index"] for r in predicted["samples"]] == [0, 1, 0, 1]
        losses = [c for c in run.calls(record.first_seq, record.last_seq) if c.name == "F.cross_entropy"]
        assert record.extra["per_sample_loss"]["seq"] == losses[-1].seq


def test_the_step_view_puts_the_predictions_own_losses_beside_them(run_inprocess):
    # An auxiliary loss after the cross-entropy: the step's per-sample loss follows it,
    # but the losses shown beside the predictions are the cross-entropy's.
    import torch

    from tvis_tui.store.step_details import sample_losses

    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(4, 4), torch.tensor([0, 1, 2, 1])
logits = model(x)
loss = nn.functional.cross_entropy(logits, y) + 0.1 * nn.functional.mse_loss(logits, torch.zeros(4, 3))
opt.zero_grad(); loss.backward(); opt.step()
import os
torch.save((logits.detach(), y), os.path.join(os.path.dirname(__file__), "logits.pt"))
""")
    assert code == 0
    (step,) = run.steps()
    predicted = S.predictions(run, 1)
    ce = next(c for c in run.calls(step.first_seq, step.last_seq) if c.name == "F.cross_entropy")
    assert predicted["loss_seq"] == ce.seq != step.extra["per_sample_loss"]["seq"]
    logits, y = torch.load(run.path.parent.parent / "logits.pt")
    expected = torch.nn.functional.cross_entropy(logits, y, reduction="none")
    losses, _, _ = sample_losses(run, step, predicted["loss_seq"])
    assert losses == pytest.approx(dict(enumerate(expected.tolist())))


@pytest.mark.parametrize("table, joined", [
    ("itos = {i: ch for i, ch in enumerate(chars)}", ""),  # nanoGPT's characters
    ("idx2word = [ch * 2 for ch in chars]", " "),  # a word-level list
    # Characters after special tokens (sweep U: decoded "g h e a g </s>").
    ("itos = ['<pad>', '[SEP]', '</s>'] + chars; chars = itos", ""),
])
def test_token_predictions_decode_with_the_scripts_own_id_table(run_inprocess, table, joined):
    # No tokenizer object: encode/decode are lambdas over the script's own tables.
    code, run = run_inprocess(f"""
import torch
from torch import nn
torch.manual_seed(0)
chars = sorted(set("hello world"))
stoi = {{ch: i for i, ch in enumerate(chars)}}
{table}
encode = lambda s: [stoi[c] for c in s]
data = torch.tensor(encode("hello world " * 8))
model = nn.Sequential(nn.Embedding(len(chars), 16), nn.Linear(16, len(chars)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = data[:-1].view(1, -1)[:, :8], data[1:].view(1, -1)[:, :8]
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.view(-1, len(chars)), y.view(-1))
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    chars = sorted(set("hello world"))
    if "<pad>" in table:
        chars = ["<pad>", "[SEP]", "</s>", *chars]
    tokens = [ch if not joined else ch * 2 for ch in chars]
    pred = S.all_predictions(run)[0]
    assert pred["kind"] == "tokens" and pred["tokenizer"] == table.split()[0]
    (row,) = pred["samples"]
    assert row["target"] == joined.join(tokens[i] for i in row["target_ids"])
    assert row["predicted"] == joined.join(tokens[i] for i in row["predicted_ids"])


def test_token_predictions_keep_one_row_per_sequence_without_a_dataloader(run_inprocess, capsys):
    # Batches drawn by hand (no DataLoader tells the batch size) and logits flattened
    # with view(-1, V) for the loss: each sequence is still its own row. The texts come
    # from a copy of the tokenizer: the script's own one counts only its own calls.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)

class CharTok:
    chars = "abcdefgh"
    vocab_size = 8
    decoded = 0
    def encode(self, text):
        return [self.chars.index(c) for c in text]
    def decode(self, ids):
        self.decoded += 1
        return "".join(self.chars[i] for i in ids)

tok = CharTok()
data = torch.tensor(tok.encode("abcdefgh" * 8))
model = nn.Sequential(nn.Embedding(8, 16), nn.Linear(16, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    starts = torch.randint(0, len(data) - 6, (3,))
    x = torch.stack([data[s:s + 5] for s in starts])
    y = torch.stack([data[s + 1:s + 6] for s in starts])
    logits = model(x)
    loss = nn.functional.cross_entropy(logits.view(-1, tok.vocab_size), y.view(-1))
    opt.zero_grad(); loss.backward(); opt.step()
    print(tok.decode([0, 1]), tok.decoded)
""")
    assert code == 0
    assert capsys.readouterr().out == "ab 1\nab 2\n"
    pred = S.all_predictions(run)[0]
    assert pred["kind"] == "tokens" and len(pred["samples"]) == 3
    chars = "abcdefgh"
    for row in pred["samples"]:
        assert len(row["predicted_ids"]) == 5 and len(row["target"]) == 5
        assert row["predicted"] == "".join(chars[i] for i in row["predicted_ids"])


def test_token_predictions_decode_with_a_tokenizer_that_tells_no_vocabulary_size(run_inprocess):
    # A hand-written character tokenizer with neither a size nor a known table name (sweep O):
    # its decode reaching exactly as far as the logits says they score its characters.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)

class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}
    def encode(self, s):
        return torch.tensor([self.index[c] for c in s])
    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)

tok = CharTokenizer("the cat sat on the mat")
data = tok.encode("the cat sat on the mat " * 4)
V = len(tok.chars)
model = nn.Sequential(nn.Embedding(V, 16), nn.Linear(16, V))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    x, y = data[:-1][:24].view(2, 12), data[1:][:24].view(2, 12)
    loss = nn.functional.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    chars = sorted(set("the cat sat on the mat"))
    pred = S.all_predictions(run)[0]
    assert (pred["kind"], pred["tokenizer"], pred["classes"]) == ("tokens", "CharTokenizer", len(chars))
    assert [row["target"] for row in pred["samples"]] == ["he cat sat o", "n the mat th"]
    for row in pred["samples"]:
        assert row["predicted"] == "".join(chars[i] for i in row["predicted_ids"])


def test_logits_wider_than_a_tokenizers_reach_stay_classes(run_inprocess):
    # The same tokenizer beside a 3-way classifier head: its decode of id 2 works, of id 3
    # too (more characters): the logits are not over its characters.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)

class CharTokenizer:
    def __init__(self, text):
        self.chars = sorted(set(text))
    def decode(self, ids):
        return "".join(self.chars[int(i)] for i in ids)
    def encode(self, s):
        return [self.chars.index(c) for c in s]

tok = CharTokenizer("abcdefgh")
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    loss = nn.functional.cross_entropy(model(torch.randn(5, 4)), torch.randint(3, (5,)))
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    pred = S.all_predictions(run)[0]
    assert pred["kind"] == "classes" and len(pred["samples"]) == 5


def test_token_predictions_of_one_token_per_sample_are_a_row_each(run_inprocess):
    # A next-character MLP (makemore's): (B, V) logits from hand-drawn batches. The rows
    # are B samples of one token each, not one text of B tokens.
    code, run = run_inprocess("""
import torch
from torch import nn
torch.manual_seed(0)
chars = "abcdefgh"
itos = {i: c for i, c in enumerate(chars)}
data = torch.arange(8).repeat(8)
model = nn.Sequential(nn.Embedding(8, 4), nn.Flatten(), nn.Linear(12, 8))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(2):
    starts = torch.randint(0, len(data) - 3, (5,))
    x = torch.stack([data[s:s + 3] for s in starts])
    loss = nn.functional.cross_entropy(model(x), data[starts + 3])
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    pred = S.all_predictions(run)[0]
    assert pred["kind"] == "tokens" and len(pred["samples"]) == 5
    for row in pred["samples"]:
        (said,), (wanted,) = row["predicted_ids"], row["target_ids"]
        assert (row["predicted"], row["target"]) == ("abcdefgh"[said], "abcdefgh"[wanted])
        assert row["accuracy"] == float(said == wanted)


JOINT_PIPELINE = """
import torch
from torch.utils.data import DataLoader, Dataset

class Joint:  # transforms image and mask together
    def __call__(self, img, mask):
        return img.flip(-1), mask.flip(-1)

class Double:
    def __call__(self, img):
        return img * 2

class JointCompose:
    def __init__(self, transforms):
        self.transforms = transforms
    def __call__(self, img, mask):
        for t in self.transforms:
            if isinstance(t, Joint):
                img, mask = t(img, mask)
            else:
                img = t(img)
        return img, mask

class Segments(Dataset):
    def __init__(self):
        self.transform = JointCompose([Joint(), Double()])
        self.augment = Double()
    def __len__(self):
        return 2
    def __getitem__(self, i):
        img, mask = torch.arange(3.0) + i, torch.tensor([0, 1, 2])
        img, mask = self.transform(img, mask)
        if not isinstance(self.augment, Double):
            img = img - 100
        return img, mask

for img, mask in DataLoader(Segments(), batch_size=2):
    print(img.tolist(), mask.tolist())
"""


def test_a_pipeline_that_branches_on_a_transforms_type_runs_as_written(run_inprocess, capsys):
    code, run = run_inprocess(JOINT_PIPELINE)
    assert code == 0
    assert capsys.readouterr().out == "[[4.0, 2.0, 0.0], [6.0, 4.0, 2.0]] [[2, 1, 0], [2, 1, 0]]\n"
    entry = S.samples(run, S.batches(run)[0]["seq"])[1]["transforms"][0]
    assert [st["name"] for st in entry["stages"]] == ["0:Joint", "1:Double"]
    assert S.array(entry["stages"][1]["value"]).tolist() == [6.0, 4.0, 2.0]


def test_the_stages_of_a_pipeline_a_transform_holds_are_seen_each_time_it_runs(run_inprocess, capsys):
    # SimCLR's two views: a wrapper that runs the pipeline it holds twice.
    code, run = run_inprocess("""
import torch
from torch.utils.data import DataLoader

class Compose:  # its stages under a name of its own
    def __init__(self, stages):
        self.stages = stages
    def __call__(self, x):
        for t in self.stages:
            x = t(x)
        return x

class TwoViews:
    def __init__(self, base):
        self.base = base
        self.flip = lambda x: x.flip(0)  # a callable that is no pipeline: not a stage
    def __call__(self, x):
        return self.base(x), self.flip(self.base(x))

def plus_one(x):
    return x + 1

def times_ten(x):
    return x * 10

class Pairs(torch.utils.data.Dataset):
    def __init__(self):
        self.transform = TwoViews(Compose([plus_one, times_ten]))
    def __len__(self):
        return 2
    def __getitem__(self, i):
        return self.transform(torch.tensor([float(i), 5.0]))

pairs = Pairs()
for a, b in DataLoader(pairs, batch_size=2):
    print(a.tolist(), b.tolist())
print(type(pairs.transform.base).__name__)  # put back after the fetch
""")
    assert code == 0
    assert capsys.readouterr().out == "[[10.0, 60.0], [20.0, 60.0]] [[60.0, 10.0], [60.0, 20.0]]\nCompose\n"
    entry = S.samples(run, S.batches(run)[0]["seq"])[1]["transforms"][0]
    assert entry["name"] == "TwoViews"
    names = [st["name"] for st in entry["stages"]]
    assert names == ["base/0:plus_one", "base/1:times_ten", "base",
                     "base#2/0:plus_one", "base#2/1:times_ten", "base#2"]
    assert S.array(entry["stages"][2]["value"]).tolist() == [20.0, 60.0]


LABELS_SCRIPT = """
import torch
from torch import nn
torch.manual_seed(0)

class Tags(torch.utils.data.Dataset):
    classes = CLASSES
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return torch.full((3,), float(i)), TARGETS[i]

model = nn.Linear(3, OUTPUTS)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in torch.utils.data.DataLoader(Tags(), batch_size=4):
    scores = model(x)
    loss = LOSS
    opt.zero_grad(); loss.backward(); opt.step()
    torch.save(scores.detach(), __file__ + ".pt")
"""


def _labels_run(run_inprocess, classes, targets, outputs, loss):
    script = (LABELS_SCRIPT.replace("CLASSES", classes).replace("TARGETS", targets)
              .replace("OUTPUTS", str(outputs)).replace("LOSS", loss))
    code, run = run_inprocess(script)
    assert code == 0
    import torch
    scores = torch.load(str(run.path.parent.parent / "train.py.pt"))
    return S.predictions(run, 1), scores


def test_multi_label_predictions_name_every_label_at_half_and_up(run_inprocess):
    import torch

    predicted, scores = _labels_run(
        run_inprocess, '["red", "round", "big"]',
        "[torch.tensor(t) for t in ([1., 0., 1.], [0., 0., 0.], [0., 1., 0.], [1., 1., 1.])]",
        3, "nn.BCEWithLogitsLoss(pos_weight=torch.ones(3))(scores, y)")
    assert (predicted["kind"], predicted["loss"], predicted["names"]) == ("labels", "BCEWithLogitsLoss", True)
    names = ["red", "round", "big"]
    wanted = [[0, 2], [], [1], [0, 1, 2]]
    for row, probs, want in zip(predicted["samples"], torch.sigmoid(scores), wanted):
        said = [i for i, p in enumerate(probs.tolist()) if p >= 0.5]
        assert row["predicted"] == said and row["target_indices"] == want
        assert row["target"] == (", ".join(names[i] for i in want) or "none")
        assert row["correct"] == (said == want)
        best = int(probs.argmax())
        assert row["top"][0][:2] == [names[best], best]
        assert row["top"][0][2] == pytest.approx(float(probs[best]), abs=1e-6)


def test_a_binary_map_per_pixel_reads_as_two_classes_per_pixel():
    import torch

    from tvis_tui.record import decoding

    scores = torch.tensor([[[[2.0, -2.0], [-1.0, 3.0]]], [[[0.5, -0.5], [1.0, -1.0]]]])  # (2, 1, 2, 2)
    target = (scores > 0).float()
    target[1, 0, 0, 0] = 0.0  # one pixel wrong
    record = decoding.label_predictions(scores, target, ["background", "object"], probabilities=False)
    assert (record["kind"], record["rows"], record["leading"]) == ("classes", 8, 2)
    assert [row["top"][0][0] for row in record["samples"][:4]] == ["object", "background", "background", "object"]
    assert [row["correct"] for row in record["samples"]] == [True] * 4 + [False] + [True] * 3


def test_class_names_of_another_count_name_no_class_of_this_head():
    import torch

    from tvis_tui.record import decoding

    cifar = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    rotations = decoding.predictions(torch.randn(4, 4), torch.arange(4), cifar, None, None, -100,
                                     decoding.TokenizerCopies())
    assert rotations["names"] is False
    assert [row["target"] for row in rotations["samples"]] == ["0", "1", "2", "3"]
    tags = decoding.label_predictions(torch.randn(2, 5), torch.tensor([[1.0, 0, 0, 1, 0]] * 2),
                                      ["fake", "real"], probabilities=False)
    assert tags["names"] is False and tags["samples"][0]["target"] == "0, 3"
    named = decoding.predictions(torch.randn(3, 10), torch.arange(3), cifar, None, None, -100,
                                 decoding.TokenizerCopies())
    assert [row["target"] for row in named["samples"]] == ["airplane", "automobile", "bird"]


@pytest.mark.parametrize("width", [4, 5])  # as many columns as classes, and not
def test_class_probabilities_per_pixel_are_read_along_the_class_dimension(width):
    import torch

    from tvis_tui.record import decoding

    torch.manual_seed(0)
    logits = torch.randn(2, 4, 3, width)  # (N, C, H, W)
    hard = torch.randint(0, 4, (2, 3, width))
    soft = torch.nn.functional.one_hot(hard, 4).permute(0, 3, 1, 2).float()  # (N, C, H, W)
    record = decoding.predictions(logits, soft, None, None, None, -100, decoding.TokenizerCopies())
    rows = record["samples"]
    assert [row["target_index"] for row in rows] == hard.reshape(-1)[:len(rows)].tolist()
    assert [row["correct"] for row in rows] == (logits.argmax(1) == hard).reshape(-1)[:len(rows)].tolist()


def test_every_label_said_is_kept_however_many():
    import torch

    from tvis_tui.record import decoding

    scores = torch.tensor([[3.0, 2.0, 1.5, 1.0, 0.5, 0.2, 0.1, -2.0]])  # 7 labels from 0.5 up
    record = decoding.label_predictions(scores, None, None, probabilities=False)
    (row,) = record["samples"]
    assert row["predicted"] == list(range(7)) and [i for _, i, _ in row["top"]] == list(range(7))


def test_a_single_score_per_sample_reads_as_two_classes(run_inprocess):
    import torch

    predicted, scores = _labels_run(
        run_inprocess, '["cat", "dog"]', "[torch.tensor([float(i % 2)]) for i in range(4)]", 1,
        "nn.functional.binary_cross_entropy(torch.sigmoid(scores), y)")
    assert (predicted["kind"], predicted["loss"]) == ("classes", "F.binary_cross_entropy")
    for i, (row, p) in enumerate(zip(predicted["samples"], torch.sigmoid(scores).reshape(-1).tolist())):
        name, index, prob = row["top"][0]
        assert (name, index) == (("dog", 1) if p >= 0.5 else ("cat", 0))
        assert prob == pytest.approx(max(p, 1 - p), abs=1e-6)
        assert row["target"] == ["cat", "dog"][i % 2] and row["correct"] == (index == i % 2)


def test_flattened_class_logits_keep_their_first_dimension():
    import torch

    from tvis_tui.record import decoding

    per_token = (torch.zeros(2, 5, 3, requires_grad=True) * 1).reshape(-1, 3)  # (B*T, C) for the loss
    per_pixel = torch.zeros(2, 3, 4, 4)  # (N, C, H, W)
    copies = decoding.TokenizerCopies()
    for logits, rows, leading in [(per_token, 10, 2), (per_pixel, 32, 2), (torch.zeros(6, 3), 6, 6)]:
        record = decoding.predictions(logits, None, None, None, None, -100, copies)
        assert (record["rows"], record["leading"]) == (rows, leading)


@pytest.mark.parametrize("told, logits", [
    ("stoi = {c: i for i, c in enumerate(chars)}", 8),  # the size only in a table it keeps
    ("vocab_size = 300", 320),  # the model pads the vocabulary to a multiple of 64
])
def test_token_predictions_for_tokenizers_that_tell_their_size_their_own_way(run_inprocess, told, logits):
    code, run = run_inprocess(f"""
import torch
from torch import nn
torch.manual_seed(0)

class CharTok:
    chars = "abcdefgh"
    {told}
    def encode(self, text):
        return [self.chars.index(c) for c in text]
    def decode(self, ids):
        return "".join(self.chars[i % 8] for i in ids)

tok = CharTok()
model = nn.Sequential(nn.Embedding(8, 16), nn.Linear(16, {logits}))
x = torch.tensor([tok.encode("abcd"), tok.encode("bcde")])
y = torch.tensor([tok.encode("bcde"), tok.encode("cdef")])
loss = nn.functional.cross_entropy(model(x).view(-1, {logits}), y.view(-1))
loss.backward()
torch.optim.SGD(model.parameters(), lr=0.1).step()
""")
    assert code == 0
    pred = S.all_predictions(run)[0]
    assert pred["kind"] == "tokens" and pred["tokenizer"] == "CharTok"
    assert [row["target"] for row in pred["samples"]] == ["bcde", "cdef"]


def test_pil_images_through_a_torchvision_style_pipeline(run_inprocess):
    code, run = run_inprocess("""
import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

class Compose:
    def __init__(self, transforms):
        self.transforms = transforms
    def __call__(self, img):
        for t in self.transforms:
            img = t(img)
        return img

def gray(img):
    return img.convert("L")

def to_tensor(img):
    return torch.from_numpy(np.asarray(img, dtype=np.float32) / 255).unsqueeze(0)

class Pictures(Dataset):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.images = [Image.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)) for _ in range(4)]
        self.transform = Compose([gray, to_tensor])
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return self.transform(self.images[i]), i % 2

model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 2))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Pictures(), batch_size=4):
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
""")
    assert code == 0
    sample = S.samples(run, S.batches(run)[0]["seq"])[0]
    entry = sample["transforms"][0]
    assert [st["name"] for st in entry["stages"]] == ["0:gray", "1:to_tensor"]
    assert S.image(entry["input"]).shape == (8, 8, 3)  # the PIL image as the dataset held it
    assert S.image(entry["stages"][0]["value"]).shape == (8, 8, 1)  # grayscale, still PIL
    gray = S.image(entry["stages"][0]["value"])[:, :, 0]
    np.testing.assert_allclose(S.array(entry["stages"][1]["value"])[0], gray / 255, atol=1e-6)


def test_a_tokenizer_called_in_collate_is_the_batchs_with_its_ids(run_inprocess):
    """HF-style: raw texts from the dataset, tokenized in collate_fn into a mapping that is
    not a dict (transformers' BatchEncoding is a UserDict)."""
    code, run = run_inprocess("""
from collections import UserDict
import torch
from torch.utils.data import DataLoader

class Encoding(UserDict):
    pass

class WordTok:
    words = ["[PAD]", "a", "cat", "sat", "dog"]
    def encode(self, text):
        return [self.words.index(w) for w in text.split()]
    def decode(self, ids):
        return " ".join(self.words[i] for i in ids)
    def __call__(self, texts):
        rows = [self.encode(t) for t in texts]
        width = max(map(len, rows))
        return Encoding(input_ids=torch.tensor([r + [0] * (width - len(r)) for r in rows]))

tok = WordTok()
def collate(texts):
    return tok(texts)

model = torch.nn.EmbeddingBag(5, 2)
for batch in DataLoader(["a cat sat", "a dog"], batch_size=2, collate_fn=collate):
    model(batch["input_ids"]).sum().backward()
""")
    assert code == 0
    (call,) = S.batches(run)[0]["tokens"]
    assert call["text"] == ["a cat sat", "a dog"] and call["ids"] == [1, 2, 3, 1, 4, 0]
    assert call["shape"] == [2, 3] and call["n_ids"] == 6
    loaded = next(c for c in run.calls(1, run.call_count()) if c.kind == "data")
    (batch,) = run.slots(loaded.seq, "output")
    assert (batch.path, batch.shape) == ("batch.input_ids", (2, 3))


def test_a_sample_that_is_a_mapping_but_not_a_dict_is_described_by_its_items(run_inprocess):
    code, run = run_inprocess("""
from collections import UserDict
import torch
from torch.utils.data import DataLoader, Dataset

class Encoding(UserDict):
    pass

class Pairs(Dataset):
    def __len__(self):
        return 4
    def __getitem__(self, i):
        return Encoding(input_ids=torch.tensor([i, i + 1]), label=i % 2)

model = torch.nn.EmbeddingBag(8, 2)
for batch in DataLoader(Pairs(), batch_size=2, collate_fn=lambda rows: rows):
    model(torch.stack([row["input_ids"] for row in batch])).sum().backward()
""")
    assert code == 0
    first = S.samples(run, S.batches(run)[0]["seq"])[0]
    assert first["item"]["kind"] == "dict"
    assert [key for key, _ in first["item"]["items"]] == ["input_ids", "label"]


@pytest.mark.parametrize("second, named", [
    ('["circle", "square", "star"]', True),
    ('["zero", "one", "two"]', False),  # parts that disagree name no class: indices shown
])
def test_class_names_of_a_dataset_inside_concat_and_split_wrappers(run_inprocess, second, named):
    code, run = run_inprocess(f"""
import torch
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, Dataset, Subset, random_split
torch.manual_seed(0)

class Shapes(Dataset):
    classes = ["circle", "square", "star"]
    def __len__(self):
        return 6
    def __getitem__(self, i):
        return torch.full((4,), float(i)), i % 3

class Other(Shapes):
    classes = {second}

both = ConcatDataset([Shapes(), Other()])
train, _ = random_split(both, [8, 4], generator=torch.Generator().manual_seed(1))
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(Subset(train, range(4)), batch_size=4):
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    pred = S.all_predictions(run)[0]
    assert pred["names"] is named
    shown = {"circle", "square", "star"} if named else {"0", "1", "2"}
    assert {s["target"] for s in pred["samples"]} <= shown
    assert all(top[0] in shown for s in pred["samples"] for top in s["top"])


def test_the_index_beneath_a_split_reads_numpy_and_tensor_indices():
    import torch
    from torch.utils.data import Subset

    from tvis_tui.record import samples

    inner = Subset(list(range(10)), np.array([9, 8, 7, 6]))
    outer = Subset(inner, torch.tensor([3, 1]))
    assert samples._index_beneath(outer, np.int64(0)) == 6  # outer[0] -> inner[3] -> 6
    assert samples._index_beneath(list(range(3)), 1) is None  # no split: nothing beneath


@pytest.mark.parametrize("names, targets", [
    ('LABELS = ["cat", "dog", "cow"]', "y"),
    ('CATEGORIES = ["cat", "dog", "cow"]', "y"),
    ('idx2label = {0: "cat", 1: "dog", 2: "cow"}', "y"),
    ('label_names = ["cat", "dog", "cow"]', "labels"),  # a `labels` tensor beside them
])
def test_class_names_in_a_labels_variable_name_the_classes(run_inprocess, names, targets):
    """`LABELS = [...]` named nothing (sweep Q). A batch's `labels` tensor is no list of
    names and hides none."""
    code, run = run_inprocess(f"""
import torch
from torch import nn
torch.manual_seed(0)
{names}
model = nn.Linear(4, 3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(1):
    x, {targets} = torch.randn(5, 4), torch.tensor([0, 1, 2, 1, 0])
    loss = nn.functional.cross_entropy(model(x), {targets})
    opt.zero_grad(); loss.backward(); opt.step()
""")
    assert code == 0
    predicted = S.predictions(run, 1)
    assert predicted["names"] is True
    assert [row["target"] for row in predicted["samples"]] == ["cat", "dog", "cow", "dog", "cat"]


@pytest.mark.parametrize("shape", [(4, 36), (4, 1, 6, 6)])
def test_a_reconstruction_against_soft_targets_is_no_label_prediction(shape):
    """A VAE's binary cross-entropy over pixels in [0, 1] read as 36 "labels" named by
    their indices (sweep U); label smoothing's two target values are still labels."""
    import torch

    from tvis_tui.record import decoding

    torch.manual_seed(0)
    scores, pixels = torch.randn(*shape), torch.rand(*shape)
    assert decoding.label_predictions(scores, pixels, None, probabilities=False) is None
    smoothed = (pixels > 0.5).float() * 0.9 + 0.05
    assert decoding.label_predictions(scores, smoothed, None, probabilities=False) is not None
