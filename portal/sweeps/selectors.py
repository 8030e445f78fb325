"""Reading sweeps: the owner's (admins: everybody's), each task's progress and its MLflow run. No
Slurm call: task states are the poll cycle's, runs are what the tasks logged (portal.tracking)."""

import math
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.jobs.models import JobState
from portal.sweeps.models import Direction, Sweep
from portal.tracking.models import LifecycleStage, Run, Tag
from slurm import states as slurm_states

SWEEP_TAG, TASK_TAG = "gpuportal.sweep", "gpuportal.sweep_task"
PROGRESS_KEYS = ("pending", "running", "done", "failed", "cancelled")


def sweep_list(*, user: User) -> QuerySet[Sweep]:
    sweeps = Sweep.objects.select_related("job", "user")
    return sweeps if user.is_staff else sweeps.filter(user=user)


def sweep_get(*, user: User, sweep_id: int) -> Sweep | None:
    return sweep_list(user=user).filter(pk=sweep_id).first()


@dataclass
class TaskRun:
    """One task: its varied values, its state, and its run's final metrics (None: no run yet)."""

    index: int
    values: dict[str, Any]
    state: str
    run_id: str | None = None
    run_name: str = ""
    status: str = ""
    metrics: dict[str, float | None] = field(default_factory=dict)
    best: bool = False


@dataclass
class SweepView:
    sweep: Sweep
    progress: dict[str, int]
    tasks: list[TaskRun]
    metric_keys: list[str]
    param_keys: list[str]
    best: TaskRun | None


def task_state(sweep: Sweep, index: int) -> str:
    """pending, running, done, failed or cancelled: Slurm's state of the task as the cycle saw it;
    a task never seen running when the array ended was cancelled (or never started)."""
    state = sweep.task_states.get(str(index), "")
    if slurm_states.base_state(state) == slurm_states.COMPLETED:
        return "done"
    if slurm_states.base_state(state) == slurm_states.CANCELLED:
        return "cancelled"
    if slurm_states.is_final(state):
        return "failed"
    job = sweep.job
    if job is not None and job.is_terminal:
        # Ended with the array before the cycle saw its end: the array's final state says how.
        return "done" if job.state == JobState.COMPLETED else "cancelled" if (
            job.state == JobState.CANCELLED or state in ("", *slurm_states.PENDING)) else "failed"
    return "running" if state in slurm_states.RUNNING else "pending"


def sweep_view(*, sweep: Sweep) -> SweepView:
    """Progress, every task with its run's params and final metrics, and the best run by the
    objective (a NaN never wins). Three queries whatever the number of tasks."""
    runs: dict[int, Run] = {}
    if sweep.job_id is not None:
        found = (Run.objects.filter(job_id=sweep.job_id, lifecycle_stage=LifecycleStage.ACTIVE,
                                    tags__key=TASK_TAG)
                 .prefetch_related("latest_metrics").order_by("start_time"))
        tagged = {tag.run_id: tag.value for tag in
                  Tag.objects.filter(run__in=found, key=TASK_TAG)}
        for run in found:
            value = tagged.get(run.pk, "")
            if value.isdigit():
                runs[int(value)] = run  # a task that ran twice (requeued): its last run
    tasks: list[TaskRun] = []
    metric_keys: set[str] = set()
    for index, values in enumerate(sweep.tasks):
        task = TaskRun(index=index, values=values, state=task_state(sweep, index))
        if (run := runs.get(index)) is not None:
            task.run_id, task.run_name, task.status = run.run_id, run.run_name, run.status
            task.metrics = {metric.key: None if math.isnan(metric.value) else metric.value
                            for metric in run.latest_metrics.all()}
            metric_keys.update(task.metrics)
            if run.status in ("FINISHED", "FAILED", "KILLED") and task.state in ("pending", "running"):
                task.state = "done" if run.status == "FINISHED" else "failed"
        tasks.append(task)
    scored = [t for t in tasks if t.metrics.get(sweep.objective) is not None]
    best = None
    if scored:
        pick = max if sweep.direction == Direction.MAX else min
        best = pick(scored, key=lambda t: t.metrics[sweep.objective])
        best.best = True
    progress = dict.fromkeys(PROGRESS_KEYS, 0)
    for task in tasks:
        progress[task.state] += 1
    param_keys = list(dict.fromkeys(key for values in sweep.tasks for key in values))
    return SweepView(sweep=sweep, progress=progress, tasks=tasks, best=best, param_keys=param_keys,
                     metric_keys=sorted(metric_keys, key=lambda k: (k != sweep.objective, k)))
