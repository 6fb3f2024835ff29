"""Running a script exactly as `python SCRIPT ARGS` (or `python -m MODULE ARGS`) would,
with the recorder installed, and turning how it ended into run metadata and an exit code.
"""

from __future__ import annotations

import builtins
import importlib.machinery
import importlib.util
import os
import platform
import runpy
import shutil
import socket
import sys
import types
import zipfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from tvis_tui.errors import TvisError
from tvis_tui.interrupts import die_of, pass_on_lost_handler_exceptions
from tvis_tui.record.calls import first_line
from tvis_tui.record.fatal_signals import report_fatal_signals
from tvis_tui.record.hard_exit import close_run_first
from tvis_tui.record.job_rank import job_rank
from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.recorder import Recorder
from tvis_tui.record.recursion import recursion_headroom
from tvis_tui.record.shadowing import folder_first
from tvis_tui.record.step_limit import StopRecording
from tvis_tui.record.terminations import Terminated, end_on_termination
from tvis_tui.record.sink import WriterThread
from tvis_tui.record.uncaught import (exception_text, say, show_uncaught, shown_as_python_would,
                                      usable_stderr, worker_cause)
from tvis_tui.store import processes
from tvis_tui.store.reader import RunReader
from tvis_tui.store.records import Site
from tvis_tui.store.runs import claim_run_path
from tvis_tui.store.writer import RunWriter
from tvis_tui.text import cut


PENDING_BYTES = 1 << 20
"""Commit the store about every MiB: LMDB copies a transaction's values into pages it
mallocs, so a big transaction would show up as training memory in the CPU peak."""


@dataclass(frozen=True)
class Target:
    """What to run: a script path, or a module name (`module=True`), and its arguments."""

    name: str
    args: tuple[str, ...]
    module: bool = False

    def resolve(self) -> tuple[str, str]:
        """(what runs: a file, or a folder holding __main__.py; folder whose files count
        as user code); TvisError if it cannot run."""
        if self.module:
            return _module_origin(self.name), os.getcwd()
        path = Path(self.name)
        if self.name == "-":
            raise TvisError("-: tvis cannot record a script read from stdin; save it to a file")
        if path.is_dir():
            if not (path / "__main__.py").is_file():
                raise TvisError(f"{self.name}: a folder with no __main__.py: nothing to run")
            return str(path), str(path.resolve())
        if not path.exists():
            raise TvisError(f"{self.name}: no such file")
        if not path.is_file():
            raise TvisError(f"{self.name}: not a regular file")
        try:
            path.open("rb").close()
        except OSError as exc:  # python would say so before it ran anything: no run either
            raise TvisError(f"{self.name}: cannot read ({exc.strerror or exc})") from None
        return str(path), str(path.resolve().parent)


def _module_origin(name: str) -> str:
    """The file `python -m name` runs, looked up as python does: from the current folder
    first (tvis's own sys.path[0] is its entry point's folder)."""
    saved = sys.path[0]
    sys.path[0] = os.getcwd()
    try:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.submodule_search_locations is not None:
            # A package runs its __main__ (a namespace package, with no __init__, too).
            spec = importlib.util.find_spec(f"{name}.__main__")
            if spec is None:
                raise TvisError(f"-m {name}: a package with no __main__ module: nothing to run")
    except (ImportError, ValueError) as exc:
        raise TvisError(f"-m {name}: {exc}") from None
    finally:
        sys.path[0] = saved
    if spec is None or spec.origin is None:
        raise TvisError(f"-m {name}: no such module")
    return spec.origin


@dataclass(frozen=True)
class Options:
    out_dir: str = "runs"
    name: str | None = None
    steps: int | None = None
    max_tensor_bytes: int = 1 << 20
    capture: CaptureOptions = CaptureOptions()


