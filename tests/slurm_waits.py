"""Waiting on the real Slurm in tests: one patience for every wait, and one meaning of "gone".

A new cluster is slow at first: its first jobs take longer to start, and to be cleaned up once
cancelled, than the thousandth. So no wait on Slurm has a timeout of its own tuned on a warm
cluster; they all take SLURM_PATIENCE (GPUPORTAL_TEST_SLURM_PATIENCE, in seconds). Waits that are
mostly the job's own work (a training, an image pull) keep their longer bounds."""

import os
import subprocess
import time
from collections.abc import Iterable

import pytest

from slurm import states

SLURM_PATIENCE = float(os.environ.get("GPUPORTAL_TEST_SLURM_PATIENCE", "60"))


def squeue_state(job_id: str) -> str:
    """The job's state while squeue lists it by default (waiting, running, completing); '' after."""
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True,
                         check=False)
    return out.stdout.strip()


def still_live(job_ids: Iterable[str]) -> dict[str, str]:
    """Those of these jobs that a cancel has not reached yet, with their states.

    A COMPLETING job counts as gone here: it has ended and its processes are being cleaned up, which
    takes a while on a new cluster. (slurm.states counts it as running, since for the portal it still
    holds its GPUs.) So does a final state, and a job squeue no longer knows."""
    ids = list(job_ids)
    done = subprocess.run(["squeue", "-h", "--states=all", "-j", ",".join(ids), "-o", "%i %T"],
                          capture_output=True, text=True, check=False)
    # Asked for one job only, squeue answers "Invalid job id" once slurmctld has forgotten it.
    assert done.returncode == 0 or "Invalid job id" in done.stderr, done.stderr
    listed = dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if line.strip())
    return {job_id: state for job_id, state in listed.items()
            if states.is_live(state) and states.base_state(state) != "COMPLETING"}


def wait_until_gone(job_ids: Iterable[str], what: str) -> None:
    """Wait up to SLURM_PATIENCE until none of these jobs is live (still_live); fail naming those left."""
    ids = list(job_ids)
    deadline = time.monotonic() + SLURM_PATIENCE
    while live := still_live(ids):
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: still live in Slurm after {SLURM_PATIENCE:.0f} s: {live}")
        time.sleep(0.5)
