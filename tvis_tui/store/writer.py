"""RunWriter: appends a run to its LMDB environment in batched, crash-safe transactions.

Puts are buffered and committed together; a committed transaction survives the process
being killed (LMDB pages reach the OS on commit), so a run killed at any moment opens with
everything up to the last commit. Commits happen when the buffer passes a size or an age,
on `flush()`, and on `close()`. The map doubles whenever a commit does not fit.

A commit can be handed to another thread (`hand_commits_to`): records are then encoded on
the thread that puts them and only the LMDB transaction runs on the other, whose puts and
commits leave the GIL to the training thread far more than encoding would.
"""

from __future__ import annotations

import errno
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import lmdb

from tvis_tui.store import codec, layout, lines
from tvis_tui.store.lines import LineRecord
from tvis_tui.store.records import ROLES, CallRecord, PhaseSpan, Slot, StepRecord

_ROLE_CODES = {role: code for code, role in enumerate(ROLES)}


MIN_FREE_BYTES = 1 << 20
"""Free space a new run needs on its disk at least (its lock file and first pages)."""


def _check_space(path: Path) -> None:
    """Raise OSError(ENOSPC) when the disk holding `path` is full. LMDB maps its lock file
    into memory: on a full disk, touching that memory kills the process (SIGBUS) instead
    of failing a call; past this point a full disk only fails commits (reported)."""
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return
    if free < MIN_FREE_BYTES:
        raise OSError(errno.ENOSPC, f"no space left on its disk: {free:,} bytes free")