def record(target: Target, options: Options) -> int:
    """Run `target` under the recorder; returns the exit status `python` would have."""
    script, user_root = target.resolve()
    rank, rank_problem = job_rank()
    stem = Path(target.name).stem if not target.module else target.name.rsplit(".", 1)[-1]
    name = options.name
    if rank is not None:
        stem, name = rank.name(stem), rank.name(name)
    try:
        # Absolute: a script that changes its folder (Hydra, `os.chdir(here)`) must not
        # move where the run is written, checked and reported.
        path = claim_run_path(options.out_dir, stem, name).absolute()
    except OSError as exc:
        out = Path(options.out_dir)
        reason = "not a folder" if out.exists() and not out.is_dir() else exc.strerror or str(exc)
        raise TvisError(f"{options.out_dir}: cannot make a run folder there ({reason})") from None
    writer = _new_store(path, _start_meta(target, script, options) | (rank.meta() if rank else {}))
    recorder = Recorder(writer, user_root, max_bytes=options.max_tensor_bytes,
                        step_limit=options.steps, options=options.capture)
    if rank_problem is not None:
        recorder.warn(rank_problem)
    outcome = _Outcome()
    undo_fatal_signals = report_fatal_signals(path)
    undo_lost_exits = pass_on_lost_handler_exceptions()  # before tvis's own signals' hooks
    undo_terminations = end_on_termination()

    def close() -> int:
        """The run closed (its steps recorded), and the fatal-signal report with it."""
        try:
            return _close(recorder, outcome)
        finally:
            undo_fatal_signals()

    def hard_exit(status: int, frame: types.FrameType | None) -> None:  # in a thread of its own
        recorder.abandon(None)
        _exited_at_once(status, frame, outcome, recorder)
        _report(outcome, path, close(), recorder.warnings, recorder.writer)
    undo_hard_exit = close_run_first(hard_exit)
    try:
        recorder.install()
        _execute(target, script, outcome, recorder)
    finally:
        undo_terminations()  # from here a SIGTERM kills at once, as under python
        undo_lost_exits()
        undo_hard_exit()
        if recorder.in_recording_process():
            steps = close()
        else:
            recorder.uninstall()  # its hooks, with nothing written
    if not recorder.in_recording_process():
        # A process the script forked, ending: the run is its parent's to close and
        # report; this one ends as python's child would (robustness sweep).
        return outcome.exit_status
    _report(outcome, path, steps, recorder.warnings, recorder.writer)
    if outcome.signum is not None:
        die_of(outcome.signum)  # SIGTERM, SIGHUP: as python would have ended
    if outcome.status == "stopped":  # by Ctrl-C
        raise KeyboardInterrupt  # the CLI ends the process as python would (cli.py)
    return outcome.exit_status


def _close(recorder: Recorder, outcome: _Outcome) -> int:
    """Close the run with how the script ended; the number of steps recorded."""
    return recorder.close(**outcome.meta, ended_at=_now(), device=_device())


def _new_store(path: Path, meta: dict[str, Any]) -> RunWriter:
    """The run's store, its start on disk; a one-line error (the folder removed) when the
    disk takes none of it."""
    try:
        writer = RunWriter(path, max_pending_bytes=PENDING_BYTES)
    except OSError as exc:
        raise _cannot_write(path, exc.strerror or exc) from None
    try:
        writer.put_meta(**meta)
        writer.flush()
    except Exception as exc:  # LMDB's errors are not OSErrors
        writer.abandon()
        raise _cannot_write(path, exc) from None
    return writer


def _cannot_write(path: Path, reason: object) -> TvisError:
    """The error to raise, once the folder claimed for the run (holding nothing of it) is gone."""
    shutil.rmtree(path, ignore_errors=True)
    return TvisError(f"{_display(str(path))}: cannot write the run ({reason})")


class _Outcome:
    def __init__(self) -> None:
        self.exit_status = 0
        self.status = "ok"
        self.summary: str | None = None
        self.meta: dict[str, Any] = {"status": "ok", "exit_status": 0}
        self.signum: int | None = None  # the signal that ended the script (terminations.py)
        self.started_in = os.getcwd()  # paths are shown as named from here, the user's shell

    def set(self, status: str, exit_status: int, **meta: Any) -> None:
        self.status, self.exit_status = status, exit_status
        self.meta = {"status": status, "exit_status": exit_status, **meta}


def _execute(target: Target, script: str, outcome: _Outcome, recorder: Recorder) -> None:
    saved_argv, saved_path0 = sys.argv[:], sys.path[0]
    sys.argv = [script if not target.module else target.name, *target.args]
    # As python: sys.path[0] is the script's folder with symlinks resolved (run_path puts a
    # folder or zip app there itself), __file__ the script's absolute path.
    sys.path[0] = os.getcwd() if target.module else os.path.dirname(os.path.realpath(script))
    try:
        with folder_first(sys.path[0]), recursion_headroom():
            if target.module:
                runpy.run_module(target.name, {"__annotations__": {}}, run_name="__main__", alter_sys=True)
            elif os.path.isfile(script) and not zipfile.is_zipfile(script):
                _run_main(script)
            else:  # a folder or zip app with __main__.py: runpy does what python does
                runpy.run_path(script, {"__annotations__": {}}, run_name="__main__")
    except StopRecording as exc:
        recorder.abandon(exc)
        outcome.set("ok", 0, stopped_by="step limit")
    except SystemExit as exc:
        recorder.abandon(exc)
        _exited(exc, outcome, recorder)
    except KeyboardInterrupt as exc:
        show_uncaught(exc)  # python prints it, then dies of SIGINT (cli.py)
        recorder.abandon(exc)
        outcome.set("stopped", 130, stopped_by="KeyboardInterrupt")
    except Terminated as exc:  # python prints nothing as a SIGTERM kills it
        recorder.abandon(exc)
        outcome.set("stopped", 128 + exc.signum, stopped_by=exc.name)
        outcome.signum = exc.signum
    except BaseException as exc:  # an exception deriving from BaseException crashes python too
        _failed(exc, outcome, recorder, script)
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path0


