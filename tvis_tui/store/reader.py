"""RunReader: random access to a recorded run without loading it.

Every method opens a short read transaction, so a run that `tvis run` is still writing
can be read at the same time: the reader sees what was committed, and more after
`refresh()`. Results decode from MessagePack and raw array bytes only.
"""

from __future__ import annotations

import os
import struct
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import lmdb
import numpy as np

from tvis_tui.errors import TvisError
from tvis_tui.store import codec, layout, lines
from tvis_tui.store.field_types import U32, check_for, record_of, wrong_type
from tvis_tui.store.lines import LineShape
from tvis_tui.store.records import DESCRIPTIVE_META, META, ROLES, CallRecord, PhaseSpan, Slot, StepRecord

_ROLE_CODES = {role: code for code, role in enumerate(ROLES)}
_IS_FILE_ID = check_for(U32)
_META = record_of(META, also=lambda meta: _check_counts(meta))
_META_CHECKS = {key: check_for(META[key]) for key in DESCRIPTIVE_META}

T = TypeVar("T")

FATAL_REPORT_BYTES = 1 << 16
"""Read of a fatal signal's report: every thread's stack, deep ones cut."""

_MALFORMED = (ValueError, TypeError, KeyError, AttributeError, IndexError, struct.error)
"""What unpacking a damaged value, or making a record of data of the wrong shape, raises
(msgpack's errors and UnicodeDecodeError are ValueErrors; a key made of a field that does
not fit it, struct.error)."""


