"""Which process of a distributed job this is, as its launcher tells it in the environment.

Each process of a job records a run of its own, named and marked by its rank. Launchers
are asked in this order (the first whose two variables are both set answers):

- torchrun and the launchers built like it (accelerate, deepspeed): RANK, WORLD_SIZE;
- Slurm's srun: SLURM_PROCID and SLURM_STEP_NUM_TASKS. Not SLURM_NTASKS: a batch script is
  one process with SLURM_PROCID=0 and the job's task count, which would name its run
  "rank0" of a job it is not a rank of;
- Open MPI's mpirun: OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE;
- MPICH and Intel MPI (Hydra): PMI_RANK, PMI_SIZE.

The first launcher that names a rank of a job of several processes answers: one that says
"a job of one process" (`srun -n 1` around `mpirun`) leaves the question to the next.
Values that name no rank (`RANK=a`, a rank past the size) are reported when no launcher
answers, and the run is recorded under its plain name.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping

LAUNCHER_VARIABLES = (
    ("RANK", "WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
)
"""(rank, size) variables of each launcher, in the order they are asked."""


@dataclass(frozen=True)
class JobRank:
    """This process's place in a distributed job."""

    rank: int
    world_size: int

    def name(self, name: str | None) -> str | None:
        """The run name for this rank (None stays None: the default name is made later)."""
        return f"{name}-rank{self.rank}" if name is not None else None

    def meta(self) -> dict[str, int]:
        return {"rank": self.rank, "world_size": self.world_size}


def job_rank(environ: Mapping[str, str] = os.environ) -> tuple[JobRank | None, str | None]:
    """(this process's rank, or None when it is no rank of a job of several processes;
    a one-line problem with the launchers' variables, or None)."""
    problems = []
    for rank_name, size_name in LAUNCHER_VARIABLES:
        if rank_name not in environ or size_name not in environ:
            continue
        text = f"{rank_name}={environ[rank_name]!r} {size_name}={environ[size_name]!r}"
        try:
            rank, size = int(environ[rank_name]), int(environ[size_name])
        except ValueError:
            problems.append(f"{text} are not numbers")
            continue
        if (rank, size) == (0, 1):
            continue  # a job of one process (`srun -n 1` around `mpirun`): ask the next launcher
        if not 0 <= rank < size:
            problems.append(f"{text} is no rank of the job")
            continue
        return JobRank(rank, size), None
    return None, f"{problems[0]}: the run is named without a rank" if problems else None
