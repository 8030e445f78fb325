"""A job is a run: every batch job gets an MLflow run of its own when it is stored, in its owner's
experiment `job-<template>`, with the job's parameters and resources as params and its Slurm tags.
The run's id is the job's UUID (32 hex digits, as MLflow makes ids), so the job, its run and its
environment (MLFLOW_RUN_ID) name one another without another lookup.

Its status and times follow the job's state (the poll cycle's `jobs_changed` and `jobs_ended`); once
the job has ended, its TensorBoard scalars and its benchmark figures join the metrics it logged live.
A job array (a sweep) gets no run here: each of its tasks makes its own (portal.sweeps)."""

import json
import logging
import math
import re
from collections.abc import Sequence
from typing import Any

from django.db import transaction

from portal.benchmarks.models import BenchmarkResult
from portal.benchmarks.services import result_record_from_job
from portal.core.errors import Conflict, InvalidInput
from portal.jobs.models import Job, JobMetric, JobState
from portal.jobs.services.metrics import job_metrics_record
from portal.tracking import validation as v
from portal.tracking.models import Experiment, LatestMetric, LifecycleStage, Param, Run, RunStatus, Tag
from portal.tracking.services import RUN_NAME_TAG, USER_TAG, Point, experiment_create, metrics_record, now_ms

logger = logging.getLogger(__name__)

_ARRAY = re.compile(r"^#SBATCH\s+(--array|-a)[=\s]", re.MULTILINE)
_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]+")
STATUS_OF = {
    JobState.QUEUED_IN_PORTAL: RunStatus.SCHEDULED,
    JobState.PENDING: RunStatus.SCHEDULED,
    JobState.RUNNING: RunStatus.RUNNING,
    JobState.SUSPENDED: RunStatus.RUNNING,
    JobState.COMPLETED: RunStatus.FINISHED,
    JobState.CANCELLED: RunStatus.KILLED,
    JobState.PREEMPTED: RunStatus.KILLED,
    # REJECTED, FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL, DEADLINE: everything else.
}
BENCHMARK_PREFIX = "benchmark/"


def job_run_id(job: Job) -> str:
    return job.uuid.hex


def job_experiment_name(job: Job) -> str:
    return f"job-{job.template}"


def job_is_array(job: Job) -> bool:
    return bool(_ARRAY.search(job.script))


