"""What the model predicted, in words: top-k class names, or argmax tokens as text.

At the first classification loss of a step (cross-entropy or NLL, functional or module
form: the modules call the functional ones), or at its first one that trains when an
earlier one was a metric on detached logits (data.py), the logits and targets are read,
never written. The vocabulary comes from what the script itself has: class names from the
dataset (`classes`, `class_to_idx`, `id2label`, also on a dataset it wraps), the model's
`config.id2label`, or a variable of the script (`classes`, `class_names`, `LABELS`, `id2label`,
...), used where there is one name for each class; a tokenizer from the script's
variables or the one it used last. When the tokenizer's
vocabulary matches the number of logits (or they are it padded to a round size), predictions
are decoded as text, else as classes.
Text is decoded by a private copy of the tokenizer (`TokenizerCopies`): the script's own
one may keep state that a call changes (a cache, a counter the script prints).
"""

from __future__ import annotations

import copy
import inspect
import re
from collections import UserDict
from types import FrameType
from typing import Any, Callable, Iterable

import numpy as np
import torch

from tvis_tui.record.frame_locals import frame_locals
from tvis_tui.record.tokenizers import decodes_exactly, fits_logits, looks_like_tokenizer, vocab_size, vocab_sizes

TOP_K = 5
MAX_LABELS = 64
"""Labels kept per sample of a multi-label prediction at most (all of them when said)."""
MAX_SAMPLES = 64
"""Samples of a batch whose predictions are stored."""

MAX_TEXT = 512

NAME_ATTRS = ("classes", "class_names", "CLASSES", "CLASS_NAMES", "label_names", "LABEL_NAMES",
              "categories", "CATEGORIES", "labels", "LABELS", "idx_to_class", "id2label",
              "idx2label", "class_to_idx", "label2id")
"""Attribute and variable names that hold class names (a list, or a map either way): a
batch's `labels` tensor is no list of names, and names of another count name no class."""

WRAPPED = ("dataset", "base", "data_source")


def class_names(value: Any) -> list[str] | None:
    """A list of names indexed by class, from a list of names or a map either way."""
    if isinstance(value, (list, tuple)) and len(value) >= 2 and all(isinstance(v, str) for v in value):
        return list(value)
    if isinstance(value, UserDict):
        value = value.data  # read as its own dict: no __getitem__ of the script's runs
    if isinstance(value, dict) and len(value) >= 2:
        items = list(value.items())
        if all(isinstance(k, str) and isinstance(v, int) for k, v in items):
            items = [(v, k) for k, v in items]
        if all(isinstance(k, int) and isinstance(v, str) for k, v in items) and min(k for k, _ in items) >= 0:
            names = [str(i) for i in range(max(k for k, _ in items) + 1)]
            for k, v in items:
                names[k] = v
            return names
    return None


def _static(obj: Any, name: str) -> Any:
    """An attribute without running a property (user code) to get it."""
    try:
        value = inspect.getattr_static(obj, name)
    except AttributeError:
        return None
    return None if isinstance(value, (property, staticmethod, classmethod)) else value


def names_of(obj: Any, depth: int = 0) -> list[str] | None:
    """Class names held by a dataset (or one it wraps) or a model's config."""
    if obj is None:
        return None
    for attr in NAME_ATTRS:
        names = class_names(_static(obj, attr))
        if names:
            return names
    config = _static(obj, "config")
    if config is not None and depth < 2:
        names = names_of(config, depth + 1)
        if names:
            return names
    if depth >= 4:
        return None
    for attr in WRAPPED:  # a Subset's dataset (random_split's), a sampler's data source
        inner = _static(obj, attr)
        if inner is not None and inner is not obj:
            names = names_of(inner, depth + 1)
            if names:
                return names
    return _parts_names(obj, depth)


def _parts_names(obj: Any, depth: int) -> list[str] | None:
    """The class names of a ConcatDataset's parts, when those that have some agree (MNIST
    and FashionMNIST put together share indices, not names)."""
    parts = _static(obj, "datasets")
    if not isinstance(parts, (list, tuple)):
        return None
    found = [n for n in (names_of(p, depth + 1) for p in parts if p is not obj) if n]
    return found[0] if found and all(n == found[0] for n in found) else None


def user_frames(frame: FrameType | None, is_user_file: Callable[[str], bool]) -> list[FrameType]:
    out = []
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            out.append(frame)
        frame = frame.f_back
    return out


