"""`tvis run` end to end, as a user runs it: a fresh process, the real CLI, the real store."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time

import pytest

from .helpers import EXAMPLES, tvis_cli, tvis_env, tvis_popen, write_script
from tvis_tui.store import RunReader
from tvis_tui.store.runs import run_status


def test_a_script_that_ends_before_the_step_limit_is_not_said_to_be_stopped(tmp_path):
    # Code after the loop runs then; the limit stops a script only where a step would begin.
    write_script(tmp_path, """
        import torch
        w = torch.zeros(2, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(2):
            opt.zero_grad(); (w - 1).pow(2).sum().backward(); opt.step()
        print("after the loop")
    """)
    proc = tvis_cli("run", "--steps", "5", "--out", "runs", "train.py", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout == "after the loop\n"
    assert "recorded 2 steps (ok); run saved to" in proc.stderr


def test_image_example_records_named_calls_sites_and_stops_after_steps(tmp_path):
    script = EXAMPLES / "image_classifier" / "train.py"
    proc = tvis_cli("run", "--steps", "2", "--out", "runs", "--name", "cnn", str(script),
                    "--max-steps", "5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    printed = re.findall(r"step (\d+) epoch 0 loss (\S+)", proc.stdout)
    assert [s for s, _ in printed] == ["1", "2"]  # tvis ended the script after step 2
    assert "recorded 2 steps (ok); stopped the script at the step limit (--steps)" in proc.stderr
    assert "runs/cnn" in proc.stderr

    with RunReader(tmp_path / "runs" / "cnn") as run:
        meta = run.meta()
        assert (meta["status"], meta["exit_status"], meta["steps_recorded"]) == ("ok", 0, 2)
        assert meta["step_rule"] == "optimizer" and meta["argv"][1:] == ["--max-steps", "5"]
        steps = run.steps()
        assert [round(s.loss, 6) for s in steps] == [float(loss) for _, loss in printed]
        assert [p.phase for p in run.phases(1)] == ["data", "forward", "loss", "backward", "optimizer"]
        calls = run.calls(steps[0].first_seq, steps[0].last_seq)
        conv = next(c for c in calls if c.name == "blocks.1.conv1")
        assert conv.type == "Conv2d" and conv.step == 1 and conv.depth == 2
        parent = run.call(conv.parent)
        assert parent.name == "blocks.1" and parent.type == "Block"
        source = run.source(str(script)).splitlines()
        assert "self.conv1(x)" in source[conv.call_site.line - 1]
        assert source[parent.def_site.line - 1].strip().startswith("def forward")
        assert "block(x)" in source[parent.call_site.line - 1]
        out = run.slots(conv.seq, "output")[0]
        assert out.shape == (32, 16, 16, 16) and run.values(conv.seq, out).shape == out.shape
        adam = calls[-1]
        assert (adam.kind, adam.name, adam.extra["lr"]) == ("optimizer", "Adam", 3e-3)
        grads, params = run.slots(adam.seq, "param_grad"), run.slots(adam.seq, "param")
        assert grads[0].path == params[0].path == "SmallCNN.stem.0.weight"
        assert len(grads) == len(params) == 16


def test_arguments_after_the_script_are_the_scripts_own(tmp_path):
    script = write_script(tmp_path / "proj", """
        import os, sys
        print(repr(sys.argv), __name__, sys.path[0] == os.path.dirname(os.path.abspath(__file__)),
              os.getcwd())
        sys.exit(3)
    """)
    proc = tvis_cli("run", "--steps", "5", "--out", "runs", str(script), "--steps", "1", "--lr", "3e-4",
                    cwd=tmp_path)
    argv, name, path0, cwd = proc.stdout.rsplit(" ", 3)
    assert eval(argv) == [str(script), "--steps", "1", "--lr", "3e-4"]
    assert (name, path0, cwd.strip()) == ("__main__", "True", str(tmp_path))
    assert proc.returncode == 3
    assert f"{script.name}:5: the script called sys.exit(3): exit status 3" in proc.stderr
    with RunReader(next((tmp_path / "runs").iterdir())) as run:
        meta = run.meta()
    assert (meta["status"], meta["exception"], meta["exit_status"]) == ("crashed", "SystemExit: 3", 3)
    assert meta["failing_site"].endswith(f"{script.name}:5") and "sys.exit(3)" in meta["traceback"]


def test_a_run_outside_the_current_folder_is_named_by_its_absolute_path(tmp_path):
    script = write_script(tmp_path / "proj", "print('trained')")
    (tmp_path / "here").mkdir()
    proc = tvis_cli("run", "--out", str(tmp_path / "elsewhere"), "--name", "r", str(script),
                    cwd=tmp_path / "here")
    assert proc.returncode == 0 and proc.stdout == "trained\n"
    assert proc.stderr.splitlines()[-1].endswith(f"run saved to {tmp_path / 'elsewhere' / 'r'}")


def test_a_script_that_changes_its_folder_keeps_its_run_where_tvis_was_started(tmp_path):
    """Hydra's job.chdir, `os.chdir(here)`: the run was checked, written again and
    reported from the script's new folder; one that held a run of that name (another
    project's) made the whole run read `incomplete` (sweep R)."""
    elsewhere = tmp_path / "other"
    (elsewhere / "runs" / "r").mkdir(parents=True)
    (elsewhere / "runs" / "r" / "data.mdb").write_bytes(b"another project's run")
    write_script(tmp_path, """
        import os, sys, torch
        w = torch.zeros(2, requires_grad=True)
        opt = torch.optim.SGD([w], lr=0.1)
        os.chdir(sys.argv[1])
        for _ in range(2):
            opt.zero_grad(); (w - 1).pow(2).sum().backward(); opt.step()
        raise ValueError("late")
    """)
    proc = tvis_cli("run", "--name", "r", "train.py", str(elsewhere), cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[-1] == "tvis: train.py:8: ValueError: late (run saved to runs/r)"
    assert "warning" not in proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        assert len(run.steps()) == 2 and not run.meta().get("incomplete")
    assert (elsewhere / "runs" / "r" / "data.mdb").read_bytes() == b"another project's run"
    assert sorted(p.name for p in (elsewhere / "runs").iterdir()) == ["r"]


def test_a_crashs_summary_is_plain_text(tmp_path):
    """Sweep V: torch's weights_only message bolds words; the one-line summary and the run's
    exception carried the raw escapes."""
    write_script(tmp_path, """
        import torch
        torch.nn.Linear(2, 1)(torch.ones(1, 2)).sum().backward()
        raise RuntimeError("load failed. \\x1b[1mOnly if trusted\\x1b[0m.\\nmore")
    """)
    proc = tvis_cli("run", "--name", "r", "train.py", cwd=tmp_path)
    last = proc.stderr.splitlines()[-1]
    assert last == "tvis: train.py:4: RuntimeError: load failed. Only if trusted. (run saved to runs/r)"
    with RunReader(tmp_path / "runs" / "r") as run:
        assert run.meta()["exception"] == "RuntimeError: load failed. Only if trusted."


def test_module_mode_runs_like_python_dash_m(tmp_path):
    write_script(tmp_path, "", "pkg/__init__.py")
    write_script(tmp_path, """
        import sys, torch
        print(sys.argv[1:], __name__)
        torch.nn.Linear(2, 1)(torch.ones(1, 2)).sum().backward()
    """, "pkg/train.py")
    proc = tvis_cli("run", "--out", "runs", "--name", "m", "-m", "pkg.train", "--steps", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['--steps', '2'] __main__"
    with RunReader(tmp_path / "runs" / "m") as run:
        assert [c.kind for c in run.calls(1, 2)] == ["module", "backward"]
        assert run.call(1).call_site.file == str(tmp_path / "pkg" / "train.py")


def test_crash_is_recorded_and_summarized_at_the_failing_line(tmp_path):
    script = write_script(tmp_path, """
        import torch
        from torch import nn

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(3, 1)
                self.calls = 0

            def forward(self, x):
                self.calls += 1
                if self.calls == 2:
                    return 1 / 0
                return self.fc(x)

        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            net(torch.ones(4, 3)).sum().backward()
            opt.step()
    """, "crash.py")
    proc = tvis_cli("run", "--out", "runs", "--name", "c", str(script), cwd=tmp_path)
    assert proc.returncode == 1
    assert "Traceback" in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last == "tvis: crash.py:14: ZeroDivisionError: division by zero (run saved to runs/c)"
    with RunReader(tmp_path / "runs" / "c") as run:
        meta = run.meta()
        assert meta["status"] == "crashed" and meta["exit_status"] == 1
        assert meta["exception"] == "ZeroDivisionError: division by zero"
        assert meta["failing_site"] == f"{script}:14" and "1 / 0" in meta["traceback"]
        failing = run.call(meta["failing_seq"])
        assert failing.name == "Net" and failing.step == 2
        assert failing.error == "ZeroDivisionError: division by zero"
        assert meta["steps_recorded"] == 1 and run.steps()[-1].complete is False


def test_a_dataloader_workers_exception_is_summarized_by_its_cause(tmp_path):
    script = write_script(tmp_path, """
        import torch
        from torch.utils.data import DataLoader, Dataset

        class Data(Dataset):
            def __len__(self):
                return 16

            def __getitem__(self, i):
                if i == 13:
                    raise ValueError(f"corrupt sample {i}")
                return torch.ones(2) * i

        for batch in DataLoader(Data(), batch_size=4, num_workers=2):
            pass
    """, "workers.py")
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=tvis_env(),
                           capture_output=True, text=True, timeout=60)
    proc = tvis_cli("run", "--out", "runs", "--name", "w", str(script), cwd=tmp_path)
    assert proc.returncode == plain.returncode == 1
    *shown, last = proc.stderr.strip().splitlines()
    # The worker's traceback, as torch sends it to the main process, has no tvis frame.
    assert "tvis_tui" not in "\n".join(shown)
    worker_traceback = "\n".join(shown).split("Original Traceback")[1].strip()
    assert worker_traceback == plain.stderr.split("Original Traceback")[1].strip()
    assert re.fullmatch(r"tvis: workers.py:\d+: ValueError: corrupt sample 13 "
                        r"\(in DataLoader worker process \d\) \(run saved to runs/w\)", last), last


def test_bad_target_is_a_one_line_error(tmp_path, monkeypatch):
    proc = tvis_cli("run", "missing.py", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == "tvis: error: missing.py: no such file\n"
    # One it may not read, as python would say before running anything: no run either
    # (chmod does not stop root, so the refusal is stood in for).
    from pathlib import Path

    from tvis_tui.errors import TvisError
    from tvis_tui.record.runner import Target

    (tmp_path / "locked.py").write_text("x = 1\n")
    opened = Path.open

    def refused(path, *args, **kwargs):
        if path.name == "locked.py":
            raise PermissionError(13, "Permission denied")
        return opened(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", refused)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TvisError, match=r"^locked\.py: cannot read \(Permission denied\)$"):
        Target("locked.py", ()).resolve()


def test_a_file_that_is_no_python_source_is_named_in_the_summary(tmp_path):
    (tmp_path / "blob.py").write_bytes(b"x = 1\0\n")
    proc = tvis_cli("run", "--out", "runs", "--name", "b", "blob.py", cwd=tmp_path)
    assert proc.returncode == 1
    # A SyntaxError, or a ValueError in Python 3.11.2 (CI's)
    assert re.fullmatch(r"tvis: blob\.py: (SyntaxError|ValueError): source code string cannot contain null "
                        r"bytes \(run saved to runs/b\)", proc.stderr.splitlines()[-1])


_ENDLESS = """
    import torch
    from torch import nn
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    step = 0
    while True:
        opt.zero_grad()
        net(torch.randn(4, 8)).pow(2).mean().backward()
        opt.step()
        step += 1
        print("step", step, flush=True)
"""


def _run_until_step(tmp_path, n: int):
    script = tmp_path / "endless.py"
    if not script.exists():
        write_script(tmp_path, _ENDLESS, "endless.py")
    proc = tvis_popen("run", "--out", "runs", "--name", "e", str(script), cwd=tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == f"step {n}":
            return proc
        if not line:  # the script ended
            break
    proc.kill()
    pytest.fail("the script never reached step %d" % n)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_keeps_everything_and_ends_by_sigint_like_python(tmp_path):
    proc = _run_until_step(tmp_path, 20)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGINT  # as python's: a shell loop around it stops too
    assert "(stopped)" in err
    with RunReader(tmp_path / "runs" / "e") as run:
        meta = run.meta()
        assert meta["status"] == "stopped" and meta["steps_recorded"] >= 20
        assert [s.step for s in run.steps()][:20] == list(range(1, 21))
        count = run.call_count()
        assert count >= 20 * 6
        last = run.call(count)
        assert last.duration_ns is not None or last.error == "KeyboardInterrupt"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
@pytest.mark.parametrize("sent", ["SIGTERM", "SIGHUP"])
def test_a_scheduler_s_sigterm_closes_the_run_whole_then_ends_by_it_like_python(tmp_path, sent):
    # Slurm's time limit, `timeout`, `docker stop`, a dropped SSH session (SIGHUP): python
    # dies at once, and the run lost its last step's lines and how it ended (robustness sweep).
    signum = getattr(signal, sent)
    proc = _run_until_step(tmp_path, 5)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == -signum
    assert "(stopped)" in err and "Traceback" not in err
    with RunReader(tmp_path / "runs" / "e") as run:
        meta = run.meta()
        assert (meta["status"], meta["stopped_by"], meta["exit_status"]) == ("stopped", sent, 128 + signum)
        assert meta["steps_recorded"] >= 5 and "ended_at" in meta
        assert {step for step in range(1, 6)} <= {s.step for s in run.steps() if s.complete}
        assert run.line_shapes(run.meta()["script"], 5)  # the last steps' lines, not left in a buffer


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_script_s_own_sigterm_handler_runs_as_under_python(tmp_path):
    write_script(tmp_path, _ENDLESS, "endless_loop.py")
    write_script(tmp_path, """
        import runpy, signal, sys
        def save_and_leave(signum, frame):
            print("checkpoint saved", flush=True)
            sys.exit(0)
        signal.signal(signal.SIGTERM, save_and_leave)
        runpy.run_path("endless_loop.py")
    """, "endless.py")
    proc = _run_until_step(tmp_path, 3)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "checkpoint saved" in out
    with RunReader(tmp_path / "runs" / "e") as run:
        assert run.meta()["status"] == "ok"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigkill_leaves_a_consistent_run(tmp_path):
    proc = _run_until_step(tmp_path, 200)  # long enough for several commits
    with RunReader(tmp_path / "runs" / "e") as run:
        assert run_status(run.meta()) == "running"  # its pid and start time are the recorder's
    proc.kill()
    proc.wait(timeout=30)
    with RunReader(tmp_path / "runs" / "e") as run:
        meta = run.meta()
        assert run_status(meta) == "stopped"  # recorder gone without closing the run
        count = run.call_count()
        assert count > 0
        calls = run.calls(1, count)
        assert [c.seq for c in calls] == list(range(1, count + 1))
        assert all(c.parent < c.seq for c in calls)
        for step in run.steps():
            assert step.last_seq <= count and step.complete


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_killed_while_the_script_is_quiet_keeps_every_step_and_call_so_far(tmp_path):
    # A long evaluation, a checkpoint or a sleep writes no record: what the last step left
    # in the buffer was committed only as the next record came, and a kill then lost it.
    script = write_script(tmp_path, """
        import time, torch
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for step in range(1, 4):
            opt.zero_grad(); net(torch.ones(1, 2)).sum().backward(); opt.step()
            print("step", step, flush=True)
            if step == 2:
                time.sleep(60)
    """, "quiet.py")
    proc = tvis_popen("run", "--out", "runs", "--name", "q", str(script), cwd=tmp_path)
    try:
        assert proc.stdout.readline().strip() == "step 1"
        assert proc.stdout.readline().strip() == "step 2"
        time.sleep(1.5)  # three idle commit periods
    finally:
        proc.kill()
        proc.communicate(timeout=30)
    with RunReader(tmp_path / "runs" / "q") as run:
        assert [(s.step, s.complete) for s in run.steps()] == [(1, True)]  # 2 ends at the loop head
        assert [(c.step, c.kind) for c in run.calls(1, run.call_count())] == [
            (1, "module"), (1, "backward"), (1, "optimizer"),
            (2, "module"), (2, "backward"), (2, "optimizer")]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_a_run_killed_in_its_first_half_second_keeps_the_steps_that_ended(tmp_path):
    # Records were committed every 0.5 s: an OOM kill at step 3 of a fast script lost the
    # whole run ("0 steps, 0 calls"). A step that ends after as long as the run had
    # committed is committed as it ends (steps.py `_commit_due`).
    script = write_script(tmp_path, """
        import os, signal, time, torch
        net = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        for step in range(1, 4):
            opt.zero_grad(); net(torch.ones(1, 2)).sum().backward()
            time.sleep(0.05 * step)  # each step longer than the last: each is committed as it ends
            opt.step()
        time.sleep(0.1)  # the writer thread writes what it was handed
        os.kill(os.getpid(), signal.SIGKILL)
    """, "oom.py")
    proc = tvis_cli("run", "--out", "runs", "--name", "k", str(script), cwd=tmp_path)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with RunReader(tmp_path / "runs" / "k") as run:
        assert run_status(run.meta()) == "stopped"
        assert [(s.step, s.complete) for s in run.steps()][:2] == [(1, True), (2, True)]
        assert [(c.step, c.kind) for c in run.calls(1, 6)] == [
            (1, "module"), (1, "backward"), (1, "optimizer"),
            (2, "module"), (2, "backward"), (2, "optimizer")]


def test_steps_of_equal_length_are_committed_at_steps_1_2_4_8():
    # At least half the steps that ended survive a kill, for a few commits: one per step
    # cost the bundled CNN's writer thread 1.4 ms a step (bench_record).
    from tvis_tui.record.steps import StepTracker

    steps = StepTracker.__new__(StepTracker)
    steps._recording_started = steps._committed_at = 0
    assert [k for k in range(1, 20) if steps._commit_due(k * 10)] == [1, 2, 4, 8, 16]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_steps_timed_on_the_device_are_committed_as_they_end_too(tmp_path):
    # On CUDA a step's record is written on the writer thread once its events are read
    # (review: it was only buffered there, so a kill lost the steps a CPU run keeps).
    script = write_script(tmp_path, f"""
        import os, signal, time
        from tvis_tui.record.sink import WriterThread
        from tvis_tui.record.steps import StepTracker
        from tvis_tui.store.writer import RunWriter

        class Memory:  # what a step's end asks of peak memory
            def end_step(self):
                return 0, {{}}
            def see_optimizers(self, *args):
                pass

        writer = RunWriter({str(tmp_path / "run")!r}, max_pending_seconds=60)
        writer.put_meta(script="s.py", started_at="2026-12-07T10:00:00", status="running", pid=0)
        steps = StepTracker(WriterThread(writer), Memory())
        for seq in (1, 2):
            steps.note_call(seq, "forward")
            steps._gpu_events.append(("forward", None, None))  # events unread: CPU figures kept
            time.sleep(0.02 * seq)  # step 2 longer than step 1: committed as it ends
            steps.end("optimizer.step")
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGKILL)
    """, "device.py")
    proc = subprocess.run([sys.executable, str(script)], env=tvis_env(), capture_output=True, timeout=60)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    with RunReader(tmp_path / "run") as run:
        assert [(s.step, s.first_seq) for s in run.steps()] == [(1, 1), (2, 2)]


@pytest.mark.parametrize("code, status, exit_status", [("True", "crashed", 1), ("256", "ok", 0), ("-1", "crashed", 255)])
def test_sys_exit_codes_become_the_exit_status_python_would_give(tmp_path, code, status, exit_status):
    script = write_script(tmp_path, f"import sys\nsys.exit({code})\n")
    proc = tvis_cli("run", "--out", "runs", "--name", "r", str(script), cwd=tmp_path)
    assert proc.returncode == exit_status, proc.stderr
    with RunReader(tmp_path / "runs" / "r") as run:
        assert (run.meta()["status"], run.meta()["exit_status"]) == (status, exit_status)


def test_the_run_keeps_a_command_that_records_it_again(tmp_path):
    write_script(tmp_path, """
        import sys, torch
        fc = torch.nn.Linear(2, 1)
        opt = torch.optim.SGD(fc.parameters(), lr=float(sys.argv[2]))
        for _ in range(3):
            fc(torch.ones(1, 2)).sum().backward(); opt.step(); opt.zero_grad()
    """)
    typed = ["--steps", "2", "--out", "mine", "--max-tensor-bytes", "64", "--capture", "summary",
             "--no-lines", "--no-grads", "--exclude-modules=-head*", "--include-files", "*.py",
             "--include-files", "lib/*"]
    first = tvis_cli("run", *typed, "--name", "a", "train.py", "--lr", "0.1", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    with RunReader(tmp_path / "mine" / "a") as run:
        meta = run.meta()
    assert meta["command"] == ["tvis", "run", "--steps=2", "--out=mine", "--max-tensor-bytes=64",
                               "--capture=summary", "--no-lines", "--no-grads", "--exclude-modules=-head*",
                               "--include-files=*.py", "--include-files=lib/*", "train.py", "--lr", "0.1"]
    again = tvis_cli("run", "--name", "b", *meta["command"][2:], cwd=meta["cwd"])
    assert again.returncode == 0, again.stderr
    with RunReader(tmp_path / "mine" / "b") as run:
        redone = run.meta()
    options = ("argv", "step_limit", "max_tensor_bytes", "capture", "lines", "grads",
               "include_modules", "exclude_modules", "include_files", "exclude_files")
    assert {k: redone[k] for k in options} == {k: meta[k] for k in options}
    assert meta["step_limit"] == 2 and meta["include_files"] == ["*.py", "lib/*"]
    assert meta["exclude_modules"] == ["-head*"]  # a pattern that starts with "-" stays one
