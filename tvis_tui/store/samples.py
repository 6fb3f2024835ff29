"""The data half of a run: batches, the samples that formed them, tokenizer calls and
decoded predictions. Extension databases of the run store (see docs/store-format.md).

Records are MessagePack maps written through `RunWriter.put_record` and read through
`RunReader.scan` / `get_record`; array values travel as raw little-endian bytes inside
them (`value["values"]`, `value["image"]["data"]`). Nothing here imports torch.
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np

from tvis_tui.store import codec
from tvis_tui.store.damage import OnDamage, decoded
from tvis_tui.store.data_schema import BATCH, PREDICTION, SAMPLE, TOKEN_CALL, check_bytes, check_kind
from tvis_tui.store.field_types import record_of
from tvis_tui.store.reader import RunReader
from tvis_tui.store.writer import RunWriter

BATCHES = b"batches"  # u64 seq of the DataLoader call -> batch record
SAMPLES = b"samples"  # u64 batch seq + u32 position in the batch -> sample record
TOKENS = b"tokens"  # u64 order (from 1) -> tokenizer call record
PREDICTIONS = b"predictions"  # u32 step -> prediction record

_BATCH, _SAMPLE = record_of(BATCH, also=check_bytes), record_of(SAMPLE, also=check_bytes)
_TOKENS, _PREDICTION = record_of(TOKEN_CALL), record_of(PREDICTION, also=check_kind)


def sample_key(batch_seq: int, position: int) -> bytes:
    return codec.u64(batch_seq) + codec.u32(position)


_SAMPLE_KEY_SIZE = len(sample_key(0, 0))
_LAST_SEQ = 2 ** 64 - 1


# -- writing ---------------------------------------------------------------------------

def put_batch(writer: RunWriter, record: dict[str, Any]) -> None:
    writer.put_record(BATCHES, codec.u64(record["seq"]), record)


def put_sample(writer: RunWriter, batch_seq: int, record: dict[str, Any]) -> None:
    writer.put_record(SAMPLES, sample_key(batch_seq, record["position"]), record)


def put_tokens(writer: RunWriter, order: int, record: dict[str, Any]) -> None:
    writer.put_record(TOKENS, codec.u64(order), record)


def put_prediction(writer: RunWriter, record: dict[str, Any]) -> None:
    writer.put_record(PREDICTIONS, codec.u32(record["step"]), record)


# -- reading ---------------------------------------------------------------------------

def batches(reader: RunReader, step: int | None = None,
            on_damage: OnDamage | None = None) -> list[dict[str, Any]]:
    """Batch records in call order (of one step, when given: read from the step's calls
    only, not the whole run). `on_damage`: see store/damage.py."""
    if step is None:
        return list(decoded(reader.scan(BATCHES), lambda k, v: _batch(reader, k, v), on_damage))
    spans = reader.phases(step)
    if not spans:
        return []
    first, last = min(s.first_seq for s in spans), max(s.last_seq for s in spans)
    rows = reader.scan(BATCHES, codec.u64(first), codec.u64(last + 1))
    return [b for b in (_batch(reader, k, v) for k, v in rows) if b.get("step") == step]


def _batch(reader: RunReader, key: bytes, value: bytes) -> dict[str, Any]:
    """A batch record, its `seq` the key's (what its samples are filed under)."""
    return {**reader.decode(value, _BATCH, "batch", key), "seq": codec.from_u64(key)}


def batch(reader: RunReader, seq: int) -> dict[str, Any] | None:
    return reader.get_record(BATCHES, codec.u64(seq), _BATCH, "batch")


def batches_with_samples(reader: RunReader) -> list[int]:
    """The DataLoader calls that samples are stored for, in order: read from the keys
    alone, so that a damaged batch record does not hide its samples. A key of the wrong
    size (a damaged run) names none."""
    seqs: list[int] = []
    start = b""
    while True:  # one read per batch: its first key, then past its last
        key = next((key for key, _ in reader.scan(SAMPLES, start)), None)
        if key is None:
            return seqs
        if len(key) != _SAMPLE_KEY_SIZE:
            start = key + b"\x00"  # the next key after it
            continue
        seqs.append(codec.from_u64(key[:8]))
        if seqs[-1] >= _LAST_SEQ:
            return seqs
        start = sample_key(seqs[-1] + 1, 0)