class RunReader:
    """Read-only view of one run folder. Raises TvisError for paths that hold no run."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        _check_run_folder(self.path)
        self._env = self._open_env()
        self._dbs: dict[bytes, Any] = {}
        self._files: dict[int, str] = {}
        try:
            self._check_size()
            self._check_schema()
        except BaseException:
            self._env.close()  # the caller never gets the reader, so nobody else would
            raise
        self.call = lru_cache(maxsize=4096)(self._call)  # type: ignore[method-assign]

    def _check_size(self) -> None:
        """Refuse a data file shorter than its pages: LMDB maps the file and reads pages in
        place, so reading a page past the end of a truncated file is a SIGBUS that kills
        the process with no message. The meta pages (read with read() by lmdb.open, and
        present, since a file under two pages fails there) say where the last page is."""
        needed = (self._env.info()["last_pgno"] + 1) * self._env.stat()["psize"]
        try:
            size = (self.path / layout.DATA_FILE).stat().st_size
        except OSError as exc:
            raise TvisError(f"{self.path}: unreadable run ({_first_line(exc)})") from None
        if size < needed:
            raise TvisError(f"{self.path}: corrupt or truncated run ({layout.DATA_FILE} is "
                            f"{size:,} bytes; its pages need {needed:,})")

    def _check_schema(self) -> None:
        version = self.meta().get("schema_version")
        if version is None:
            raise TvisError(f"{self.path}: not a tvis run (no schema version)")
        if type(version) is not int or version < 1:
            raise TvisError(f"{self.path}: corrupt run (its schema version is {version!r})")
        if version > layout.SCHEMA_VERSION:
            raise TvisError(
                f"{self.path}: recorded with store schema {version}; this tvis reads up to "
                f"{layout.SCHEMA_VERSION} (upgrade tvis)"
            )

    def _open_env(self) -> Any:
        kwargs = dict(readonly=True, max_dbs=layout.MAX_DATABASES, map_size=0)
        try:
            if not (self.path / layout.LOCK_FILE).exists():
                # No writer made one, so none is writing: read lock-free rather than make
                # one in a run copied from elsewhere (on a full disk LMDB's mapped lock
                # file would kill the process).
                return lmdb.open(os.fsencode(self.path), lock=False, **kwargs)
            try:
                return lmdb.open(os.fsencode(self.path), lock=True, **kwargs)
            except lmdb.Error:
                # A run on read-only media (or someone else's files) cannot take the
                # reader lock; it is not being written then, so reading lock-free is safe.
                return lmdb.open(os.fsencode(self.path), lock=False, **kwargs)
        except lmdb.Error as exc:
            # lmdb's message starts with the path already given once in ours.
            reason = _first_line(exc).removeprefix(f"{self.path}: ")
            raise TvisError(f"{self.path}: unreadable run ({reason})") from None

    # -- plumbing ------------------------------------------------------------------------

    def _db(self, name: bytes) -> Any | None:
        if name not in self._dbs:
            try:
                self._dbs[name] = self._env.open_db(name, create=False)
            except lmdb.NotFoundError:
                return None
            except lmdb.Error as exc:
                raise TvisError(f"{self.path}: corrupt run ({_first_line(exc)})") from None
        return self._dbs[name]

    def _txn(self) -> Any:
        try:
            return self._env.begin()
        except lmdb.MapResizedError:
            # The writer grew the map since we opened; adopt its new size.
            self._env.set_mapsize(0)
            return self._env.begin()

    def get_raw(self, db: bytes, key: bytes) -> bytes | None:
        handle = self._db(db)
        if handle is None:
            return None
        try:
            with self._txn() as txn:
                return txn.get(key, db=handle)
        except lmdb.Error as exc:
            raise self._corrupt(exc) from None

    def _corrupt(self, exc: lmdb.Error) -> TvisError:
        """A damaged page surfaces as an lmdb error mid-read; callers get one line."""
        return TvisError(f"{self.path}: corrupt run ({_first_line(exc)})")

    def entries(self, db: bytes) -> int:
        """How many records `db` holds, from LMDB's own count (no scan)."""
        handle = self._db(db)
        if handle is None:
            return 0
        try:
            with self._txn() as txn:
                return int(txn.stat(handle)["entries"])
        except lmdb.Error as exc:
            raise self._corrupt(exc) from None

    def get_record(self, db: bytes, key: bytes, as_record: Callable[[Any], T] = lambda data: data,
                   what: str = "") -> T | None:
        """The value at `key`, decoded as `decode` does; None when there is none."""
        raw = self.get_raw(db, key)
        return None if raw is None else self.decode(raw, as_record, what, key)

    def decode(self, raw: bytes, as_record: Callable[[Any], T] = lambda data: data, what: str = "",
               key: bytes = b"") -> T:
        """One stored value, unpacked (and made a record by `as_record`). A malformed one
        (bit rot, or a run made by hand) is a TvisError: one line for the user, never a
        traceback, and never code run (the codec reads MessagePack's data types only).
        `key`, the record's, names it in that line (`call 3`)."""
        try:
            return as_record(codec.unpack(raw))
        except _MALFORMED as exc:
            raise self._malformed(what or "stored", exc, key) from None

    def _malformed(self, what: str, exc: BaseException, key: bytes = b"") -> TvisError:
        detail = type(exc).__name__ + (f": {_first_line(exc)}" if str(exc) else "")
        at = _record_name(what, key)
        return TvisError(f"{self.path}: corrupt run (a malformed {what} record{at}: {detail})")

    def scan(self, db: bytes, start: bytes = b"", stop: bytes | None = None, *,
             reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """(key, value) pairs with start <= key < stop, in key order (or reversed).
        Lazy: the read transaction lives until the loop ends or breaks."""
        handle = self._db(db)
        if handle is None:
            return
        try:
            with self._txn() as txn:
                yield from _range(txn.cursor(db=handle), start, stop, reverse)
        except lmdb.Error as exc:
            raise self._corrupt(exc) from None

    def refresh(self) -> None:
        """Forget cached records so that a run still being written shows new data."""
        self.call.cache_clear()
        self._dbs.clear()
        self._check_size()  # the file may have been cut short since it was opened

    # -- metadata and sources ------------------------------------------------------------

    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = {}
        damaged: list[str] = []
        for k, v in self.scan(layout.META):
            key = k.decode(errors="replace")
            try:
                meta[key] = self.decode(v, what="meta")
            except TvisError as exc:
                if key in META and key not in DESCRIPTIVE_META:  # one that decides how to read the run
                    raise TvisError(str(exc).replace("a malformed meta record", f"a malformed meta {key!r}", 1)) from None
                damaged.append(key)
        damaged += [key for key in DESCRIPTIVE_META & meta.keys() if not _META_CHECKS[key](meta[key])]
        try:
            meta = _META(_without_damaged(meta, damaged))
        except TypeError as exc:
            raise self._malformed("meta", exc) from None
        return self._with_fatal_signal(meta) if meta.get("status", "running") == "running" else meta

    def _with_fatal_signal(self, meta: dict[str, Any]) -> dict[str, Any]:
        """A run left `running` by a process that died of a fatal signal is crashed, with
        faulthandler's report of it as its exception (layout.FATAL_FILE)."""
        try:
            with open(self.path / layout.FATAL_FILE, "rb") as file:
                report = file.read(FATAL_REPORT_BYTES).decode(errors="replace").strip()
        except OSError:
            return meta
        if not report:
            return meta
        return {**meta, "status": "crashed", "exception": report.splitlines()[0],
                "traceback": report, "fatal_signal": True}

    def file_path(self, file_id: int) -> str:
        path = self._files.get(file_id)
        if path is None:
            raw = self.get_raw(layout.FILES, codec.u32(file_id))
            path = raw.decode(errors="replace") if raw is not None else f"<file {file_id}>"
            self._files[file_id] = path
        return path

    def file_id(self, path: str) -> int | None:
        """The id the run gave `path`, or None. A miss reads the table again: a run still
        recording may have added the file since."""
        for fid, known in self._files.items():
            if known == path:
                return fid
        for key, value in self.scan(layout.FILES):
            self._files[codec.from_u32(key)] = value.decode(errors="replace")
        return next((fid for fid, known in self._files.items() if known == path), None)

    def files(self) -> list[str]:
        return [v.decode(errors="replace") for _, v in self.scan(layout.FILES)]

    def source(self, path: str) -> str | None:
        """The text of `path` as it was when the run was recorded."""
        for key, value in self.scan(layout.FILES):
            if value.decode(errors="replace") == path:
                raw = self.get_raw(layout.SOURCES, key)
                return None if raw is None else raw.decode(errors="replace")
        return None

    # -- calls ---------------------------------------------------------------------------

    def call_count(self) -> int:
        """The highest sequence number committed (calls are numbered from 1)."""
        for key, _ in self.scan(layout.CALLS, reverse=True):
            return codec.from_u64(key)
        return 0

    def stored_calls(self) -> int:
        """How many call records the run holds (`call_count` is the highest number)."""
        return self.entries(layout.CALLS)

    def _call(self, seq: int) -> CallRecord | None:
        return self.get_record(layout.CALLS, codec.u64(seq), self._decode_call, "call")

    def _decode_call(self, data: dict[str, Any]) -> CallRecord:
        for name in ("call_site", "def_site"):
            site = data.get(name)
            if isinstance(site, list):
                file_id, line = site
                if not _IS_FILE_ID(file_id):
                    raise wrong_type(f"{name}.file", file_id)
                data[name] = {"file": self.file_path(file_id), "line": line}
        return CallRecord.from_wire(data)

    def calls(self, first: int, last: int) -> list[CallRecord]:
        """Calls with first <= seq <= last, in order."""
        return [
            self.decode(v, self._decode_call, "call", k)
            for k, v in self.scan(layout.CALLS, codec.u64(first), codec.u64(last + 1))
        ]

    def children(self, seq: int, *, after: int = 0, limit: int | None = None) -> list[int]:
        """Sequence numbers of the calls made directly inside call `seq` (0: top level),
        starting after child `after`, at most `limit` of them."""
        out: list[int] = []
        for key, _ in self.scan(layout.CHILDREN, codec.child_key(seq, after + 1),
                                codec.child_key(seq + 1, 0)):
            out.append(codec.parse_child_key(key)[1])
            if limit is not None and len(out) >= limit:
                break
        return out

    def calls_at(self, file: str, line: int) -> list[int]:
        """Sequence numbers of the calls made from `file:line`, in order."""
        fid = self.file_id(file)
        if fid is None:
            return []
        keys = self.scan(layout.SITES, codec.site_key(fid, line, 0), codec.site_key(fid, line + 1, 0))
        return [codec.parse_site_key(k)[2] for k, _ in keys]

    def nonfinite_calls(self) -> list[int]:
        """Calls whose outputs, or only their gradients, hold NaN or Inf, in order."""
        return [codec.from_u64(k) for k, _ in self.scan(layout.NONFINITE)]

    def nonfinite_grad(self, seq: int) -> bool:
        """Whether the gradients of call `seq`'s outputs (an optimizer's: of the parameters
        it steps) hold NaN or Inf while its outputs do not."""
        return self.get_raw(layout.NONFINITE, codec.u64(seq)) == layout.NONFINITE_GRAD

    # -- nearest neighbours (the viewer's stepping: constant work, whatever the run size) --

    def sibling(self, seq: int, parent: int, *, forward: bool = True) -> int | None:
        """The next (or previous) call made directly inside `parent` after (before) `seq`."""
        if forward:
            start, stop = codec.child_key(parent, seq + 1), codec.child_key(parent + 1, 0)
        else:
            start, stop = codec.child_key(parent, 0), codec.child_key(parent, seq)
        for key, _ in self.scan(layout.CHILDREN, start, stop, reverse=not forward):
            return codec.parse_child_key(key)[1]
        return None

    def calls_matching(self, text: str, first: int, last: int, *, reverse: bool = False) -> Iterator[int]:
        """Seqs of the calls first..last whose name or type contains `text` (any case), or
        whose module path does: a layer's name under its model's (`b.out`, as the optimizer
        names `b.out.weight`). In order or reversed. Records that cannot match are skipped
        without decoding."""
        needle = text.lower()
        # Where the needle spans the model's name and the layer's, what follows one of its
        # dots begins the layer's name.
        tails = [needle[i + 1:] for i, char in enumerate(needle) if char == "."]
        quick = needle.encode() if needle.isascii() else b""
        layer = codec.field_starting("name", tails) if tails and quick else None
        models: dict[int, str | None] = {}
        for key, value in self.scan(layout.CALLS, codec.u64(first), codec.u64(last + 1), reverse=reverse):
            if quick:
                low = value.lower()
                if quick not in low and (layer is None or not layer.search(low)):
                    continue
            data = self.decode(value, as_map, "call", key)
            name = str(data.get("name", "")).lower()
            if needle in name or needle in str(data.get("type", "")).lower():
                yield codec.from_u64(key)
            elif data.get("kind") == "module" and any(name.startswith(tail) for tail in tails):
                model = self._model_name(data.get("parent", 0), models)
                if model is not None and needle in f"{model.lower()}.{name}":
                    yield codec.from_u64(key)

    def _model_name(self, parent: int, known: dict[int, str | None]) -> str | None:
        """The name of the model that a module call made inside call `parent` is part of:
        the outermost module call among `parent` and its callers, through the script's
        functions (a forward that calls a helper that calls a layer); None where there is
        none. `known` keeps what was walked, so that a search reads each call once."""
        walked: list[tuple[int, str | None]] = []  # innermost first; a function names no model
        seq = parent
        while isinstance(seq, int) and seq > 0 and seq not in known:
            data = self.get_record(layout.CALLS, codec.u64(seq), as_map, "call")
            kind = data.get("kind") if data is not None else None
            if kind not in ("module", "function"):
                known[seq] = None
                break
            walked.append((seq, str(data.get("name", "")) if kind == "module" else None))
            seq = data.get("parent", 0)
        model = known.get(seq)
        for seq, name in reversed(walked):  # outermost first: the first module met names it
            model = model or name
            known[seq] = model
        return model

    def nonfinite_near(self, seq: int, *, forward: bool = True) -> int | None:
        """The first call after (or last before) `seq` whose outputs or their gradients
        hold NaN or Inf."""
        if forward:
            keys = self.scan(layout.NONFINITE, codec.u64(seq + 1))
        else:
            keys = self.scan(layout.NONFINITE, codec.u64(0), codec.u64(seq), reverse=True)
        for key, _ in keys:
            return codec.from_u64(key)
        return None

    def call_at_line_near(self, file: str, line: int, seq: int, *, forward: bool = True) -> int | None:
        """The first call after (or last before) `seq` made from `file:line`."""
        fid = self.file_id(file)
        if fid is None:
            return None
        if forward:
            keys = self.scan(layout.SITES, codec.site_key(fid, line, seq + 1), codec.site_key(fid, line + 1, 0))
        else:
            keys = self.scan(layout.SITES, codec.site_key(fid, line, 0), codec.site_key(fid, line, seq),
                             reverse=True)
        for key, _ in keys:
            return codec.parse_site_key(key)[2]
        return None

    # -- slots and values ----------------------------------------------------------------

    def slots(self, seq: int, role: str | None = None) -> list[Slot]:
        """Inputs, outputs, gradients... of call `seq` (one role, or all), in order."""
        if role is None:
            start, stop = codec.slot_key(seq, 0, 0), codec.slot_key(seq + 1, 0, 0)
        else:
            code = _ROLE_CODES[role]
            start, stop = codec.slot_key(seq, code, 0), codec.slot_key(seq, code + 1, 0)
        return [self.decode(v, Slot.from_wire, "slot", k) for k, v in self.scan(layout.SLOTS, start, stop)]

    def values(self, seq: int, slot: Slot) -> np.ndarray | None:
        """The stored values of a tensor slot, or None when they were not captured."""
        if not slot.has_values or slot.shape is None:
            return None
        seq, role, index = slot.values_from or (seq, slot.role, slot.index)
        key = b""  # what the error names: the call, where its number is one
        try:
            key = codec.u64(seq)
            key = codec.slot_key(seq, _ROLE_CODES[role], index)
            raw = self.get_raw(layout.VALUES, key)
            if raw is None:
                return None
            return np.frombuffer(raw, dtype=codec.array_dtype(slot.values_dtype)).reshape(slot.shape)
        except _MALFORMED as exc:
            raise self._malformed("slot", exc, key) from None

    # -- per-line shapes (store/lines.py) ------------------------------------------------

    def has_line_shapes(self) -> bool:
        """Whether the run holds per-line tensor shapes (recorded with lines on)."""
        return any(True for _ in self.scan(layout.LINES))

    def line_shapes(self, file: str, step: int) -> dict[int, list[LineShape]]:
        """The tensors each line of `file` bound during `step`: line -> entries."""
        fid = self.file_id(file)
        if fid is None:
            return {}
        return {r.line: list(r.entries) for r in lines.records(self, fid, step)}

    # -- steps and phases ----------------------------------------------------------------

    def complete_steps(self) -> int:
        """How many steps the run holds that ended: every step record but a last one still
        open (a run killed mid-step, or a step begun just before the script ended)."""
        count = self.entries(layout.STEPS)
        for key, value in self.scan(layout.STEPS, reverse=True):
            if not self.decode(value, StepRecord.from_wire, "step", key).complete:
                count -= 1
            break
        return count

    def steps(self) -> list[StepRecord]:
        return [self.decode(v, StepRecord.from_wire, "step", k) for k, v in self.scan(layout.STEPS)]

    def step(self, step: int) -> StepRecord | None:
        return self.get_record(layout.STEPS, codec.u32(step), StepRecord.from_wire, "step")

    def phases(self, step: int) -> list[PhaseSpan]:
        """The phase spans of a step, in order (data, forward, loss, backward, ...)."""
        rows = self.scan(layout.PHASES, codec.phase_key(step, 0), codec.phase_key(step + 1, 0))
        return [self.decode(v, PhaseSpan.from_wire, "phase") for _, v in rows]

    def phase_steps(self) -> list[int]:
        """Step numbers that hold at least one call (the last may still be open)."""
        steps: list[int] = []
        for key, _ in self.scan(layout.PHASES):
            step = codec.from_u32(key[:4])
            if not steps or steps[-1] != step:
                steps.append(step)
        return steps

    def close(self) -> None:
        self._env.close()

    def __enter__(self) -> "RunReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_run_folder(path: Path) -> None:
    """One line for each way `path` can fail to be a run, before LMDB sees it."""
    try:
        _check_folder(path)
    except OSError as exc:  # a folder of someone else's on a shared machine
        raise TvisError(f"{path}: unreadable run ({exc.strerror or exc})") from None


def _check_folder(path: Path) -> None:
    if path.is_file():
        hint = f"; the run is {path.parent}" if path.name == layout.DATA_FILE else ""
        raise TvisError(f"{path}: not a run folder (a file{hint})")
    if not path.is_dir():
        raise TvisError(f"{path}: no such run folder")
    data = path / layout.DATA_FILE
    if not data.is_file():
        raise TvisError(f"{path}: not a tvis run (no {layout.DATA_FILE})")
    if data.stat().st_size == 0:  # lmdb would say "Bad file descriptor"
        raise TvisError(f"{path}: corrupt or truncated run ({layout.DATA_FILE} is empty)")


def _range(cursor: Any, start: bytes, stop: bytes | None, reverse: bool) -> Iterator[tuple[bytes, bytes]]:
    if not reverse:
        if not cursor.set_range(start):
            return
        for key, value in cursor:
            if stop is not None and key >= stop:
                return
            yield key, value
        return
    positioned = cursor.set_range(stop) if stop is not None else cursor.last()
    if stop is not None:
        positioned = cursor.prev() if positioned else cursor.last()
    if not positioned:
        return
    for key, value in cursor.iterprev():
        if key < start:
            return
        yield key, value


def _record_name(what: str, key: bytes) -> str:
    """Where the record is, from its key: `, call 3` for a call's, a slot's or a batch's,
    `, step 2` for a step's or a prediction's; `, step 2 line 14` for a line's, `, call 3
    sample 0` for a sample's, `, number 4` for a tokenizer call's; else nothing."""
    if what in ("call", "slot", "batch") and len(key) >= 8:
        return f", call {codec.from_u64(key[:8])}"
    if what == "sample" and len(key) == 12:
        return f", call {codec.from_u64(key[:8])} sample {codec.from_u32(key[8:])}"
    if what in ("step", "prediction") and len(key) == 4:
        return f", step {codec.from_u32(key)}"
    if what == "line" and len(key) == 12:
        return f", step {codec.from_u32(key[4:8])} line {codec.from_u32(key[8:])}"
    if what == "tokenizer" and len(key) == 8:
        return f", number {codec.from_u64(key)}"
    return ""


def _without_damaged(meta: dict[str, Any], damaged: list[str]) -> dict[str, Any]:
    """`meta` less the descriptive keys that could not be read, each said in `warnings`."""
    if not damaged:
        return meta
    kept = {key: value for key, value in meta.items() if key not in damaged}
    notes = [f"the run's {key} is damaged and left out" for key in sorted(damaged)]
    kept["warnings"] = kept.get("warnings", []) + notes
    return kept


def _check_counts(meta: dict[str, Any]) -> None:
    """A count the types let through but no recorder writes (a run made or edited by hand)."""
    steps = meta.get("steps_recorded")
    if isinstance(steps, int) and steps < 0:
        raise TypeError(f"field 'steps_recorded' holds {steps}, a negative count")


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0]


def as_map(data: Any) -> dict[str, Any]:
    """`data` if it is a record's field map (the stored form of every record)."""
    if not isinstance(data, dict):
        raise TypeError(f"a {type(data).__name__}, not a map")
    return data
