"""`tvis export`: a run as JSON or JSON lines, streamed, through the reader API only.

JSON lines: one object per line, each with a "record": first "meta", then one "step" per
step, then one "call" per call (with its slots), the data records, then one "line" per
(file, step, line) of user code that ran (the tensors it bound), and last one "damaged"
per data or line record that could not be read (its "reason"): left out, not the end of
the export. JSON: one object {"meta", "steps", "calls", "data"} with the same objects
(data, line and damaged records in "data"). Non-finite floats become the strings "nan",
"inf", "-inf" so the output is strict JSON.
"""

from __future__ import annotations

import itertools
import json
import math
from typing import Any, Iterator, TextIO

from tvis_tui.errors import TvisError
from tvis_tui.store import RunReader
from tvis_tui.store import lines, samples
from tvis_tui.store.damage import OnDamage
from tvis_tui.store.runs import run_status

CHUNK = 2048
"""Calls read per batch: bounds memory on runs with millions of calls."""


def finite_json(value: Any) -> Any:
    """`value` with NaN/Inf floats replaced by strings (JSON has no spelling for them)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {k: finite_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_json(v) for v in value]
    return value


def _meta_object(reader: RunReader) -> dict[str, Any]:
    """The run's meta with the status `tvis ls` shows: a run whose recorder died without
    closing it still says "running" on disk, and is "stopped" once its process is gone."""
    meta = reader.meta()
    meta["status"] = run_status(meta)
    return meta


def _call_objects(reader: RunReader) -> Iterator[dict[str, Any]]:
    total = reader.call_count()
    for first in range(1, total + 1, CHUNK):
        for call in reader.calls(first, min(first + CHUNK - 1, total)):
            obj = call.to_wire()
            obj["nonfinite_grad"] = reader.nonfinite_grad(call.seq)
            obj["slots"] = [_slot_object(reader, call.seq, slot) for slot in reader.slots(call.seq)]
            yield obj


def _slot_object(reader: RunReader, seq: int, slot: Any) -> dict[str, Any]:
    obj = slot.to_wire()
    if slot.role == "per_sample":  # one number per sample, and what the reader came for
        values = reader.values(seq, slot)
        if values is not None:
            obj["values"] = values.tolist()
    return obj


def _data_objects(reader: RunReader, on_damage: OnDamage) -> Iterator[tuple[str, dict[str, Any]]]:
    """Batches with their samples, tokenizer calls and predictions (bytes as base64)."""
    batches = {batch["seq"]: batch for batch in samples.batches(reader, on_damage=on_damage)}
    # A damaged batch record is left out, not the samples filed under its call.
    for seq in sorted(batches.keys() | set(samples.batches_with_samples(reader))):
        if seq in batches:
            yield "batch", samples.to_json(batches[seq])
        for sample in samples.samples(reader, seq, on_damage):
            yield "sample", {"batch_seq": seq, **samples.to_json(sample)}
    for call in samples.tokenizer_calls(reader, on_damage=on_damage):
        yield "tokens", samples.to_json(call)
    for prediction in samples.all_predictions(reader, on_damage):
        yield "prediction", samples.to_json(prediction)


def _line_objects(reader: RunReader, on_damage: OnDamage) -> Iterator[tuple[str, dict[str, Any]]]:
    """Per-line tensor shapes: one object per (file, step, line) that ran."""
    for file_id, step, record in lines.all_records(reader, on_damage):
        yield "line", {"file": reader.file_path(file_id), "step": step, "line": record.line,
                       **lines.to_wire(record)}


def _data_and_lines(reader: RunReader, damaged: list[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The data and line records, then one "damaged" record per one left out (their
    reasons also go to `damaged`)."""
    def on_damage(exc: TvisError) -> None:
        reason = str(exc)  # a key the codec could not read names no run
        damaged.append(reason if reason.startswith(f"{reader.path}: ") else f"{reader.path}: {reason}")

    yield from itertools.chain(_data_objects(reader, on_damage), _line_objects(reader, on_damage))
    for reason in damaged:
        yield "damaged", {"reason": reason}


def _step_objects(reader: RunReader) -> Iterator[dict[str, Any]]:
    for step in reader.steps():
        yield step.to_wire()


def export_jsonl(reader: RunReader, out: TextIO) -> list[str]:
    """Writes the run; returns why each record left out could not be read."""
    damaged: list[str] = []

    def emit(kind: str, obj: dict[str, Any]) -> None:
        out.write(json.dumps({"record": kind, **finite_json(obj)}, allow_nan=False))
        out.write("\n")

    emit("meta", _meta_object(reader))
    for step in _step_objects(reader):
        emit("step", step)
    for call in _call_objects(reader):
        emit("call", call)
    for kind, obj in _data_and_lines(reader, damaged):
        emit(kind, obj)
    return damaged


def export_json(reader: RunReader, out: TextIO) -> list[str]:
    """Writes the run; returns why each record left out could not be read."""
    damaged: list[str] = []

    def dump(obj: Any) -> str:
        return json.dumps(finite_json(obj), allow_nan=False)

    out.write('{"meta": ' + dump(_meta_object(reader)) + ', "steps": [')
    _write_list(out, (dump(s) for s in _step_objects(reader)))
    out.write('], "calls": [')
    _write_list(out, (dump(c) for c in _call_objects(reader)))
    out.write('], "data": [')
    _write_list(out, (dump({"record": k, **o}) for k, o in _data_and_lines(reader, damaged)))
    out.write("]}\n")
    return damaged


def _write_list(out: TextIO, items: Iterator[str]) -> None:
    for i, item in enumerate(items):
        if i:
            out.write(", ")
        out.write(item)