def _namespace(frames: Iterable[FrameType]) -> Iterable[tuple[str, Any]]:
    for frame in frames:
        yield from list(frame_locals(frame).items())
    for frame in frames:
        yield from list(frame.f_globals.items())


def discover(frames: list[FrameType], objects: Iterable[Any]) -> tuple[list[str] | None, Any]:
    """(class names, tokenizer) from the given objects (datasets, models) first, then the
    variables of the script's frames, innermost first. Without a tokenizer object, the
    script's own id-to-text table serves as one (IdTable)."""
    names = next((n for n in map(names_of, objects) if n), None)
    tokenizer = table = None
    for key, value in _namespace(frames):
        if names is None and key in NAME_ATTRS:
            names = class_names(value)
        if tokenizer is None and not key.startswith("__") and looks_like_tokenizer(value):
            tokenizer = value
        if table is None and key in ID_TABLES:
            table = IdTable.of(key, value)
        if names is not None and tokenizer is not None:
            break
    return names, tokenizer if tokenizer is not None else table


ID_TABLES = ("itos", "ix_to_char", "idx_to_char", "int_to_char", "idx2char", "id2char", "int2char",
             "itoc", "id2token", "idx2token", "id_to_token", "idx_to_token", "itow", "idx2word",
             "id2word", "idx_to_word", "ix_to_word", "int_to_word", "int_to_vocab")
"""Names scripts give the table from token id to text when they have no tokenizer object
(nanoGPT's `itos`, min-char-rnn's `ix_to_char`)."""


_SPECIAL = re.compile(r"<[^<>\s]+>|\[[^\[\]\s]+\]")
"""A special token of a character table: `<pad>`, `</s>`, `[SEP]`."""


class IdTable:
    """The script's own table from token id to text, decoding as the script's `decode`
    function over it would (`''.join(itos[i] for i in ids)`): characters joined as they
    are (special tokens such as `<pad>` and `[SEP]` among them), longer tokens with spaces.
    Decoding it runs no code of the script's."""

    def __init__(self, name: str, table: dict[int, str]) -> None:
        self.name = name
        self.table = table
        self.vocab_size = max(table) + 1
        plain = [token for token in table.values() if not _SPECIAL.fullmatch(token)]
        self.separator = "" if all(len(token) == 1 for token in plain) else " "

    # The last table made: (the script's value itself, its size, its name, the table).
    _last: "tuple[Any, int, str, IdTable | None] | None" = None

    @classmethod
    def of(cls, name: str, value: Any) -> "IdTable | None":
        """The table `value` (a list of strings, or a map from id to string), if it is one;
        made again only when the script's table changes (every loss call asks)."""
        size = len(value) if isinstance(value, (list, tuple, dict)) else -1
        last = cls._last
        if last is not None and last[0] is value and last[1:3] == (size, name):
            return last[3]
        table = cls._made(name, value)
        cls._last = (value, size, name, table)
        return table

    @classmethod
    def _made(cls, name: str, value: Any) -> "IdTable | None":
        if isinstance(value, (list, tuple)):
            value = dict(enumerate(value))
        if not isinstance(value, dict) or len(value) < 2:
            return None
        if not all(isinstance(k, int) and k >= 0 and isinstance(v, str) for k, v in value.items()):
            return None
        return cls(name, dict(value))

    def decode(self, ids: list[int]) -> str:
        return self.separator.join(self.table[i] for i in ids)


def tokenizer_name(tokenizer: Any) -> str:
    """What a tokenizer is called in the records: its class, or the script's table's name."""
    return tokenizer.name if isinstance(tokenizer, IdTable) else type(tokenizer).__name__


