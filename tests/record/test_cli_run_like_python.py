"""`tvis run` starts a script as python would, and every way a start or an end can go
wrong is a one-line message, with the run kept where there is one."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from .helpers import tvis_cli, tvis_env, write_script
from tvis_tui.record import runner
from tvis_tui.store import RunReader, layout
from tvis_tui.store.writer import RunWriter

ENTRY_POINT = shutil.which("tvis", path=str(Path(sys.executable).parent))


def tvis_command(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The installed `tvis` command: unlike `python -m tvis_tui.cli`, it does not put the
    current folder on sys.path, so a script's imports resolve as they would for a user."""
    if ENTRY_POINT is None:
        pytest.skip("the tvis console script is not installed next to this python")
    return subprocess.run([ENTRY_POINT, *args], cwd=cwd, env=tvis_env(), capture_output=True,
                          text=True, timeout=60)


def python(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=cwd, env=tvis_env(), capture_output=True,
                          text=True, timeout=60)


SHOW_START = """
    import os, sys
    print(__file__, sys.argv, sys.path[0], type(__loader__).__name__, __package__, __spec__)
    import helper
    print(helper.WHERE, os.path.dirname(os.path.realpath(__file__)) == sys.path[0])
"""


def test_a_script_starts_as_under_python_even_through_a_symlink(tmp_path):
    real = write_script(tmp_path / "real", SHOW_START, "show.py")
    write_script(tmp_path / "real", "WHERE = 'helper beside the real file'", "helper.py")
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "show.py").symlink_to(real)
    for given in ("real/show.py", "links/show.py"):
        under_python = python(given, "--lr", "1", cwd=tmp_path)
        under_tvis = tvis_command("run", "--out", "runs", given, "--lr", "1", cwd=tmp_path)
        assert under_python.returncode == under_tvis.returncode == 0, under_tvis.stderr
        assert under_tvis.stdout == under_python.stdout
        assert under_tvis.stdout.startswith(f"{tmp_path / given} ['{given}', '--lr', '1'] ")


def test_a_module_of_the_scripts_folder_shadows_a_library_module_as_under_python(tmp_path):
    # torch._dynamo, which tvis imports before the script runs, loads the standard
    # library's statistics and decimal; python puts the script's folder first.
    write_script(tmp_path, "def mean(xs): return 'own statistics'", "statistics.py")
    write_script(tmp_path, "WHERE = 'own decimal'", "decimal/__init__.py")
    write_script(tmp_path, """
        import torch, statistics, decimal
        print(statistics.mean([1.0]), decimal.WHERE)
    """, "train.py")
    under_python = python("train.py", cwd=tmp_path)
    under_tvis = tvis_command("run", "--out", "runs", "train.py", cwd=tmp_path)
    assert under_python.returncode == under_tvis.returncode == 0, under_tvis.stderr
    assert under_tvis.stdout == under_python.stdout == "own statistics own decimal\n"


def test_recursion_that_fits_under_python_fits_under_tvis_and_the_limit_reads_the_same(tmp_path):
    # tvis's frames under the script and in its trace callbacks would have made the
    # recursion fail, and the script's fallback change its training.
    write_script(tmp_path, """
        import sys, torch
        print(sys.getrecursionlimit())
        sys.setrecursionlimit(300)
        print(sys.getrecursionlimit())

        def chain(t, d):
            return t if d == 0 else chain(t, d - 1) + 1

        lin = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        for depth in (285, 290):
            try:
                out = chain(lin(torch.ones(1, 2)), depth)
                print("fits", depth)
            except RecursionError:
                print("too deep", depth)
                out = lin(torch.ones(1, 2))
            opt.zero_grad(); out.sum().backward(); opt.step()
        for bad in (0, 2.5):
            try:
                sys.setrecursionlimit(bad)
            except (ValueError, TypeError) as exc:
                print(type(exc).__name__, exc)
    """, "train.py")
    under_python = python("train.py", cwd=tmp_path)
    under_tvis = tvis_command("run", "--out", "runs", "train.py", cwd=tmp_path)
    assert under_python.returncode == under_tvis.returncode == 0, under_tvis.stderr
    assert under_tvis.stdout == under_python.stdout
    assert "fits 290" in under_tvis.stdout and "ValueError" in under_tvis.stdout


