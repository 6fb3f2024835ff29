"""Run folders of a distributed job (torchrun, DDP over gloo on the CPU): each rank records
a run of its own, named and marked by its rank, and training goes as without tvis; a folder
is claimed by creating it, and given back when its store cannot be written."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tvis_tui.record.options import CaptureOptions
from tvis_tui.store import RunReader
from tvis_tui.store.runs import find_runs

from .helpers import tvis_env, write_script

DDP = """
import torch, torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset, DistributedSampler

dist.init_process_group("gloo")
torch.manual_seed(0)
data = TensorDataset(torch.randn(64, 8), torch.randint(3, (64,)))
loader = DataLoader(data, batch_size=8, sampler=DistributedSampler(data))
model = DDP(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(loader):
    if step == 2:
        break
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"rank {dist.get_rank()} step {step} loss {loss.item():.6f}", flush=True)
dist.barrier()  # as torch advises: destroying with a rank still busy may hang (pytorch#75097)
dist.destroy_process_group()
"""


def _torchrun(*args: str, cwd) -> subprocess.CompletedProcess:
    """torchrun ARGS with 2 processes. --standalone: a rendezvous on a free local port, so
    runs in parallel never collide. Should it hang, every process prints its Python stacks
    (faulthandler, on SIGABRT) into the failure."""
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone",
                             "--nproc-per-node=2", *args], cwd=cwd,
                            env={**tvis_env(), "PYTHONFAULTHANDLER": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGABRT)
        out, err = proc.communicate()
        pytest.fail(f"torchrun {' '.join(args)} hung; its processes' stacks:\n{err[-8000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_each_rank_of_a_torchrun_job_records_its_own_run(tmp_path):
    write_script(tmp_path, DDP)
    plain = _torchrun("train.py", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    traced = _torchrun("-m", "tvis_tui.cli", "run", "--name", "job", "train.py", cwd=tmp_path)
    assert traced.returncode == 0, traced.stderr
    # The ranks share stdout: their prints interleave, words intact.
    printed = sorted(re.findall(r"rank \d step \d loss [\d.]+", traced.stdout))
    assert printed == sorted(re.findall(r"rank \d step \d loss [\d.]+", plain.stdout)) and len(printed) == 4
    runs = find_runs(tmp_path / "runs")
    assert sorted(r.path.name for r in runs) == ["job-rank0", "job-rank1"]
    for rank in (0, 1):
        with RunReader(tmp_path / "runs" / f"job-rank{rank}") as run:
            meta = run.meta()
            assert (meta["rank"], meta["world_size"], meta["status"]) == (rank, 2, "ok")
            steps = [s for s in run.steps() if s.complete]  # the third batch drawn ends it
            assert meta["steps_recorded"] == len(steps) == 2
            losses = [f"{s.loss:.6f}" for s in steps]
            assert [line.rsplit(" ", 1)[1] for line in printed if line.startswith(f"rank {rank} ")] == losses


def test_a_process_that_is_no_rank_of_a_job_has_a_plain_run_name(run_inprocess, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")  # a job of one: nothing to tell apart
    code, run = run_inprocess("print('hi')", capture=CaptureOptions(lines=False))
    assert code == 0 and run.path.name == "r0" and "rank" not in run.meta()


def test_a_run_that_cannot_be_written_leaves_no_folder(tmp_path, monkeypatch):
    from tvis_tui.errors import TvisError
    from tvis_tui.record import runner

    def no_store(path, **_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner, "RunWriter", no_store)
    script = write_script(tmp_path, "print('hi')")
    with pytest.raises(TvisError, match="cannot write the run .*No space left"):
        runner.record(runner.Target(str(script), ()), runner.Options(out_dir=str(tmp_path / "runs"), name="x"))
    assert list((tmp_path / "runs").iterdir()) == []
