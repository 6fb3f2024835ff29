"""The shapes of the data half's records (batches, samples, tokenizer calls, predictions),
checked as they are read: the viewer then meets only the types it draws.

These records are maps that grow with the recorder (docs/store-format.md, "Data
extension"), so the schemas name the keys a reader uses and their types; other keys pass.
A value (a sample's item, a transform's input or stage) is a map with `kind` and, by kind,
a tensor's `shape`/`dtype`/`stats`/`values`, a drawable `image`, a `text`, or the `items`
of a tuple, list or dict, each a [key, value] pair. Beyond types, stored bytes must fit
the shape they claim: a picture drawn from too few bytes would fail in the screen.
"""

from __future__ import annotations

import math
from typing import Any

from tvis_tui.store import codec
from tvis_tui.store.field_types import U32, U64, Fields, Later, record_of

STATS: Fields = {"numel": int, "min": float | None, "max": float | None, "mean": float | None,
                 "std": float | None, "norm": float | None, "nan": int, "posinf": int,
                 "neginf": int, "zeros": int}
IMAGE: Fields = {"data": bytes, "shape": list[U32], "stride": int, "lo": float, "hi": float,
                 "layout": str}
VALUE: Fields = {"kind": str, "dtype": str, "shape": list[U32], "stats": STATS,
                 "values": bytes | None, "values_dtype": str | None, "image": IMAGE,
                 "length": int, "text": str, "decoded": str, "tokenizer": str, "mode": str,
                 "size": list[int], "repr": str,
                 "items": list[tuple[Any, Later(lambda: VALUE)]]}
TOKEN_CALL: Fields = {"tokenizer": str, "method": str, "text": str | list[str],
                      "ids": list[int] | list[list[int]], "n_ids": int, "shape": list[int],
                      "step": U32, "after_seq": U64}
TRANSFORM: Fields = {"attr": str, "name": str, "input": VALUE, "output": VALUE,
                     "stages": list[{"name": str, "value": VALUE}]}
BATCH: Fields = {"seq": U64, "step": U32, "collate": str, "size": int, "detailed": int,
                 "worker": int | None, "dataset": str, "tokens": list[TOKEN_CALL],
                 "transforms": list[TRANSFORM]}
SAMPLE: Fields = {"position": U32, "base_index": int, "item": VALUE,
                  "transforms": list[TRANSFORM], "tokens": list[TOKEN_CALL]}
PREDICTED_SAMPLE: Fields = {
    "top": list[tuple[str | int, int, float]], "target": str | None, "target_index": int,
    "correct": bool, "ignored": bool, "nonfinite": bool | int, "accuracy": float,
    "predicted": str | list[int] | None, "predicted_ids": list[int], "target_ids": list[int],
    "target_indices": list[int]}
PREDICTION: Fields = {"kind": str, "step": U32, "loss": str, "loss_seq": U64, "after_seq": U64,
                      "rows": int, "leading": int, "classes": int, "names": bool,
                      "tokenizer": str, "samples": list[PREDICTED_SAMPLE]}

TOKEN_PREDICTION: Fields = {"samples": list[{"predicted": str | None, "target": str | None}]}
"""A `tokens` prediction's samples: text (`predicted` is a list of indices for `labels`)."""


def check_kind(prediction: dict[str, Any]) -> None:
    """TypeError unless a prediction's samples fit its kind (after PREDICTION's check)."""
    if prediction.get("kind") == "tokens":
        _tokens_prediction(prediction)


_tokens_prediction = record_of(TOKEN_PREDICTION)


def check_bytes(data: Any) -> None:
    """ValueError unless every tensor's values and every picture in a (type-checked)
    record fit their shape."""
    if isinstance(data, list):
        for item in data:
            check_bytes(item)
        return
    if not isinstance(data, dict):
        return
    if isinstance(data.get("values"), bytes) and isinstance(data.get("values_dtype"), str):
        itemsize = codec.array_dtype(data["values_dtype"]).itemsize
        if len(data["values"]) != math.prod(data.get("shape") or ()) * itemsize:
            raise ValueError(f"{len(data['values'])} bytes of {data['values_dtype']} for shape {data.get('shape')}")
    image = data.get("image")
    if isinstance(image, dict) and isinstance(image.get("data"), bytes):
        if len(image["shape"]) != 3 or len(image["data"]) != math.prod(image["shape"]):
            raise ValueError(f"a picture of {len(image['data'])} bytes for shape {image['shape']}")
    for value in data.values():
        if isinstance(value, (dict, list)):
            check_bytes(value)
