"""A character-level language model on generated text: the second bundled tvis example.

The text is made in code from a seed (no download): sentences from a tiny grammar. A
character tokenizer, a DataLoader of windows, a small causal Transformer, the functional
cross-entropy, AdamW with a warm-up schedule and gradient clipping. At the end it samples
a line in eval mode (with a private generator). Runs in a few seconds on a CPU.

    python examples/char_lm/train.py --max-steps 20
    tvis run --steps 3 examples/char_lm/train.py
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

SUBJECTS = ["the cat", "a dog", "my friend", "the old man", "a small bird", "the teacher"]
VERBS = ["sees", "likes", "follows", "draws", "finds", "helps"]
OBJECTS = ["the ball", "a red kite", "the river", "her book", "the moon", "a green tree"]


def make_text(sentences: int, seed: int) -> str:
    g = torch.Generator().manual_seed(seed)
    pick = lambda words: words[int(torch.randint(len(words), (1,), generator=g))]  # noqa: E731
    return " ".join(f"{pick(SUBJECTS)} {pick(VERBS)} {pick(OBJECTS)}." for _ in range(sentences))


class CharTokenizer:
    """Maps each character of a training text to an id and back."""

    def __init__(self, text: str) -> None:
        self.chars = sorted(set(text))
        self.index = {c: i for i, c in enumerate(self.chars)}

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> torch.Tensor:
        return torch.tensor([self.index[c] for c in text], dtype=torch.long)

    def decode(self, ids: torch.Tensor) -> str:
        return "".join(self.chars[int(i)] for i in ids)


class Windows(Dataset):
    """(input ids, next-character ids) windows of `context` characters."""

    def __init__(self, ids: torch.Tensor, context: int) -> None:
        self.ids = ids
        self.context = context

    def __len__(self) -> int:
        return len(self.ids) - self.context - 1

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        chunk = self.ids[i : i + self.context + 1]
        return chunk[:-1], chunk[1:]


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, context: int, dim: int = 32, heads: int = 4, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(context, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=4 * dim, dropout=0.1,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(context),
                             persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        x = self.embed(ids) + self.pos(torch.arange(t, device=ids.device))
        x = self.encoder(x, mask=self.mask[:t, :t], is_causal=True)
        return self.head(self.norm(x))


@torch.no_grad()
def sample(model: CharTransformer, tok: CharTokenizer, prompt: str, length: int, context: int) -> str:
    model.eval()
    g = torch.Generator().manual_seed(1234)
    ids = tok.encode(prompt)
    for _ in range(length):
        logits = model(ids[-context:].unsqueeze(0))[0, -1]
        nxt = torch.multinomial(torch.softmax(logits, -1), 1, generator=g)
        ids = torch.cat([ids, nxt])
    model.train()
    return tok.decode(ids)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--context", type=int, default=32)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--save-state", default=None, help="save model, optimizer and RNG state here")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)
    text = make_text(200, seed=args.seed)
    tok = CharTokenizer(text)
    loader = DataLoader(Windows(tok.encode(text), args.context), batch_size=args.batch_size,
                        shuffle=True)
    model = CharTransformer(tok.vocab_size, args.context)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 10))

    step = 0
    for _ in range(args.epochs):
        for ids, targets in loader:
            logits = model(ids)
            loss = F.cross_entropy(logits.reshape(-1, tok.vocab_size), targets.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            step += 1
            print(f"step {step} loss {loss.item():.6f} lr {scheduler.get_last_lr()[0]:.6f}", flush=True)
            if args.max_steps is not None and step >= args.max_steps:
                break
        if args.max_steps is not None and step >= args.max_steps:
            break

    print("sample:", repr(sample(model, tok, "the ", 40, args.context)))
    if args.save_state:
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state()},
                   args.save_state)


if __name__ == "__main__":
    main()