def _run_main(script: str) -> None:
    """Run a script file as `python script.py` does: as a fresh `__main__` module with an
    absolute `__file__` and a SourceFileLoader (runpy.run_path would also put the absolute
    path into sys.argv[0], where python keeps the path as given)."""
    path = os.path.abspath(script)
    with open(path, "rb") as f:
        source = f.read()
    main = types.ModuleType("__main__")
    main.__dict__.update(__file__=path, __cached__=None, __package__=None, __spec__=None,
                         __annotations__={},
                         __loader__=importlib.machinery.SourceFileLoader("__main__", path),
                         __builtins__=builtins)
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = main
    try:
        # compile() decodes the bytes as python does (a BOM, a PEP 263 coding line).
        exec(compile(source, path, "exec", dont_inherit=True), main.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def _failed(exc: BaseException, outcome: _Outcome, recorder: Recorder, script: str) -> None:
    text = show_uncaught(exc)
    tb = exc.__traceback__
    site = recorder.sites.user_location(tb)
    if site is None and isinstance(exc, SyntaxError) and exc.filename and exc.lineno:
        # The script did not compile: no frame of it ran, and the message holds the place.
        site, lines = Site(exc.filename, exc.lineno), [exc.msg]
    else:
        lines = exception_text(exc).splitlines()
    where = f"{_display(site.file, outcome.started_in)}:{site.line}: " if site else ""
    if site is None and isinstance(exc, (SyntaxError, ValueError)):
        # No line of the script ran: a file that is no Python source (NUL bytes: a
        # SyntaxError, a ValueError in 3.11.2, CI's): say which.
        where = f"{_display(script, outcome.started_in)}: "
    first = first_line("\n".join(lines))
    exception = worker_cause(lines) or (f"{type(exc).__name__}: {first}" if first
                                        else type(exc).__name__)
    failing = recorder.log.failing_call(exc)
    recorder.abandon(exc)
    outcome.set("crashed", 1, exception=exception, traceback=text, failing_seq=failing,
                failing_site=f"{site.file}:{site.line}" if site else None)
    outcome.summary = f"{where}{cut(exception, SUMMARY_CHARS)}"


SUMMARY_CHARS = 300
"""The failure as tvis's one-line summary shows it at most; the run keeps all of it."""


def _exited(exc: SystemExit, outcome: _Outcome, recorder: Recorder) -> None:
    """sys.exit(): 0 or None is a clean end; any other code ended the script early, as
    an exception would have, and the run says where (`x` in the viewer shows it)."""
    code = exc.code
    usable_stderr()
    if code is not None and not isinstance(code, int):
        say(str(code))  # python prints a non-integer code and exits with 1
    # As the process's exit status: True is 1, and the OS keeps the low byte (256 is 0).
    status = 0 if code is None else int(code) & 0xFF if isinstance(code, int) else 1
    if status == 0:
        outcome.set("ok", 0)
        return
    text = shown_as_python_would(exc)
    tb = exc.__traceback__
    site = recorder.sites.user_location(tb) if tb is not None else None
    outcome.set("crashed", status, exception=f"SystemExit: {code}", traceback=text,
                failing_site=f"{site.file}:{site.line}" if site else None)
    where = f"{_display(site.file, outcome.started_in)}:{site.line}: " if site else ""
    outcome.summary = f"{where}the script called sys.exit({code!r}): exit status {status}"


def _exited_at_once(status: int, frame: types.FrameType | None, outcome: _Outcome,
                    recorder: Recorder) -> None:
    """os._exit(status) (hard_exit.py): 0 is a clean end, as sys.exit(0) is; any other
    status ended the script as a failure, at the line that called it."""
    status &= 0xFF  # what the process's parent sees
    if status == 0:
        outcome.set("ok", 0)
        return
    user = recorder.sites.user_frame(frame)
    site = f"{user.f_code.co_filename}:{user.f_lineno}" if user is not None else None
    outcome.set("crashed", status, exception=f"os._exit({status})", failing_site=site)
    where = f"{_display(user.f_code.co_filename, outcome.started_in)}:{user.f_lineno}: " if user is not None else ""
    outcome.summary = f"{where}the script called os._exit({status}): exit status {status}"


def _display(path: str, start: str | None = None) -> str:
    """`path` (a relative one is `start`'s; by default the current folder) relative to
    `start` when it lies under it, else absolute: as named from the folder tvis was
    started in, also where the script changed its own."""
    start = start or os.getcwd()
    full = os.path.normpath(os.path.join(start, path))
    try:
        relative = os.path.relpath(full, start)
    except ValueError:  # another drive
        return full
    return full if relative.split(os.sep, 1)[0] == os.pardir else relative


SHOWN_WARNINGS = 3
"""Recording warnings printed at the end; all of them are in the run's metadata."""


LOW_SPACE_BYTES = 256 << 20
"""Free space under which a failed write is put down to a full disk in the report."""


def _report(outcome: _Outcome, path: Path, steps: int, warnings: list[str],
            writer: WriterThread) -> None:
    usable_stderr()  # a script that closed it and ended well
    where = _display(str(path), outcome.started_in)
    for warning in warnings[:SHOWN_WARNINGS]:
        say(f"tvis: warning: {warning}")
    if len(warnings) > SHOWN_WARNINGS:
        say(f"tvis: warning: {len(warnings) - SHOWN_WARNINGS} more in the run's metadata (tvis export RUN)")
    if writer.errors:
        say(f"tvis: warning: the run is incomplete: {_write_failures(writer, path, where)}")
    if writer.restored:  # `shutil.rmtree("runs")`: TensorBoard's default log folder is tvis's too
        say(f"tvis: warning: {where} was deleted while recording (by the script?); written again at its end")
    if outcome.summary is not None:
        say(f"tvis: {outcome.summary} (run saved to {where})")
    else:
        noun = "step" if steps == 1 else "steps"
        stored = f", {_stored_steps(path)} of them stored" if writer.errors else ""
        # The script was stopped where its next step began: what it does after the loop (a
        # final save, a test pass) did not run, even when the loop was about to end.
        limit = "; stopped the script at the step limit (--steps)" if outcome.meta.get("stopped_by") == "step limit" else ""
        say(f"tvis: recorded {steps} {noun} ({outcome.status}){stored}{limit}; run saved to {where}")


def _write_failures(writer: WriterThread, path: Path, where: str) -> str:
    """The first write error, how many writes failed, and the free space where it is low
    (LMDB reports a full disk as ENOSPC, or as EIO on some file systems, tmpfs for one)."""
    text = writer.errors[0]
    if writer.failed_writes > 1:
        text += f" ({writer.failed_writes} writes failed)"
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return text
    if free < LOW_SPACE_BYTES:
        text += f"; the disk holding {where} has {free / 2**20:.1f} MiB free"
    return text


def _stored_steps(path: Path) -> int | str:
    try:
        with RunReader(path) as reader:
            return reader.complete_steps()
    except Exception:  # the store itself unreadable: the warning above says why
        return "none"


def _command(target: Target, options: Options) -> list[str]:
    """A `tvis run` command that records this run again: the flags that differ from the
    defaults, then the target as typed."""
    flags = [] if options.steps is None else [f"--steps={options.steps}"]
    flags += [] if options.out_dir == Options.out_dir else [f"--out={options.out_dir}"]
    if options.max_tensor_bytes != Options.max_tensor_bytes:
        flags += [f"--max-tensor-bytes={options.max_tensor_bytes}"]
    flags += options.capture.flags()
    return ["tvis", "run", *flags, *(["-m"] if target.module else []), target.name, *target.args]


def _start_meta(target: Target, script: str, options: Options) -> dict[str, Any]:
    return {
        "script": target.name if target.module else script,
        "module": target.module,
        "argv": [target.name, *target.args],
        "command": _command(target, options),
        "cwd": os.getcwd(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "started_at": _now(),
        "status": "running",
        "pid": os.getpid(),
        "process": processes.identity(os.getpid()),
        "host": socket.gethostname(),
        "step_limit": options.steps,
        "max_tensor_bytes": options.max_tensor_bytes,
        **options.capture.to_meta(),
    }


def _device() -> str:
    """The device the script used, asked only afterwards: asking CUDA before the script
    runs would initialize it under the script's feet."""
    if torch.cuda.is_initialized():
        return f"cuda ({torch.cuda.get_device_name(torch.cuda.current_device())})"
    return "cpu"


def _now() -> str:
    return datetime.now(timezone.utc).astimezone().isoformat(timespec="seconds")
