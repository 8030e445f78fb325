"""A job array (a sweep: portal.sweeps) is one Job whose Slurm id is the array's: squeue and sacct
list its tasks as `<id>_<task>` (and the tasks not started yet as one `<id>_[5-7%4]` row). These
fold a listing's task rows into one row per array, so the jobs' state machine follows the array as
one job: live while any task is, ended when every task has, and COMPLETED only if every task did."""

from dataclasses import replace
from datetime import datetime

from slurm import states as slurm_states
from slurm.parsing import AccountedJob, QueuedJob, array_tasks


def queue_arrays_fold(queue: list[QueuedJob]) -> list[QueuedJob]:
    """The queue with each array's task rows replaced by one row under the array's id: a running
    task's row if one runs, else a pending one's, else (all ended, squeue --states=all) the first."""
    folded: dict[str, QueuedJob] = {}
    rows: list[QueuedJob] = []
    for row in queue:
        if (parts := array_tasks(row.job_id)) is None:
            rows.append(row)
            continue
        kept = folded.get(parts[0])
        if kept is None or _rank(row.state) > _rank(kept.state):
            folded[parts[0]] = replace(row, job_id=parts[0])
    return rows + list(folded.values())


def accounting_arrays_fold(rows: list[AccountedJob]) -> list[AccountedJob]:
    """Accounting with each array's task rows replaced by one under the array's id: its state the
    first task's that is live, else CANCELLED if any task was (the array was cut short), else the
    first that did not complete, else COMPLETED; its elapsed
    time the tasks' sum (GPU-hours add up); its end unknown while any task's is."""
    groups: dict[str, list[AccountedJob]] = {}
    plain: list[AccountedJob] = []
    for row in rows:
        if (parts := array_tasks(row.job_id)) is None:
            plain.append(row)
        else:
            groups.setdefault(parts[0], []).append(row)
    for array_id, tasks in groups.items():
        live = [task for task in tasks if slurm_states.is_live(task.state)]
        cancelled = [task for task in tasks if task.base_state == slurm_states.CANCELLED]
        failed = [task for task in tasks if task.base_state != slurm_states.COMPLETED]
        chosen = (live or cancelled or failed or tasks)[0]
        ends = [task.end_time for task in tasks]
        starts = [task.start_time for task in tasks if task.start_time is not None]
        plain.append(replace(
            chosen, job_id=array_id, elapsed_seconds=sum(task.elapsed_seconds for task in tasks),
            start_time=min(starts) if starts else None,
            end_time=None if live or None in ends else max(end for end in ends if isinstance(end, datetime)),
            nodes=",".join(dict.fromkeys(task.nodes for task in tasks if task.nodes)),
            gpus=max(task.gpus for task in tasks)))
    return plain


def _rank(state: str) -> int:
    base = slurm_states.base_state(state)
    return 3 if base in slurm_states.RUNNING else 2 if base in slurm_states.LIVE else 1