class RunWriter:
    """Writes one run. Thread-safe: hooks on several threads may share one writer."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_pending_bytes: int = 8 << 20,
        max_pending_seconds: float = 0.5,
    ) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        if (self.path / layout.DATA_FILE).exists():
            raise FileExistsError(f"{self.path} already holds a run")
        _check_space(self.path)
        try:
            self._env = lmdb.open(
                os.fsencode(self.path),  # a folder name that is not UTF-8 is still a path
                map_size=layout.INITIAL_MAP_SIZE,
                max_dbs=layout.MAX_DATABASES,
                # No fsync per commit: a killed process loses nothing committed; only a
                # power cut could, and recording speed matters more than that here.
                sync=False,
                metasync=False,
            )
            self._dbs: dict[bytes, Any] = {}
            for name in layout.CORE_DATABASES:
                self._db(name)
        except lmdb.Error as exc:  # a quota, an I/O error: as the OSError it stands for
            raise OSError(errno.EIO, str(exc)) from None
        self._lock = threading.RLock()
        self._pending: list[tuple[bytes, bytes, bytes]] = []
        self._pending_bytes = 0
        self._last_commit = time.monotonic()
        self._max_pending_bytes = max_pending_bytes
        self._max_pending_seconds = max_pending_seconds
        self._file_ids: dict[str, int] = {}
        self._span: PhaseSpan | None = None
        self._span_ordinal: dict[int, int] = {}
        self._closed = False
        self._committer: Callable[[list[tuple[bytes, bytes, bytes]], int], None] | None = None
        self._inode = os.stat(self.path / layout.DATA_FILE).st_ino
        self.restored = False  # the run's folder was deleted while it was written: written again
        self.put_meta(schema_version=layout.SCHEMA_VERSION)
        try:
            self.flush()
        except lmdb.Error as exc:
            self.abandon()
            raise OSError(errno.EIO, str(exc)) from None

    # -- generic -------------------------------------------------------------------------

    def _db(self, name: bytes) -> Any:
        db = self._dbs.get(name)
        if db is None:
            db = self._env.open_db(name, create=True)
            self._dbs[name] = db
        return db

    def put(self, db: bytes, key: bytes, value: bytes) -> None:
        """Buffer one raw put. Extension databases are created on first use."""
        with self._lock:
            if self._closed:
                return
            self._pending.append((db, key, value))
            self._pending_bytes += len(key) + len(value)
            if (
                self._pending_bytes >= self._max_pending_bytes
                or time.monotonic() - self._last_commit >= self._max_pending_seconds
            ):
                self._commit()

    def put_record(self, db: bytes, key: bytes, value: Any) -> None:
        """Buffer one MessagePack-encoded value (a dict, list, str, number or bytes)."""
        self.put(db, key, codec.pack(value))

    def flush(self) -> None:
        """Commit everything buffered so far."""
        with self._lock:
            self._commit()

    def flush_stale(self) -> None:
        """Commit what has waited `max_pending_seconds` or more: `put` commits only as the
        next record comes, and a long op, an evaluation or a sleep makes none."""
        with self._lock:
            if self._pending and time.monotonic() - self._last_commit >= self._max_pending_seconds:
                self._commit()

    def hand_commits_to(
        self, committer: Callable[[list[tuple[bytes, bytes, bytes]], int], None] | None
    ) -> None:
        """From now on give each commit's buffered puts, and their size in bytes, to
        `committer`, which must pass them to `write` in the order given (from a thread of
        its own); None writes them on the committing thread again."""
        with self._lock:
            self._committer = committer

    def _commit(self) -> None:
        pending, size = self._pending, self._pending_bytes
        self._pending, self._pending_bytes = [], 0
        self._last_commit = time.monotonic()
        if not pending:
            return
        if self._committer is not None:
            self._committer(pending, size)
        else:
            self.write(pending)

    def write(self, pending: list[tuple[bytes, bytes, bytes]]) -> None:
        """Apply buffered puts in one transaction. Databases are opened here, outside any
        transaction: opening one takes LMDB's write lock too."""
        for name in {db for db, _, _ in pending}:
            self._db(name)
        while True:
            try:
                with self._env.begin(write=True) as txn:
                    for db, key, value in pending:
                        txn.put(key, value, db=self._dbs[db])
                return
            except lmdb.MapFullError:
                self._env.set_mapsize(self._env.info()["map_size"] * 2)

    # -- typed records -------------------------------------------------------------------

    def put_meta(self, **values: Any) -> None:
        for name, value in values.items():
            self.put_record(layout.META, codec.text(name), value)

    def file_id(self, path: str) -> int:
        """The id of a source file, registering it on first sight."""
        with self._lock:
            fid = self._file_ids.get(path)
            if fid is None:
                fid = len(self._file_ids) + 1
                self._file_ids[path] = fid
                self.put(layout.FILES, codec.u32(fid), codec.text(path))
            return fid

    def put_source(self, path: str, text: str) -> None:
        self.put(layout.SOURCES, codec.u32(self.file_id(path)), codec.text(text))

    def put_call(self, call: CallRecord, *, first: bool = True, spanned: bool = True) -> None:
        """Write a call. Write it when it starts (`first=True`, in seq order) and again
        with `first=False` when it returns, so an unfinished call is on disk too. A call
        whose phase is not known yet is written `spanned=False`, and `place`d later."""
        with self._lock:
            wire = call.to_wire()
            # Sites travel as [file id, line]: a path repeated in every call would
            # dominate the size of a run.
            for site in ("call_site", "def_site"):
                loc = getattr(call, site)
                if loc is not None:
                    wire[site] = [self.file_id(loc.file), loc.line]
            self.put_record(layout.CALLS, codec.u64(call.seq), wire)
            if first:
                self.put(layout.CHILDREN, codec.child_key(call.parent, call.seq), b"")
                if call.call_site is not None:
                    fid = self.file_id(call.call_site.file)
                    self.put(layout.SITES, codec.site_key(fid, call.call_site.line, call.seq), b"")
                if spanned:
                    self.place(call.step, call.phase, call.seq, call.seq)
            if call.nonfinite_output:
                self.put(layout.NONFINITE, codec.u64(call.seq), b"")

    def put_nonfinite_grad(self, seq: int) -> None:
        """Mark call `seq`, whose outputs were finite, as one whose output gradients are not."""
        self.put(layout.NONFINITE, codec.u64(seq), layout.NONFINITE_GRAD)

    def place(self, step: int, phase: str, first_seq: int, last_seq: int) -> None:
        """List calls `first_seq`..`last_seq` of `step`, which follow every call listed so
        far, in a span of `phase`: the last span, extended, where it is of that step and
        phase (over both ranges: a call numbered on one thread may be listed after one
        numbered later on another)."""
        with self._lock:
            span = self._span
            if span is not None and span.step == step and span.phase == phase:
                span = PhaseSpan(span.step, span.ordinal, span.phase, min(span.first_seq, first_seq),
                                 max(span.last_seq, last_seq))
            else:
                ordinal = self._span_ordinal.get(step, 0)
                self._span_ordinal[step] = ordinal + 1
                span = PhaseSpan(step, ordinal, phase, first_seq, last_seq)
            self._span = span
            self.put_record(layout.PHASES, codec.phase_key(span.step, span.ordinal), span.to_wire())

    def put_slot(self, seq: int, slot: Slot, values: bytes | None = None) -> None:
        """Attach a slot to call `seq`; `values` are the raw array bytes when captured."""
        key = codec.slot_key(seq, _ROLE_CODES[slot.role], slot.index)
        self.put_record(layout.SLOTS, key, slot.to_wire())
        if values is not None:
            self.put(layout.VALUES, key, values)

    def put_slots(self, seq: int, slots: Iterable[tuple[Slot, bytes | None]]) -> None:
        for slot, values in slots:
            self.put_slot(seq, slot, values)

    def put_step(self, step: StepRecord) -> None:
        self.put_record(layout.STEPS, codec.u32(step.step), step.to_wire())

    def put_lines(self, step: int, records: Iterable[tuple[str, LineRecord]]) -> None:
        """Per-line tensor shapes of one step: (file path, record) pairs (store/lines.py)."""
        for path, record in records:
            key = lines.line_key(self.file_id(path), step, record.line)
            self.put_record(layout.LINES, key, lines.to_wire(record))

    # -- lifetime ------------------------------------------------------------------------

    def close(self, **final_meta: Any) -> None:
        """Write the final metadata, commit, and close. Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            try:
                self.put_meta(**final_meta)  # may commit what is buffered on its own
                self._commit()
                self._restore_if_deleted()
            except Exception:
                # A full disk: the records left did not fit. The metadata alone may, and it
                # says how the run ended and that it is incomplete (else it reads "running").
                self._pending = [(layout.META, codec.text(name), codec.pack(value))
                                 for name, value in {**final_meta, "incomplete": True}.items()]
                try:
                    self.write(self._pending)
                except Exception:
                    pass
                raise
            finally:
                self._pending, self._pending_bytes = [], 0
                self._closed = True
                self._env.close()

    def _restore_if_deleted(self) -> None:
        """A script that clears its `runs/` folder (TensorBoard's default log folder too)
        deletes the run while tvis writes it; LMDB still holds the deleted file open, whole:
        a copy of it goes back where the run belongs (robustness sweep)."""
        data = self.path / layout.DATA_FILE
        try:
            if os.stat(data).st_ino == self._inode:
                return
        except FileNotFoundError:
            pass
        else:
            raise OSError(errno.EEXIST, f"{data} was replaced while the run was written")
        self.path.mkdir(parents=True, exist_ok=True)
        self._env.copy(os.fsencode(self.path))
        self.restored = True

    def abandon(self) -> None:
        """Close without writing what is buffered (its first commit failed)."""
        with self._lock:
            if not self._closed:
                self._pending, self._pending_bytes = [], 0
                self._closed = True
                self._env.close()

    def __enter__(self) -> "RunWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