class TokenizerCopies:
    """Deep copies of the script's tokenizers, for tvis's own `decode` calls. A copy is
    made again when the tokenizer's vocabulary size changes (tokens added). A tokenizer
    that cannot be copied is not called at all: its predictions keep their ids only."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, int | None, Any]] = {}  # id -> (original, vocab, copy)

    def of(self, tokenizer: Any) -> Any | None:
        vocab = vocab_size(tokenizer)
        held = self._held.get(id(tokenizer))
        if held is not None and held[0] is tokenizer and held[1] == vocab:
            return held[2]
        try:
            private = copy.deepcopy(tokenizer)
        except Exception:  # a lock, a file handle, a native object without pickling
            private = None
        self._held[id(tokenizer)] = (tokenizer, vocab, private)  # the original kept: ids stay unique
        return private


def predictions(logits: Any, target: Any, names: list[str] | None, tokenizer: Any,
                batch_size: int | None, ignore_index: int, copies: TokenizerCopies
                ) -> dict[str, Any] | None:
    """Per-sample predictions beside the targets, or None when `logits` are not logits."""
    if not isinstance(logits, torch.Tensor) or logits.dim() < 2 or not logits.is_floating_point():
        return None
    with torch.no_grad():
        x = logits.detach()
        t = target.detach() if isinstance(target, torch.Tensor) else None
        if x.dim() > 2:  # (N, C, d1, ...) -> (N, d1, ..., C)
            x = x.movedim(1, -1)
            if t is not None and t.is_floating_point() and t.shape == logits.shape:
                t = t.movedim(1, -1)  # class probabilities per position, laid out as the logits
        if tokenizer is not None and _over_tokens(tokenizer, x.shape[-1], _fitting(names, x.shape[-1]), copies):
            decoder = copies.of(tokenizer)
            return _as_text(_unflattened(logits, x), t, tokenizer, decoder, batch_size, ignore_index)
        record = _as_classes(x.reshape(-1, x.shape[-1]), t, _fitting(names, x.shape[-1]), ignore_index)
        record["leading"] = _leading(logits, x)
        return record


def _over_tokens(tokenizer: Any, classes: int, names: list[str] | None, copies: TokenizerCopies) -> bool:
    """Whether logits over `classes` score the tokenizer's ids: its vocabulary size says
    so, or, where it tells none and no class names fit, its decode reaches exactly that far
    (a dataset's four class names beside a four-character tokenizer name classes)."""
    if fits_logits(tokenizer, classes):
        return True
    if vocab_sizes(tokenizer) or names is not None:
        return False
    decoder = copies.of(tokenizer)
    return decoder is not None and decodes_exactly(decoder, classes)


SOFT_TARGET_PROBE = 4096
"""Target values looked at to tell soft targets from labels: a mask of a million pixels
would cost every loss call a sort."""


def label_predictions(scores: Any, target: Any, names: list[str] | None, probabilities: bool
                      ) -> dict[str, Any] | None:
    """Per-sample predictions of a binary cross-entropy (`scores` are logits, or
    `probabilities`): (N, C) scores are independent labels (multi-label), each predicted
    from 0.5 up; any other shape ((N,), (N, 1), a map per pixel (N, 1, H, W)) is a score per
    row read as two classes, the second from 0.5 up, its first dimension the samples. None
    where the target takes more than two values and no class names fit: a reconstruction
    (a VAE's pixels) or soft targets, not labels (label smoothing gives two values)."""
    if not isinstance(scores, torch.Tensor) or not scores.is_floating_point() or scores.dim() == 0:
        return None
    with torch.no_grad():
        p = scores.detach().float()
        p = p if probabilities else torch.sigmoid(p)
        t = target.detach() if isinstance(target, torch.Tensor) else None
        if t is not None and t.numel() != p.numel():
            t = None
        per_row = p.dim() != 2 or p.shape[-1] == 1  # a score per sample, or per pixel or position
        fitting = _fitting(names, 2 if per_row else p.shape[-1])
        if t is not None and fitting is None and t.flatten()[:SOFT_TARGET_PROBE].unique().numel() > 2:
            return None
        if per_row:
            p = p.reshape(-1)
            wanted = None if t is None else (t.reshape(-1) >= 0.5).long()
            # As two classes' log-probabilities: their softmax gives back 1 - p and p.
            record = _as_classes(torch.stack([1 - p, p], -1).log(), wanted, fitting)
        else:
            record = _as_labels(p, None if t is None else t.reshape(p.shape), fitting)
        record["leading"] = int(scores.shape[0])
        return record


def _as_labels(p: torch.Tensor, t: torch.Tensor | None, names: list[str] | None) -> dict[str, Any]:
    """Multi-label rows: the most likely labels, the ones predicted (from 0.5 up), the
    target's, and whether the two sets agree."""
    n = min(p.shape[0], MAX_SAMPLES)
    said = [(row >= 0.5).nonzero().flatten().tolist() for row in p[:n]]
    # Every label said is among the top ones, however many there are.
    k = min(max(TOP_K, max(map(len, said), default=0)), p.shape[-1], MAX_LABELS)
    top_p, top_i = p[:n].topk(k, dim=-1)
    label = _labeler(names)
    finite = torch.isfinite(p[:n]).all(-1).tolist()
    rows = []
    for row, (ps, ids) in enumerate(zip(top_p.tolist(), top_i.tolist())):
        entry: dict[str, Any] = ({"top": [[label(i), i, round(q, 6)] for q, i in zip(ps, ids)],
                                  "predicted": said[row]} if finite[row] else {"top": [], "nonfinite": True})
        if t is not None:
            wanted = (t[row] >= 0.5).nonzero().flatten().tolist()
            entry["target"], entry["target_indices"] = ", ".join(map(label, wanted)) or "none", wanted
            if finite[row]:
                entry["correct"] = said[row] == wanted
        rows.append(entry)
    return {"kind": "labels", "names": names is not None, "classes": p.shape[-1], "rows": p.shape[0],
            "samples": rows}


def _fitting(names: list[str] | None, classes: int) -> list[str] | None:
    """`names` where there is one for each class. Names of another count belong to
    another head (a dataset's ten classes beside a 4-way rotation pretext head): naming
    some classes of this one by them would read as authoritative and be wrong."""
    return names if names is not None and len(names) == classes else None


def _labeler(names: list[str] | None) -> Callable[[int], str]:
    """A class's name, or its index where no name is known."""
    return lambda i: names[i] if names and 0 <= i < len(names) else str(i)


def _leading(logits: torch.Tensor, x: torch.Tensor) -> int:
    """The size of the logits' first dimension as the script had it before any flattening:
    the samples, when the batch comes first. Each sample's rows (its pixels, or its tokens
    flattened for the loss) are consecutive then."""
    if logits.dim() > 2:
        return int(logits.shape[0])
    return int(_unflattened(logits, x).shape[0])


def _as_classes(x: torch.Tensor, t: torch.Tensor | None, names: list[str] | None,
                ignore_index: int = -100) -> dict[str, Any]:
    n = min(x.shape[0], MAX_SAMPLES)
    probs = torch.softmax(x[:n].float(), dim=-1)
    p, idx = probs.topk(min(TOP_K, x.shape[-1]), dim=-1)
    labels = _targets(t, n, x.shape[-1])
    ignorable = t is not None and not t.is_floating_point()  # probability targets ignore nothing
    label = _labeler(names)
    finite = _finite_rows(x[:n]).tolist()
    rows = []
    for row, (ps, ids) in enumerate(zip(p.tolist(), idx.tolist())):
        # NaN/Inf logits rank nothing: their "top" classes would be an artefact of topk.
        entry: dict[str, Any] = ({"top": [[label(i), i, round(q, 6)] for q, i in zip(ps, ids)]}
                                 if finite[row] else {"top": [], "nonfinite": True})
        if labels is not None and ignorable and labels[row] == ignore_index:
            entry["ignored"] = True  # the loss leaves it out: it has no target to be right about
        elif labels is not None:
            entry["target"], entry["target_index"] = label(labels[row]), labels[row]
            if finite[row]:
                entry["correct"] = ids[0] == labels[row]
        rows.append(entry)
    return {"kind": "classes", "names": names is not None, "classes": x.shape[-1], "rows": x.shape[0],
            "samples": rows}


def _finite_rows(x: torch.Tensor) -> torch.Tensor:
    """Which rows of logits rank their classes: no NaN, no +inf, not all -inf. A -inf
    is how a script masks a class out (padding, illegal actions): the others still rank.
    The max carries a NaN through, and needs memory for one value a row, not a copy."""
    return torch.isfinite(x.amax(-1))


def _targets(t: torch.Tensor | None, n: int, classes: int) -> list[int] | None:
    if t is None:
        return None
    if t.is_floating_point() and t.dim() >= 1 and t.shape[-1] == classes:  # probabilities
        return t.reshape(-1, classes)[:n].argmax(-1).tolist()
    if not t.is_floating_point() and t.numel() >= n:
        return t.reshape(-1)[:n].tolist()
    return None


def _unflattened(logits: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """(B, T, V) logits that the script flattened to (B*T, V) for the loss (`view`,
    `reshape`, `flatten`): the sequences, which a flat tensor no longer tells apart when
    no DataLoader gave the batch size. The shape before flattening is the one the view's
    backward node saved (a detached metric has none: it stays flat)."""
    shape = getattr(logits.grad_fn, "_saved_self_sym_sizes", None)
    if (x.dim() == 2 and isinstance(shape, tuple) and len(shape) == 3 and shape[-1] == x.shape[-1]
            and shape[0] * shape[1] == x.shape[0]):
        return x.reshape(int(shape[0]), int(shape[1]), x.shape[-1])
    return x


def _as_text(x: torch.Tensor, t: torch.Tensor | None, tokenizer: Any, decoder: Any | None,
             batch_size: int | None, ignore_index: int) -> dict[str, Any]:
    """Tokens per sample: a flattened (B*T, V) is reshaped by the batch size of the step.
    Other (N, V) logits are N samples of one token each (a next-character MLP, a recurrent
    cell's loss at one time step): nothing says their rows are one text."""
    if x.dim() == 2 and batch_size and x.shape[0] % batch_size == 0:
        x = x.reshape(batch_size, -1, x.shape[-1])
    if x.dim() == 2:
        x = x.unsqueeze(1)
    x = x.reshape(x.shape[0], -1, x.shape[-1])
    pred = x[:MAX_SAMPLES].argmax(-1)
    nonfinite = (~_finite_rows(x[:MAX_SAMPLES])).sum(-1).tolist()
    tgt = t.reshape(x.shape[0], -1)[:MAX_SAMPLES] if t is not None and t.numel() == x.shape[0] * x.shape[1] else None
    rows = []
    for b in range(pred.shape[0]):
        ids = pred[b].tolist()
        entry: dict[str, Any] = {"predicted": _decode(decoder, ids), "predicted_ids": ids}
        if nonfinite[b]:
            entry["nonfinite"] = nonfinite[b]  # positions whose argmax a NaN/Inf decided
        if tgt is not None:
            want = tgt[b].tolist()
            kept = [i for i in want if i != ignore_index]
            # The text of both leaves out the positions the loss ignores (padding).
            said = [p for p, w in zip(ids, want) if w != ignore_index]
            entry.update(predicted=_decode(decoder, said), target=_decode(decoder, kept), target_ids=want,
                         accuracy=sum(p == w for p, w in zip(ids, want) if w != ignore_index) / max(len(kept), 1))
        rows.append(entry)
    return {"kind": "tokens", "tokenizer": tokenizer_name(tokenizer), "classes": x.shape[-1], "samples": rows}


def _decode(tokenizer: Any | None, ids: list[int]) -> str | None:
    if tokenizer is None:
        return None
    try:
        text = tokenizer.decode(ids)
    except Exception:  # a tokenizer that wants another input type: the ids still show
        return None
    return text[:MAX_TEXT] if isinstance(text, str) else None


NOT_TOKENS = ("mask", "type", "position", "tag")
"""Keys of integer members that hold no token ids (`attention_mask`, `token_type_ids`,
`ner_tags`)."""

ID_DTYPES = ("int16", "int32", "int64", "uint16", "uint32", "uint64")
"""Token ids come in these; uint8 is pixels, int8 and bool are flags."""


def decode_sample(value: Any, decoder: Any, vocab: int | None, tokenizer: str) -> None:
    """Add `decoded` (text) and `tokenizer` to each 1-D integer tensor of a described sample
    value (describe.py) whose kept values are all ids of the tokenizer's vocabulary (when
    it tells its size) and decode."""
    if not isinstance(value, dict):
        return
    for key, member in value.get("items") or ():
        if not (isinstance(key, str) and any(word in key.lower() for word in NOT_TOKENS)):
            decode_sample(member, decoder, vocab, tokenizer)
    ids = _token_ids(value, vocab)
    if ids is not None:
        text = _decode(decoder, ids)
        if text is not None:
            value["decoded"], value["tokenizer"] = text, tokenizer


def _token_ids(value: dict[str, Any], vocab: int | None) -> list[int] | None:
    raw, dtype = value.get("values"), value.get("values_dtype")
    if value.get("kind") not in ("tensor", "ndarray") or raw is None or dtype is None:
        return None
    if len(value.get("shape", ())) != 1 or np.dtype(dtype).name not in ID_DTYPES:
        return None
    ids = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    if ids.size < 2 or ids.min() < 0 or (vocab is not None and ids.max() >= vocab):
        return None  # without a vocabulary size, a decode that fails says they are not ids
    return ids.tolist()