def test_a_script_that_closes_its_streams_and_raises_is_recorded_as_crashed(tmp_path):
    write_script(tmp_path, """
        import sys
        sys.stdout.close()
        sys.stderr.close()
        raise ValueError("after close")
    """, "train.py")
    proc = tvis_command("run", "--out", "runs", "--name", "c", "train.py", cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == "tvis: train.py:5: ValueError: after close (run saved to runs/c)"
    with RunReader(tmp_path / "runs" / "c") as run:
        meta = run.meta()
    assert (meta["status"], meta["exit_status"], meta["exception"]) == ("crashed", 1, "ValueError: after close")


def test_module_and_folder_targets_run_from_the_current_folder(tmp_path):
    write_script(tmp_path, "", "pkg/__init__.py")
    write_script(tmp_path, "import sys; print('mod', sys.argv[1:])", "pkg/mod.py")
    write_script(tmp_path, "print('package main')", "pkg/__main__.py")
    write_script(tmp_path, "print('folder main')", "app/__main__.py")
    assert tvis_command("run", "--out", "runs", "-m", "pkg.mod", "x", cwd=tmp_path).stdout == "mod ['x']\n"
    assert tvis_command("run", "--out", "runs", "-m", "pkg", cwd=tmp_path).stdout == "package main\n"
    assert tvis_command("run", "--out", "runs", "app", cwd=tmp_path).stdout == "folder main\n"
    assert tvis_command("run", "--out", "runs", "--", "app", cwd=tmp_path).stdout == "folder main\n"


def test_every_kind_of_target_sees_the_globals_python_gives_it(tmp_path):
    show = "print(sorted(k for k in globals() if k.startswith('__')), __annotations__)"
    write_script(tmp_path, show, "script.py")
    write_script(tmp_path, show, "app/__main__.py")
    write_script(tmp_path, show, "nspkg/__main__.py")  # a namespace package: no __init__.py
    for target in (["script.py"], ["app"], ["-m", "nspkg"]):
        under_python = python(*target, cwd=tmp_path)
        under_tvis = tvis_command("run", "--out", "runs", *target, cwd=tmp_path)
        assert under_tvis.returncode == under_python.returncode == 0, under_tvis.stderr
        assert under_tvis.stdout == under_python.stdout, target


@pytest.mark.parametrize("args, message", [
    (["-m", "json"], "-m json: a package with no __main__ module: nothing to run"),
    (["-"], "-: tvis cannot record a script read from stdin; save it to a file"),
    (["empty_folder"], "empty_folder: a folder with no __main__.py: nothing to run"),
    (["--steps", "99999999999999999999", "t.py"], "--steps 99999999999999999999: must be from 1 to 4294967295"),
    (["--max-tensor-bytes", "99999999999999999999", "t.py"],
     "--max-tensor-bytes 99999999999999999999: must be from 0 to 2**62"),
    (["--name", "a/b", "t.py"], "--name 'a/b': must be a plain folder name (no '/'; use --out for the folder)"),
    (["--name", "..", "t.py"], "--name '..': must be a plain folder name (no '/'; use --out for the folder)"),
    (["--out", "runs/r", "t.py"], "--out runs/r: is a run folder; give the folder that holds runs"),
    (["--out", "", "t.py"], "--out '': give a folder (--out . for the current one)"),
    (["--name", "two\nlines", "t.py"],
     "--name 'two\\nlines': must be printable (no newline, tab or control character)"),
])
def test_a_target_or_option_that_cannot_run_is_one_line_and_leaves_no_run(tmp_path, args, message):
    write_script(tmp_path, "print('ran')", "t.py")
    (tmp_path / "empty_folder").mkdir()
    RunWriter(tmp_path / "runs" / "r").close()
    proc = tvis_cli("run", *(["--out", "runs"] if "--out" not in args else []), *args, cwd=tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"tvis: error: {message}\n", "")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["r"]


@pytest.mark.parametrize("source, summary", [
    ("def f(:\n    pass\n", "bad.py:1: SyntaxError: invalid syntax"),
    ("class Stop(BaseException):\n    pass\nraise Stop('base')\n", "bad.py:3: Stop: base"),
    ("class E(Exception):\n    def __str__(self):\n        raise RuntimeError('no')\nraise E()\n",
     "bad.py:4: E: <exception str() failed>"),
    # Through tvis's wrappers of a loss function, backward() and the DataLoader: python
    # shows torch's frames only, and so does tvis.
    ("import torch, torch.nn.functional as F\nx = torch.randn(4, 3, requires_grad=True)\n"
     "F.cross_entropy(x, torch.tensor([0, 1, 2]))\n",
     "bad.py:3: ValueError: Expected input batch_size (4) to match target batch_size (3)."),
    ("import torch\nloss = torch.ones(2).sum()\nloss.backward()\n",
     "bad.py:3: RuntimeError: element 0 of tensors does not require grad and does not have a grad_fn"),
    ("import torch\nclass Data(torch.utils.data.Dataset):\n    def __len__(self):\n        return 4\n"
     "    def __getitem__(self, i):\n        return torch.ones(2) * {0: 1, 1: 2, 2: 3}[i]\n"
     "for batch in torch.utils.data.DataLoader(Data(), batch_size=2):\n    pass\n",
     "bad.py:6: KeyError: 3"),
    # Python's "Did you mean" hints (sweep T: python 3.11's traceback module leaves them out).
    ("optimizer = 1\nprint(optimiser)\n", "bad.py:2: NameError: name 'optimiser' is not defined"),
    ("import math\nmath.sqr(2)\n", "bad.py:2: AttributeError: module 'math' has no attribute 'sqr'"),
    ("import torch, torch.nn.functional as F\ntry:\n    F.mse_loss(torch.ones(2, requires_grad=True), None)\n"
     "except Exception as exc:\n    raise RuntimeError('no loss') from exc\n",
     "bad.py:5: RuntimeError: no loss"),
])
def test_a_script_that_fails_reads_as_under_python_and_is_recorded_as_crashed(tmp_path, source, summary):
    (tmp_path / "bad.py").write_text(source)
    under_python = python("bad.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "--name", "b", "bad.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == 1
    *shown, last = proc.stderr.splitlines()
    assert "\n".join(shown) + "\n" == under_python.stderr  # no tvis or runpy frames
    assert last == f"tvis: {summary} (run saved to runs/b)"
    with RunReader(tmp_path / "runs" / "b") as run:
        assert (run.meta()["status"], run.meta()["exit_status"]) == ("crashed", 1)


def test_a_long_exception_message_is_shortened_in_the_summary_and_kept_whole_in_the_run(tmp_path):
    write_script(tmp_path, "raise ValueError('x' * 100_000)\n", "bad.py")
    proc = tvis_command("run", "--out", "runs", "--name", "b", "bad.py", cwd=tmp_path)
    assert proc.returncode == 1
    summary = proc.stderr.splitlines()[-1]
    assert summary.startswith("tvis: bad.py:1: ValueError: xxx") and summary.endswith("x… (run saved to runs/b)")
    assert len(summary) < 400
    with RunReader(tmp_path / "runs" / "b") as run:
        assert run.meta()["exception"] == "ValueError: " + "x" * 100_000


def test_a_warning_made_an_error_reads_as_under_python(tmp_path):
    (tmp_path / "warn.py").write_text("import warnings\nwarnings.warn('careful')\n")
    env = {**tvis_env(), "PYTHONWARNINGS": "error"}
    under_python = subprocess.run([sys.executable, "warn.py"], cwd=tmp_path, env=env,
                                  capture_output=True, text=True, timeout=60)
    proc = subprocess.run([sys.executable, "-m", "tvis_tui.cli", "run", "--name", "w", "warn.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == under_python.returncode == 1
    *shown, last = proc.stderr.splitlines()
    assert "\n".join(shown) + "\n" == under_python.stderr  # not tvis's warnings.warn
    assert last == "tvis: warn.py:2: UserWarning: careful (run saved to runs/w)"


def test_an_uncaught_ctrl_c_prints_its_traceback_as_under_python(tmp_path):
    (tmp_path / "stop.py").write_text("def train():\n    raise KeyboardInterrupt\ntrain()\n")
    under_python = python("stop.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "--name", "s", "stop.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == -2  # killed by SIGINT, as python
    *shown, last = proc.stderr.splitlines()
    assert "\n".join(shown) + "\n" == under_python.stderr and shown[-1] == "KeyboardInterrupt"
    assert last == "tvis: recorded 0 steps (stopped); run saved to runs/s"


def _interrupted(*args, **kwargs):
    raise KeyboardInterrupt  # as a Ctrl-C lands: here, in a library tvis called


def test_a_ctrl_c_landing_in_tvis_own_work_shows_the_scripts_frames_only(tmp_path, monkeypatch, capsys):
    # tvis's hooks call libraries (msgpack, numpy): python would show the interrupt in the
    # script's line, and so does tvis, with none of those frames.
    from tvis_tui.record import slots

    script = write_script(tmp_path, """
        import torch
        net = torch.nn.Linear(2, 2)
        net(torch.ones(1, 2))
    """)
    monkeypatch.setattr(slots, "summarize", _interrupted)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(KeyboardInterrupt):  # the CLI then ends the process as python would
        runner.record(runner.Target(str(script), ()), runner.Options(out_dir="runs", name="c"))
    shown = capsys.readouterr().err.splitlines()
    files = [line.split('"')[1] for line in shown if line.startswith('  File "')]
    assert shown[-2] == "KeyboardInterrupt"
    assert files[0] == str(script) and all("torch" in f for f in files[1:]), files
    assert shown[-1].startswith("tvis: recorded 0 steps (stopped)")


def test_the_scripts_own_excepthook_shows_its_crash(tmp_path):
    (tmp_path / "hooked.py").write_text(
        "import sys\n"
        "sys.excepthook = lambda kind, exc, tb: print('crashed:', kind.__name__, exc, file=sys.stderr)\n"
        "raise ValueError('no data')\n")
    under_python = python("hooked.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "--name", "h", "hooked.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == 1
    assert under_python.stderr == "crashed: ValueError no data\n"
    assert proc.stderr.splitlines()[0] == "crashed: ValueError no data"


def test_runpy_frames_of_the_scripts_own_are_shown(tmp_path):
    (tmp_path / "inner.py").write_text("raise RuntimeError('inside')\n")
    (tmp_path / "outer.py").write_text("import runpy\nrunpy.run_module('inner', run_name='__main__')\n")
    under_python = python("outer.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "--name", "o", "outer.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == 1
    assert "runpy" in under_python.stderr
    assert "\n".join(proc.stderr.splitlines()[:-1]) + "\n" == under_python.stderr


PAST_THE_TOP = """import warnings
warnings.warn("top", stacklevel=2)
def check():
    warnings.warn("deep", stacklevel=3)
check()
"""


@pytest.mark.parametrize("launch", [tvis_cli, tvis_command])
def test_a_warning_past_the_scripts_top_frame_names_no_tvis_file(tmp_path, launch):
    (tmp_path / "top.py").write_text(PAST_THE_TOP)
    under_python = python("top.py", cwd=tmp_path)
    # `sys:1:` (3.11, 3.12) or `<sys>:0:` (3.13): no file of the script's, nor of tvis's.
    assert [line.split(": ", 1)[1] for line in under_python.stderr.splitlines()] == \
        ["UserWarning: top", "UserWarning: deep"]
    assert "top.py" not in under_python.stderr
    proc = launch("run", "--out", "runs", "top.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stderr.startswith(under_python.stderr)


def test_warnings_about_the_calling_line_name_the_script_as_under_python(tmp_path):
    # F.mse_loss warns about its caller (stacklevel=2): under tvis its caller is a wrapper.
    (tmp_path / "warn.py").write_text(
        "import torch\n"
        "import torch.nn.functional as F\n"
        "m = torch.nn.Linear(3, 1)\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for i in range(2):\n"
        "    loss = F.mse_loss(m(torch.ones(4, 3)), torch.ones(4))\n"
        "    loss = loss + torch.nn.MSELoss()(m(torch.ones(2, 3)), torch.ones(2))\n"
        "    loss.backward(); opt.step(); opt.zero_grad()\n")
    under_python = python("warn.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "--name", "w", "warn.py", cwd=tmp_path)
    assert proc.returncode == under_python.returncode == 0
    # Each warning once, at the line python names: the script's, and MSELoss.forward's.
    warned = [line for line in under_python.stderr.splitlines() if "Warning" in line]
    assert len(warned) == 2 and "warn.py:6: UserWarning" in warned[0] and "loss.py" in warned[1]
    assert [line for line in proc.stderr.splitlines() if "Warning" in line] == warned


COMPREHENSIONS = """
    import torch

    class Tok:
        vocab = "_abcdefgh"
        def encode(self, text):
            return [self.vocab.index(c) for c in text]

    def double(x):
        return x * 2

    tok = Tok()
    words = ["bad", "cab", "fed", "hag"]
    rows = [torch.tensor(tok.encode(w),
                         dtype=torch.float32) for w in words]

    class Config:
        sizes = [len(tok.encode(w)) +
                 len(w) for w in words]

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(2):
        batch = [double(r) for r in rows]
        scaled = [torch.tanh(b) +
                  double(b) for b in batch]
        loss = model(torch.stack(scaled)).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
        print(step, Config.sizes, [round(v, 6) for v in
                                   torch.stack(scaled).sum(1).tolist()], loss.item())
"""


def test_comprehensions_at_module_and_class_level_run_as_under_python(tmp_path):
    # Python 3.12 runs them inline, their variable hidden in the module's (or class's)
    # frame: reading that frame's locals from a trace callback set it to None there
    # (frame_locals.py). Every line traced, tokenizer and user function calls included.
    write_script(tmp_path, COMPREHENSIONS)
    under_python = python("train.py", cwd=tmp_path)
    proc = tvis_cli("run", "--out", "runs", "train.py", cwd=tmp_path)
    assert under_python.returncode == proc.returncode == 0, proc.stderr
    assert proc.stdout == under_python.stdout
    assert "Warning" not in proc.stderr and "recorded 2 steps (ok)" in proc.stderr


def test_a_training_thread_ends_quietly_at_the_step_limit(tmp_path):
    write_script(tmp_path, """
        import threading, torch
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        def train():
            for _ in range(5):
                opt.zero_grad()
                net(torch.ones(3, 2)).sum().backward()
                opt.step()
        worker = threading.Thread(target=train)
        worker.start()
        worker.join()
        print('joined')
    """)
    proc = tvis_cli("run", "--out", "runs", "--steps", "2", "train.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "joined\n"
    assert proc.stderr.splitlines()[-1].startswith("tvis: recorded 2 steps (ok)"), proc.stderr


def test_store_write_failures_are_reported_and_training_goes_on(tmp_path, monkeypatch, capsys):
    script = write_script(tmp_path, """
        import time
        import torch
        net = torch.nn.Linear(500, 500)  # a 1 MB gradient, stored: a commit each step
        for _ in range(3):
            net(torch.ones(3, 500)).sum().backward()
        time.sleep(0.6)  # past the writer's commit interval: closing commits twice
        print('trained')
    """)
    write = RunWriter.write
    writes = []

    def full_disk(self, pending):
        # The run's start is on disk; then the disk is full: only small metadata fits.
        writes.append(1)
        if len(writes) > 2 and any(db != layout.META for db, _, _ in pending):
            raise lmdb.Error("mdb_txn_commit: No space left on device")
        write(self, pending)
    monkeypatch.setattr(RunWriter, "write", full_disk)  # on the writer thread, as on a full disk
    monkeypatch.setattr(runner, "LOW_SPACE_BYTES", 1 << 62)  # whatever this disk has is little
    monkeypatch.chdir(tmp_path)
    status = runner.record(runner.Target(str(script), ()), runner.Options(out_dir="runs", name="f"))
    out, err = capsys.readouterr()
    assert status == 0 and out == "trained\n"
    warning, saved = err.splitlines()[-2:]
    # The commits that failed alike: one message, the failures counted.
    assert re.fullmatch(r"tvis: warning: the run is incomplete: store write failed: Error: mdb_txn_commit: "
                        r"No space left on device \(\d+ writes failed\); the disk holding runs/f has "
                        r"[\d.]+ MiB free", warning), warning
    assert saved == "tvis: recorded 3 steps (ok), 0 of them stored; run saved to runs/f"
    with RunReader(tmp_path / "runs" / "f") as run:
        meta = run.meta()
    # The final metadata alone was written when the last records did not fit.
    assert (meta["status"], meta["steps_recorded"], meta["incomplete"]) == ("ok", 3, True)
    # The listing counts what the store holds, not what the recorder saw, and says why.
    listed = tvis_cli("ls", "runs", cwd=tmp_path).stdout.splitlines()[1].split()
    assert listed[-2:] == ["ok,", "incomplete"] and listed[4] == "0", listed


def test_a_full_disk_before_the_run_is_a_one_line_error_and_the_script_does_not_run(tmp_path, monkeypatch, capsys):
    # LMDB maps its lock file: opening a store on a full disk would kill the process (SIGBUS).
    from tvis_tui.errors import TvisError
    from tvis_tui.store import writer

    monkeypatch.setattr(writer, "MIN_FREE_BYTES", 1 << 62)  # whatever this disk has is too little
    script = write_script(tmp_path, "print('trained')")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TvisError) as raised:
        runner.record(runner.Target(str(script), ()), runner.Options(out_dir="runs", name="f"))
    assert re.fullmatch(r"runs/f: cannot write the run \(no space left on its disk: [\d,]+ bytes free\)",
                        str(raised.value)), raised.value
    assert capsys.readouterr().out == "" and list((tmp_path / "runs").iterdir()) == []


@pytest.mark.parametrize("fails", ["open", "write"])
def test_a_store_lmdb_cannot_start_is_a_one_line_error(tmp_path, monkeypatch, fails):
    from tvis_tui.errors import TvisError
    from tvis_tui.store import writer

    def refuse(*args, **kwargs):
        raise lmdb.Error("mdb_txn_commit: Disk quota exceeded")
    if fails == "open":
        monkeypatch.setattr(writer.lmdb, "open", refuse)
    else:  # the environment opens, its first commit does not
        monkeypatch.setattr(RunWriter, "write", refuse)
    script = write_script(tmp_path, "print('trained')")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TvisError) as raised:
        runner.record(runner.Target(str(script), ()), runner.Options(out_dir="runs", name="f"))
    assert str(raised.value) == "runs/f: cannot write the run (mdb_txn_commit: Disk quota exceeded)"
    assert list((tmp_path / "runs").iterdir()) == []


def test_include_patterns_that_match_nothing_are_warned_about(tmp_path):
    write_script(tmp_path, """
        import torch
        net = torch.nn.Sequential(torch.nn.Linear(2, 1))
        def loss_of(x):
            return net(x).sum()
        for _ in range(2):
            loss_of(torch.ones(3, 2)).backward()
    """)
    proc = tvis_cli("run", "--out", "runs", "--name", "p", "--include-modules", "encoder*",
                    "--include-files", "data/*.py", "train.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[:2] == [
        "tvis: warning: --include-modules encoder*: matched no module called while recording; "
        "no module calls were recorded",
        "tvis: warning: --include-files data/*.py: matched no user file that ran while recording; "
        "no user functions or lines were recorded"]
    with RunReader(tmp_path / "runs" / "p") as run:
        assert len(run.meta()["warnings"]) == 2
    matched = tvis_cli("run", "--out", "runs", "--include-modules", "Linear", "train.py", cwd=tmp_path)
    assert "warning" not in matched.stderr
