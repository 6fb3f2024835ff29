"""Recording tokenizer calls: the text that went in and the token ids that came out.

A tokenizer is an object (not a class, module or nn.Module) whose type has callable
`encode` and `decode`: a hand-written character tokenizer, a Hugging Face tokenizer,
tiktoken's Encoding. Its class's `__call__`, `encode`, `decode` (and batch forms) are
wrapped where they are defined, as soon as tvis sees the class: when a user file or a
tokenizer library defines it (the `class` statement goes through `builtins.__build_class__`,
which tvis wraps), or when an instance turns up in a dataset or the script's namespace.
Only the outermost tokenizer call is recorded (HF's `encode` calls `__call__` machinery).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
import threading
import types
import weakref
from typing import Any, Callable

import torch

ENCODE_METHODS = ("__call__", "encode", "encode_batch", "encode_ordinary", "tokenize")
DECODE_METHODS = ("decode", "decode_batch", "batch_decode")

LIBRARY_MODULES = ("transformers.", "tokenizers", "tiktoken", "sentencepiece")
"""Tokenizer classes from these packages are wrapped like the script's own."""

MAX_IDS = 2048
MAX_TEXT = 2048
MAX_TEXTS = 16
"""A tokenizer call keeps at most this many ids and characters (it may see a corpus)."""


def looks_like_tokenizer(obj: Any) -> bool:
    if isinstance(obj, (type, types.ModuleType, types.FunctionType, torch.nn.Module, str, bytes)):
        return False
    cls = type(obj)
    return callable(getattr(cls, "encode", None)) and callable(getattr(cls, "decode", None))


class _Depth(threading.local):
    n = 0


class TokenizerWatch:
    """Wraps tokenizer classes and hands each outermost call to `sink`, with a function
    that makes its record (only called when the call is to be recorded)."""

    def __init__(self, sink: Callable[[Any, Callable[[], dict[str, Any]]], None], is_user_file: Callable[[str], bool],
                 on_patch: Callable[[Callable[[], None]], None], busy: Callable[[], bool] = lambda: False) -> None:
        self._sink = sink
        # True while tvis itself works: its own decode calls (on its copies) are not the script's.
        self._busy = busy
        self._is_user_file = is_user_file
        self._on_patch = on_patch  # takes the function that undoes a patch
        self._patched: set[tuple[type, str]] = set()
        self._depth = _Depth()
        self.last: weakref.ref | None = None  # the tokenizer used most recently

    def build_class(self, original: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        cls = original(*args, **kwargs)
        try:
            if isinstance(cls, type) and self._wanted(cls):
                self.patch(cls)
        except Exception:  # an odd metaclass: the class works, it is just not watched
            pass
        return cls

    def _wanted(self, cls: type) -> bool:
        encode, decode = getattr(cls, "encode", None), getattr(cls, "decode", None)
        if not (callable(encode) and callable(decode)) or issubclass(cls, torch.nn.Module):
            return False
        if cls.__module__.startswith(LIBRARY_MODULES):
            return True
        code = getattr(inspect.unwrap(encode), "__code__", None)
        return code is not None and self._is_user_file(code.co_filename)

    def patched_classes(self) -> set[type]:
        """The classes whose methods are wrapped now."""
        return {owner for owner, _ in self._patched}

    def consider(self, obj: Any) -> bool:
        """Watch `obj`'s class if `obj` is a tokenizer; True if it is one."""
        if not looks_like_tokenizer(obj):
            return False
        self.patch(type(obj))
        return True

    def patch(self, cls: type) -> None:
        for name in ENCODE_METHODS + DECODE_METHODS:
            owner = next((k for k in cls.__mro__ if name in vars(k)), None)
            if owner is None or owner is object or (owner, name) in self._patched:
                continue
            original = vars(owner)[name]
            if not inspect.isfunction(original):
                continue  # builtin or descriptor: cannot be wrapped safely
            self._patched.add((owner, name))
            setattr(owner, name, self._wrapper(original, name))
            self._on_patch(functools.partial(setattr, owner, name, original))

    def _wrapper(self, original: Callable[..., Any], name: str) -> Callable[..., Any]:
        depth, sink, busy = self._depth, self._sink, self._busy

        @functools.wraps(original)
        def tokenizer_call(tok: Any, *args: Any, **kwargs: Any) -> Any:
            if depth.n or busy():
                return original(tok, *args, **kwargs)
            depth.n += 1
            try:
                result = original(tok, *args, **kwargs)
            finally:
                depth.n -= 1
            self.last = weak_ref(tok)
            sink(tok, lambda: call_record(tok, name, args, kwargs, result))
            return result

        return tokenizer_call


def call_record(tok: Any, method: str, args: tuple, kwargs: dict, result: Any) -> dict[str, Any]:
    first = args[0] if args else next(iter(kwargs.values()), None)
    decoding = method in DECODE_METHODS
    text, ids = (result, first) if decoding else (first, result)
    out = {"tokenizer": type(tok).__name__, "method": method, "text": _text(text)}
    out.update(token_ids(ids))
    return out


def _text(value: Any) -> Any:
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return [v[:MAX_TEXT] for v in value[:MAX_TEXTS]]
    return None


def token_ids(value: Any) -> dict[str, Any]:
    """{"ids": ints or lists of ints (capped), "n_ids": how many there were}."""
    if isinstance(value, Mapping) or hasattr(value, "input_ids"):  # HF's BatchEncoding is both
        inner = value.get("input_ids") if isinstance(value, Mapping) else getattr(value, "input_ids")
        return token_ids(inner)
    if hasattr(value, "ids") and not isinstance(value, torch.Tensor):
        return token_ids(value.ids)  # a `tokenizers` Encoding
    if isinstance(value, torch.Tensor) or hasattr(value, "tolist"):
        try:
            n = int(value.numel() if isinstance(value, torch.Tensor) else value.size)
            flat = value.reshape(-1)[:MAX_IDS].tolist()
        except (AttributeError, TypeError, RuntimeError):
            return {"ids": None, "n_ids": 0}
        return {"ids": flat, "n_ids": n, "shape": list(value.shape)}
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, int) for v in value):
            return {"ids": list(value[:MAX_IDS]), "n_ids": len(value)}
        rows = [token_ids(v) for v in value[:MAX_TEXTS]]
        return {"ids": [r["ids"] for r in rows], "n_ids": sum(r["n_ids"] for r in rows)}
    if isinstance(value, int):
        return {"ids": [value], "n_ids": 1}
    return {"ids": None, "n_ids": 0}


