"""Names of the LMDB databases in a run and the files of a run folder."""

from __future__ import annotations

SCHEMA_VERSION = 1
"""Bumped when a reader of the previous version would misread a run."""

DATA_FILE = "data.mdb"
LOCK_FILE = "lock.mdb"
FATAL_FILE = "fatal.txt"
"""faulthandler's report of the fatal signal (SIGSEGV, SIGABRT, ...) that ended the recording
process, written as it died; absent once a run is closed (record/fatal_signals.py)."""

META = b"meta"  # str key -> any value
FILES = b"files"  # u32 file id -> path
SOURCES = b"sources"  # u32 file id -> source text snapshotted at record time
CALLS = b"calls"  # u64 seq -> CallRecord
CHILDREN = b"children"  # u64 parent + u64 child -> b""
SLOTS = b"slots"  # u64 seq + u8 role + u16 index -> Slot
VALUES = b"values"  # same key as SLOTS -> raw array bytes (C order, little-endian)
STEPS = b"steps"  # u32 step -> StepRecord
PHASES = b"phases"  # u32 step + u16 ordinal -> PhaseSpan
SITES = b"sites"  # u32 file id + u32 line + u64 seq -> b"" (calls made from that line)
NONFINITE = b"nonfinite"  # u64 seq -> b"" (its outputs hold NaN or Inf) or NONFINITE_GRAD
NONFINITE_GRAD = b"grad"  # in NONFINITE: only the gradients of the call's outputs hold NaN or Inf
LINES = b"lines"  # u32 file id + u32 step + u32 line -> line record (store/lines.py; extension)

CORE_DATABASES = (META, FILES, SOURCES, CALLS, CHILDREN, SLOTS, VALUES, STEPS, PHASES, SITES, NONFINITE)

MAX_DATABASES = 64
"""Room for the core databases plus extensions (samples, batches, line shapes, ...)."""

INITIAL_MAP_SIZE = 64 << 20
"""LMDB's map size is a ceiling, not an allocation; the writer doubles it on demand."""