def job_run_params(job: Job) -> dict[str, str]:
    """The template's validated parameters, then the resources Slurm was asked for (`slurm.*`)."""
    params = {key: _text(value) for key, value in job.parameters.items()}
    params.update({"slurm.partition": job.partition, "slurm.nodes": str(job.nodes),
                   "slurm.gpus_per_node": str(job.gpus_per_node),
                   "slurm.cpus_per_node": str(job.cpus_per_node),
                   "slurm.mem_mb_per_node": str(job.mem_mb_per_node),
                   "slurm.time_limit_minutes": str(int(job.time_limit.total_seconds() // 60))})
    return {key: value[:v.MAX_PARAM_VAL_LENGTH] for key, value in params.items()
            if _key_ok(key)}


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _key_ok(key: str) -> bool:
    try:
        v.key_check("key", key, "Param key")
    except InvalidInput:
        return False
    return True


def job_run_tags(job: Job) -> dict[str, str]:
    tags = {RUN_NAME_TAG: job.name[:v.MAX_RUN_NAME_LENGTH], USER_TAG: job.user.username,
            "gpuportal.template": job.template, "gpuportal.job": str(job.pk),
            "slurm.partition": job.partition, "slurm.job_id": job.slurm_job_id or ""}
    return {key: value for key, value in tags.items() if value}


def _experiment(job: Job) -> Experiment | None:
    """The owner's `job-<template>` experiment, made on first use; None if they deleted it (MLflow
    keeps a deleted experiment's name: the job then runs without a run of the portal's)."""
    name = job_experiment_name(job)
    experiment = Experiment.objects.filter(owner=job.user, name=name).first()
    if experiment is None:
        try:
            experiment = experiment_create(user=job.user, name=name)
        except Conflict:  # made meanwhile by a concurrent submission
            experiment = Experiment.objects.get(owner=job.user, name=name)
    return experiment if experiment.lifecycle_stage == LifecycleStage.ACTIVE else None


def job_runs_create(*, jobs: list[Job]) -> list[Run]:
    """Each new job's run (in the transaction that stores the jobs), SCHEDULED until it runs: a
    batch of jobs costs one INSERT of runs, one of params and one of tags."""
    experiments: dict[tuple[int, str], Experiment | None] = {}
    runs = []
    for job in jobs:
        if job_is_array(job):
            continue
        key = (job.user_id, job_experiment_name(job))
        if key not in experiments:
            experiments[key] = _experiment(job)
        if (experiment := experiments[key]) is None:
            continue
        run_id = job_run_id(job)
        runs.append(Run(
            run_id=run_id, experiment=experiment, owner=job.user, run_name=job.name[:v.MAX_RUN_NAME_LENGTH],
            status=STATUS_OF.get(job.state, RunStatus.SCHEDULED),
            start_time=_millis(job.submitted_at) or now_ms(),
            artifact_uri=f"{experiment.artifact_location}/{run_id}/artifacts", job=job))
    Run.objects.bulk_create(runs)
    Param.objects.bulk_create([Param(run=run, key=key, value=value)
                               for run in runs for key, value in job_run_params(run.job).items()])
    Tag.objects.bulk_create([Tag(run=run, key=key, value=value)
                             for run in runs for key, value in job_run_tags(run.job).items()])
    return runs


def job_runs_environment(jobs: Sequence[Job]) -> dict[int, dict[str, str]]:
    """MLFLOW_RUN_ID and MLFLOW_EXPERIMENT_NAME of each job that has its run (one query), so that
    `mlflow.start_run()` in the job (after `mlflow.set_experiment(os.environ["MLFLOW_EXPERIMENT_NAME"])`)
    logs into it."""
    wanted = {job_run_id(job): job.pk for job in jobs}
    runs = Run.objects.filter(run_id__in=wanted, job__in=wanted.values()).values_list(
        "run_id", "job_id", "experiment__name")
    return {job_id: {"MLFLOW_RUN_ID": run_id, "MLFLOW_EXPERIMENT_NAME": name}
            for run_id, job_id, name in runs if wanted[run_id] == job_id}


def _millis(moment: Any) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


def job_runs_follow(*, job_ids: list[int]) -> int:
    """Bring the runs of these jobs to their job's state: status, start and end, Slurm's job id.
    A run still SCHEDULED or RUNNING follows a live job (the job's own client may have ended it
    already: that stays); an ended job's state is the run's last word. Returns how many runs moved."""
    moved = 0
    tags = []
    with transaction.atomic():
        for run in Run.objects.filter(job_id__in=job_ids).select_related("job"):
            job = run.job
            if run.run_id != job_run_id(job):
                continue  # a run the job's client made: it ends it itself
            final = job.is_terminal
            if not final and run.status not in (RunStatus.SCHEDULED, RunStatus.RUNNING):
                continue
            status = STATUS_OF.get(job.state, RunStatus.FAILED)
            fields = {"status": status, "end_time": _millis(job.ended_at) if final else None}
            if job.started_at:
                fields["start_time"] = _millis(job.started_at)
            # A job just taken by Slurm leaves its run as it was (SCHEDULED): only its tag is new.
            if any(getattr(run, name) != value for name, value in fields.items()):
                moved += Run.objects.filter(pk=run.pk).update(**fields)
            if job.slurm_job_id:
                tags.append(Tag(run=run, key="slurm.job_id", value=job.slurm_job_id))
        # Every run's Slurm id in one statement, new or changed.
        Tag.objects.bulk_create(tags, update_conflicts=True, unique_fields=["run", "key"],
                                update_fields=["value"])
    return moved


def job_run_end(*, job_id: int) -> int:
    """An ended job's run: its final status, then its TensorBoard scalars and benchmark figures as
    metrics, for every key the job did not log itself (a key it logged live keeps its own points).
    Both come from the apps' own end-of-job readers, which record once (a retry re-reads nothing
    already recorded). Returns how many points were added; Unavailable lets the task retry."""
    job_runs_follow(job_ids=[job_id])
    job = Job.objects.select_related("user").filter(pk=job_id).first()
    if job is None or (run := Run.objects.filter(run_id=job_run_id(job), job=job).first()) is None:
        return 0
    if not JobMetric.objects.filter(job=job).exists():
        job_metrics_record(job=job)
    result_record_from_job(job_id=job.pk)
    timestamp = _millis(job.ended_at) or now_ms()
    points = [*_tensorboard_points(job, timestamp), *_benchmark_points(job, timestamp)]
    logged = set(LatestMetric.objects.filter(run=run).values_list("key", flat=True))
    points = [point for point in points if point.key not in logged]
    if points:
        metrics_record(run=run, points=points)
    return len(points)


def _tensorboard_points(job: Job, timestamp: int) -> list[Point]:
    """A scalar of the logdir's top is its tag (`loss`, as the job's MLflow logging names it too);
    one of a subfolder (TensorBoard's runs) is `<folder>/<tag>`."""
    points = []
    for series in JobMetric.objects.filter(job=job):
        key = _key(f"{series.run}/{series.tag}" if series.run else series.tag)
        points += [Point(key=key, value=value, timestamp=timestamp, step=step)
                   for step, value in zip(series.steps, series.values, strict=True)
                   if value is not None and key]
    return points


def _benchmark_points(job: Job, timestamp: int) -> list[Point]:
    """Each parsed figure as `benchmark/<metric>` (`benchmark/<case>/<metric>` for a tool with cases)."""
    points = []
    for case, metric, value in BenchmarkResult.objects.filter(job=job, parsed=True, value__isnull=False) \
            .values_list("case", "metric", "value"):
        key = _key(BENCHMARK_PREFIX + "/".join(part for part in (case, metric) if part))
        if key and math.isfinite(value):
            points.append(Point(key=key, value=value, timestamp=timestamp, step=0))
    return points


def _key(text: str) -> str:
    """A valid MLflow key from TensorBoard's or a parser's names: other characters become `_`."""
    key = _KEY_UNSAFE.sub("_", text).strip("/ ")[:v.MAX_ENTITY_KEY_LENGTH]
    return key if _key_ok(key) else ""
