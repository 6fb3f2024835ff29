"""Run folders of a distributed job (torchrun, DDP over gloo on the CPU): each rank records
a run of its own, named and marked by its rank, and training goes as without tvis; a folder
is claimed by creating it, and given back when its store cannot be written."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys

import pytest

from tvis_tui.record.job_rank import JobRank, job_rank
from tvis_tui.record.options import CaptureOptions
from tvis_tui.record.runner import Options, Target, record
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


GLOO_TEARDOWN_ABORT = "terminate called without an active exception"
"""How a rank dies when gloo's worker threads lose a race with the process's exit: seen once
in a plain torchrun of DDP (no tvis) on this 2-core VM under load (Dec 2026)."""


def _torchrun(*args: str, cwd) -> subprocess.CompletedProcess:
    """`_torchrun_once`, run again once where a rank died in gloo's teardown race (torch's,
    with or without tvis): what the test compares is the training, not that race."""
    done = _torchrun_once(*args, cwd=cwd)
    if done.returncode != 0 and GLOO_TEARDOWN_ABORT in done.stderr:
        shutil.rmtree(cwd / "runs", ignore_errors=True)  # the failed try's run folders
        done = _torchrun_once(*args, cwd=cwd)
    return done


def _torchrun_once(*args: str, cwd) -> subprocess.CompletedProcess:
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
        # Every process's stacks, whole: the rank that hangs may have dumped first.
        pytest.fail(f"torchrun {' '.join(args)} hung; its processes' stacks:\n{err[-64000:]}")
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


@pytest.mark.parametrize("launcher", [
    {"SLURM_PROCID": "1", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4"},  # srun
    {"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4"},  # Open MPI's mpirun
    {"PMI_RANK": "1", "PMI_SIZE": "4"},  # MPICH, Intel MPI
])
def test_a_rank_started_by_srun_or_mpirun_records_a_run_named_by_its_rank(tmp_path, monkeypatch, capsys, launcher):
    for variable, value in launcher.items():
        monkeypatch.setenv(variable, value)
    script = write_script(tmp_path, "print('hi')")
    code = record(Target(str(script), ()), Options(out_dir=str(tmp_path / "runs"), name="job"))
    assert code == 0 and capsys.readouterr().out == "hi\n"
    with RunReader(tmp_path / "runs" / "job-rank1") as run:
        assert (run.meta()["rank"], run.meta()["world_size"]) == (1, 4)


@pytest.mark.parametrize("launchers", [
    # mpirun inside a one-task srun step: srun's "one process" leaves it to Open MPI
    {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "1", "OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "4"},
    # empty torchrun variables, a real srun rank
    {"RANK": "", "WORLD_SIZE": "", "SLURM_PROCID": "2", "SLURM_STEP_NUM_TASKS": "4"},
])
def test_the_first_launcher_that_names_a_rank_answers(launchers):
    assert job_rank(launchers) == (JobRank(2, 4), None)


def test_a_negative_job_size_is_reported():
    assert job_rank({"RANK": "0", "WORLD_SIZE": "-3"}) == (
        None, "RANK='0' WORLD_SIZE='-3' is no rank of the job: the run is named without a rank")


def test_a_slurm_batch_script_is_no_rank_of_its_job(run_inprocess, monkeypatch):
    # sbatch runs the script once, with the job's task count but no step of tasks.
    monkeypatch.setenv("SLURM_PROCID", "0")
    monkeypatch.setenv("SLURM_NTASKS", "4")
    code, run = run_inprocess("print('hi')", capture=CaptureOptions(lines=False))
    assert code == 0 and run.path.name == "r0" and "rank" not in run.meta()


def test_torchrun_inside_srun_names_the_run_by_torchrun_rank(tmp_path, monkeypatch):
    for variable, value in {"SLURM_PROCID": "0", "SLURM_STEP_NUM_TASKS": "2", "RANK": "3",
                            "WORLD_SIZE": "8"}.items():
        monkeypatch.setenv(variable, value)
    script = write_script(tmp_path, "pass")
    assert record(Target(str(script), ()), Options(out_dir=str(tmp_path / "runs"), name="job")) == 0
    with RunReader(tmp_path / "runs" / "job-rank3") as run:
        assert (run.meta()["rank"], run.meta()["world_size"]) == (3, 8)


@pytest.mark.parametrize(("rank", "size", "said"), [
    ("a", "2", "RANK='a' WORLD_SIZE='2' are not numbers"),
    ("2", "2", "RANK='2' WORLD_SIZE='2' is no rank of the job"),
])
def test_rank_variables_that_name_no_rank_are_reported_and_the_run_keeps_its_name(
        run_inprocess, monkeypatch, capsys, rank, size, said):
    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", size)
    code, run = run_inprocess("print('hi')", capture=CaptureOptions(lines=False))
    assert code == 0 and run.path.name == "r0" and "rank" not in run.meta()
    err = capsys.readouterr().err
    assert f"tvis: warning: {said}: the run is named without a rank" in err
    assert any(said in warning for warning in run.meta()["warnings"])


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
