"""The batch script of a TensorBoard job: written by the portal, every value shell-quoted."""

import shlex
from datetime import timedelta

from django.conf import settings

from portal.tensorboards.models import TensorBoard
from slurm.parsing import format_duration

_BODY = """set -uo pipefail
# TensorBoard listens on this node only (never on every interface): on its name if that resolves,
# else on its host name. It prints "TensorBoard <version> at http://HOST:PORT/..." to stderr, where
# the portal reads HOST and PORT (the OS picks a free port) and checks them against this job.
host=${{SLURMD_NODENAME:-$(hostname)}}
getent hosts "$host" >/dev/null 2>&1 || host=$(hostname)
echo "gpuportal TensorBoard {uuid} (Slurm job ${{SLURM_JOB_ID:-?}}) on $host at $(date -Is)"
exec {command} --logdir {logdir} --host "$host" --port 0 --path_prefix {prefix}
"""


def output_paths(*, board: TensorBoard, output_dir: str) -> tuple[str, str]:
    """Its stdout and stderr: where the job-files helper reads a job's output, by its UUID."""
    return f"{output_dir}/job-{board.uuid}.out", f"{output_dir}/job-{board.uuid}.err"


def tensorboard_script(*, board: TensorBoard, output_dir: str) -> str:
    stdout, stderr = output_paths(board=board, output_dir=output_dir)
    options: list[tuple[str, object]] = [
        ("job-name", "tensorboard"), ("comment", board.slurm_comment), ("nodes", 1),
        ("ntasks", 1), ("cpus-per-task", 1), ("mem", f"{settings.TENSORBOARD_MEM_MB}M"),
        ("time", format_duration(timedelta(minutes=settings.TENSORBOARD_TIME_LIMIT_MINUTES))),
        ("chdir", output_dir), ("output", stdout), ("error", stderr),
    ]
    if settings.TENSORBOARD_PARTITION:
        options.insert(2, ("partition", settings.TENSORBOARD_PARTITION))
    header = ["#!/bin/bash"] + [f"#SBATCH --{key}={shlex.quote(str(value))}" for key, value in options]
    command = " ".join(shlex.quote(word) for word in shlex.split(settings.TENSORBOARD_COMMAND))
    body = _BODY.format(uuid=board.uuid, command=command, logdir=shlex.quote(board.logdir),
                        prefix=shlex.quote(board.path_prefix))
    return "\n".join(header) + "\n" + body