def samples(reader: RunReader, batch_seq: int, on_damage: OnDamage | None = None) -> list[dict[str, Any]]:
    """The samples of the batch drawn by DataLoader call `batch_seq`, in batch order."""
    last = batch_seq >= _LAST_SEQ  # a damaged run's key: no key past it to stop at
    rows = reader.scan(SAMPLES, sample_key(batch_seq, 0), None if last else sample_key(batch_seq + 1, 0))
    return list(decoded(rows, lambda k, v: reader.decode(v, _SAMPLE, "sample", k), on_damage))


def batch_tokens_of(batch: dict[str, Any], position: int) -> list[dict[str, Any]]:
    """The part of each tokenizer call made for the batch as a whole (a collate_fn that
    tokenizes its samples' texts, in batch order) that belongs to the sample at `position`:
    its text and its row of ids (None when the ids kept stop short of it), with `row`."""
    out = []
    for call in batch.get("tokens") or []:
        texts = call.get("text")
        if not isinstance(texts, list) or position >= len(texts):
            continue
        ids = _row(call.get("ids"), call.get("shape"), position)
        entry = {key: value for key, value in call.items() if key not in ("text", "ids", "n_ids", "shape")}
        out.append({**entry, "text": texts[position], "ids": ids, "n_ids": len(ids or ()), "row": position})
    return out


def _row(ids: Any, shape: Any, position: int) -> list[int] | None:
    """Row `position` of a batched call's ids: a list per text, or flat with a 2-D shape."""
    if not isinstance(ids, list):
        return None
    if ids and isinstance(ids[0], list):
        return ids[position] if position < len(ids) else None
    if isinstance(shape, list) and len(shape) == 2:
        width = int(shape[1])
        part = ids[position * width:(position + 1) * width]
        return part if len(part) == width else None
    return None


def tokenizer_calls(reader: RunReader, step: int | None = None,
                    on_damage: OnDamage | None = None) -> list[dict[str, Any]]:
    """Tokenizer calls made outside data loading (those inside belong to a sample)."""
    rows = reader.scan(TOKENS)
    out = list(decoded(rows, lambda k, v: reader.decode(v, _TOKENS, "tokenizer", k), on_damage))
    return out if step is None else [t for t in out if t.get("step") == step]


def predictions(reader: RunReader, step: int) -> dict[str, Any] | None:
    return reader.get_record(PREDICTIONS, codec.u32(step), _PREDICTION, "prediction")


def all_predictions(reader: RunReader, on_damage: OnDamage | None = None) -> list[dict[str, Any]]:
    rows = reader.scan(PREDICTIONS)
    return list(decoded(rows, lambda k, v: reader.decode(v, _PREDICTION, "prediction", k), on_damage))


# -- values ----------------------------------------------------------------------------

def array(value: dict[str, Any]) -> np.ndarray | None:
    """The exact values of a "tensor" or "ndarray" sample value, when they were kept."""
    raw = value.get("values")
    if raw is None or value.get("values_dtype") is None:
        return None
    dtype = codec.array_dtype(value["values_dtype"])
    return np.frombuffer(raw, dtype=dtype).reshape(value["shape"])


def image(value: dict[str, Any]) -> np.ndarray | None:
    """A drawable uint8 H x W x C view (C = 1, 3 or 4) of an image-like value, else None."""
    view = value.get("image")
    if not view or view.get("data") is None:
        return None
    return np.frombuffer(view["data"], dtype=np.uint8).reshape(view["shape"])


def to_json(value: Any) -> Any:
    """A record with its bytes as base64 strings (for `tvis export`)."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return value
