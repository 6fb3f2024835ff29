"""Running a script exactly as `python SCRIPT ARGS` (or `python -m MODULE ARGS`) would,
with the recorder installed, and turning how it ended into run metadata and an exit code.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import runpy
import socket
import sys
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from tvis_tui.errors import TvisError
from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.recorder import Recorder, StopRecording
from tvis_tui.store.runs import new_run_path
from tvis_tui.store.writer import RunWriter


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
        """(file that runs, folder whose files count as user code); TvisError if missing."""
        if self.module:
            try:
                spec = importlib.util.find_spec(self.name)
            except (ImportError, ValueError) as exc:
                raise TvisError(f"-m {self.name}: {exc}") from None
            if spec is None or spec.origin is None:
                raise TvisError(f"-m {self.name}: no such module")
            return spec.origin, os.getcwd()
        path = Path(self.name)
        if not path.is_file():
            raise TvisError(f"{self.name}: no such file")
        return str(path), str(path.resolve().parent)


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
    path = new_run_path(options.out_dir, Path(target.name).stem if not target.module
                        else target.name.rsplit(".", 1)[-1], options.name)
    try:
        writer = RunWriter(path, max_pending_bytes=PENDING_BYTES)
    except (OSError, FileExistsError) as exc:
        raise TvisError(f"{path}: cannot write the run ({exc})") from None
    writer.put_meta(**_start_meta(target, script, options))
    writer.flush()
    recorder = Recorder(writer, user_root, max_bytes=options.max_tensor_bytes,
                        step_limit=options.steps, options=options.capture)
    outcome = _Outcome()
    try:
        recorder.install()
        _execute(target, script, outcome, recorder)
    finally:
        steps = recorder.close(**outcome.meta, ended_at=_now(), device=_device())
    _report(outcome, path, steps)
    return outcome.exit_status


class _Outcome:
    def __init__(self) -> None:
        self.exit_status = 0
        self.status = "ok"
        self.summary: str | None = None
        self.meta: dict[str, Any] = {"status": "ok", "exit_status": 0}

    def set(self, status: str, exit_status: int, **meta: Any) -> None:
        self.status, self.exit_status = status, exit_status
        self.meta = {"status": status, "exit_status": exit_status, **meta}


def _execute(target: Target, script: str, outcome: _Outcome, recorder: Recorder) -> None:
    saved_argv, saved_path0 = sys.argv[:], sys.path[0]
    sys.argv = [script if not target.module else target.name, *target.args]
    sys.path[0] = os.getcwd() if target.module else os.path.dirname(os.path.abspath(script))
    try:
        if target.module:
            runpy.run_module(target.name, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(script, run_name="__main__")
    except StopRecording as exc:
        recorder.abandon(exc)
        outcome.set("ok", 0, stopped_by="step limit")
    except SystemExit as exc:
        recorder.abandon(exc)
        code = exc.code
        if code is None or isinstance(code, int):
            status = code or 0
            outcome.set("ok" if status == 0 else "crashed", status)
        else:
            print(code, file=sys.stderr)
            outcome.set("crashed", 1, exception=f"SystemExit: {code}")
    except KeyboardInterrupt as exc:
        recorder.abandon(exc)
        outcome.set("stopped", 130, stopped_by="KeyboardInterrupt")
    except Exception as exc:
        _failed(exc, outcome, recorder)
    finally:
        sys.argv, sys.path[0] = saved_argv, saved_path0


def _failed(exc: Exception, outcome: _Outcome, recorder: Recorder) -> None:
    tb = _user_traceback(exc.__traceback__)
    text = "".join(traceback.format_exception(type(exc), exc, tb))
    sys.stderr.write(text)
    site = recorder.sites.user_location(tb)
    where = f"{_display(site.file)}:{site.line}: " if site else ""
    message = str(exc).splitlines()[0] if str(exc) else ""
    exception = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    failing = recorder.log.failing_call(exc)
    recorder.abandon(exc)
    outcome.set("crashed", 1, exception=exception, traceback=text, failing_seq=failing,
                failing_site=f"{site.file}:{site.line}" if site else None)
    outcome.summary = f"{where}{exception}"


def _user_traceback(tb: Any) -> Any:
    """Drop the frames of tvis and runpy above the script, as `python script.py` shows."""
    start = tb
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if not (name.startswith(str(Path(__file__).resolve().parents[1])) or name == runpy.__file__
                or name.endswith("<frozen runpy>")):
            return tb
        tb = tb.tb_next
    return start


def _display(path: str) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return path


def _report(outcome: _Outcome, path: Path, steps: int) -> None:
    where = _display(str(path))
    if outcome.summary is not None:
        print(f"tvis: {outcome.summary} (run saved to {where})", file=sys.stderr)
    else:
        noun = "step" if steps == 1 else "steps"
        print(f"tvis: recorded {steps} {noun} ({outcome.status}); run saved to {where}",
              file=sys.stderr)


def _start_meta(target: Target, script: str, options: Options) -> dict[str, Any]:
    return {
        "script": target.name if target.module else script,
        "module": target.module,
        "argv": [target.name, *target.args],
        "command": ["tvis", "run", *(["-m"] if target.module else []), target.name, *target.args],
        "cwd": os.getcwd(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "started_at": _now(),
        "status": "running",
        "pid": os.getpid(),
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