VOCAB_TABLES = ("vocab", "stoi", "itos", "char_to_idx", "idx_to_char", "token_to_id", "id_to_token",
                "encoder", "decoder")
"""Attributes a hand-written tokenizer keeps its vocabulary in, asked when it tells no size."""

PADDED_TO = (8, 64, 128)
"""Models round a large vocabulary (PADDED_FROM ids or more) up to a multiple of these for
speed (nanoGPT: 50257 -> 50304): such logits are still over the tokenizer's ids."""
PADDED_FROM = 256


def vocab_sizes(tok: Any) -> set[int]:
    """The sizes the tokenizer tells: `vocab_size`/`n_vocab` (HF's leaves added tokens out),
    its length (HF's counts them), else the length of a vocabulary table it keeps."""
    sizes = set()
    for attr in ("vocab_size", "n_vocab"):
        value = getattr(tok, attr, None)
        if isinstance(value, int):
            sizes.add(value)
    try:
        sizes.add(len(tok))
    except Exception:  # no __len__, or one that fails
        pass
    if not sizes:  # HF builds `vocab` anew on each read: only asked where nothing else tells
        for attr in VOCAB_TABLES:
            table = getattr(tok, attr, None)
            if isinstance(table, (list, tuple, dict, str)):
                sizes.add(len(table))
    return {n for n in sizes if n > 0}


def vocab_size(tok: Any) -> int | None:
    """The largest size the tokenizer tells: every id below it may be decoded."""
    return max(vocab_sizes(tok), default=None)


def fits_logits(tok: Any, classes: int) -> bool:
    """Whether `classes` logits are scores over this tokenizer's ids."""
    return any(classes == n or (PADDED_FROM <= n < classes and any(classes == -(-n // m) * m for m in PADDED_TO))
               for n in vocab_sizes(tok))


def decodes_exactly(decoder: Any, classes: int) -> bool:
    """Whether a tokenizer that tells no vocabulary size (a hand-written one over a list of
    characters) decodes id `classes - 1` and fails on id `classes`: a table of exactly that
    many tokens. Asked of tvis's private copy: decoding may cache."""
    if classes < 2:
        return False
    try:
        decoder.decode([classes - 1])
    except Exception:
        return False
    try:
        decoder.decode([classes])
    except Exception:  # IndexError, KeyError: past the table's end
        return True
    return False


def weak_ref(tok: Any) -> weakref.ref | None:
    try:
        return weakref.ref(tok)
    except TypeError:
        return None
