"""Reads for batch jobs: lists and details from the database, partition limits from the snapshot."""

import operator
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from functools import reduce
from typing import Any, Protocol

from django.conf import settings
from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.core.converters import id_or_none
from portal.core.errors import InvalidInput
from portal.jobs.job_templates import JobTemplate
from portal.jobs.models import Job, JobMetric
from portal.policy.rules import PartitionRules, Policy
from portal.policy.services import policy_current


@dataclass(frozen=True)
class PartitionLimits:
    """What one job may ask of a partition, from the last cluster poll and the portal's settings."""

    name: str
    is_default: bool
    max_time: timedelta | None
    max_nodes: int
    max_gpus_per_node: int
    cpus_per_node: int
    cpus_per_gpu: int
    mem_gb_per_gpu: int
    cpus_without_gpu: int
    mem_gb_without_gpu: int

    @property
    def max_time_minutes(self) -> int | None:
        return None if self.max_time is None else int(self.max_time.total_seconds() // 60)

    def cpus(self, gpus_per_node: int) -> int:
        return gpus_per_node * self.cpus_per_gpu if gpus_per_node else self.cpus_without_gpu

    def mem_mb(self, gpus_per_node: int) -> int:
        gigabytes = gpus_per_node * self.mem_gb_per_gpu if gpus_per_node else self.mem_gb_without_gpu
        return gigabytes * 1024


def partition_limits_list(policy: Policy | None = None) -> list[PartitionLimits]:
    """The partitions as the one policy has them (portal.policy), in the snapshot's order."""
    policy = policy or policy_current()
    return [partition_limits(rules, is_default=rules.name == policy.default_partition)
            for rules in policy.partitions.values()]


def partition_limits(rules: PartitionRules, *, is_default: bool) -> PartitionLimits:
    return PartitionLimits(
        name=rules.name, is_default=is_default,
        max_time=timedelta(hours=rules.max_hours) if rules.max_hours < settings.SITE_MAX_WALLTIME_MINUTES / 60
        else None,
        max_nodes=rules.nodes, max_gpus_per_node=rules.gpus_per_node, cpus_per_node=rules.cpus_per_node,
        cpus_per_gpu=rules.cpus_per_gpu, mem_gb_per_gpu=rules.mem_gb_per_gpu,
        cpus_without_gpu=rules.cpus_without_gpu, mem_gb_without_gpu=rules.mem_gb_without_gpu)


class JobKey(StrEnum):
    """The three ids one job has."""

    ID = "id"  # the portal's job number: /jobs/140/, what the API and the CLI take
    SLURM = "slurm"  # Slurm's job id, as squeue shows it; `496_3` is task 3 of a sweep's array 496
    UUID = "uuid"  # the Portal ID, in the job's Slurm comment and its output files' names


# What a Slurm job id and a Portal ID look like, for the message refusing another value.
_EXPECTED = {JobKey.SLURM: "a Slurm job id such as 496, or 496_3 for task 3 of a sweep's job array",
             JobKey.UUID: "a Portal ID: a UUID such as 0b5e7c1e-8f3a-4d2b-9c61-2f0e4a7d9b13"}

# A Slurm job id, or one task of an array (`<array id>_<task>`); squeue's `496_[1-3]` names no one task.
_SLURM_ID = re.compile(r"(?P<array>[0-9]{1,18})(?:_(?P<task>[0-9]{1,9}))?")


def _key_filter(by: JobKey, key: str) -> Q | None:
    """The rows `key` names as a `by` id; None when `key` is not one."""
    if by == JobKey.ID:
        number = id_or_none(key)
        return None if number is None else Q(pk=number)
    if by == JobKey.UUID:
        try:
            return Q(uuid=uuid.UUID(key))
        except ValueError:
            return None
    match = _SLURM_ID.fullmatch(key)
    if match is None:
        return None
    # A sweep is one Job holding its array's id: a task's id finds it, and only an array job.
    array = str(int(match["array"]))
    return Q(slurm_job_id=array, sweep__isnull=False) if match["task"] else Q(slurm_job_id=array)


def _visible(user: User) -> QuerySet[Job]:
    """The jobs `user` may see: their own, an admin's everybody's."""
    jobs = Job.objects.select_related("user")
    return jobs if user.is_staff else jobs.filter(user=user)


@dataclass(frozen=True)
class JobFilters:
    state: str | None = None
    template: str | None = None
    submitted_after: datetime | None = None
    submitted_before: datetime | None = None
    username: str | None = None
    # Any of a job's ids (number, Slurm job id or task, Portal ID): the jobs it names.
    any_id: str | None = None


def job_list(*, user: User, filters: JobFilters | None = None) -> QuerySet[Job]:
    """The user's jobs (an admin's: everybody's), newest first, without the heavy columns."""
    filters = filters or JobFilters()
    jobs = _visible(user).defer("script", "parameters")
    if user.is_staff and filters.username:
        jobs = jobs.filter(user__username=filters.username)
    if filters.any_id:
        # A number may be a job number and a Slurm job id: the jobs of both are listed.
        named = [q for by in JobKey if (q := _key_filter(by, filters.any_id)) is not None]
        jobs = jobs.filter(reduce(operator.or_, named)) if named else jobs.none()
    if filters.state:
        jobs = jobs.filter(state=filters.state)
    if filters.template:
        jobs = jobs.filter(template=filters.template)
    if filters.submitted_after:
        jobs = jobs.filter(submitted_at__gte=filters.submitted_after)
    if filters.submitted_before:
        jobs = jobs.filter(submitted_at__lt=filters.submitted_before)
    return jobs.order_by("-submitted_at", "-id")


def job_get(*, user: User, job_id: int) -> Job | None:
    """One job the user may see (None for another user's: callers answer 404, not 403)."""
    return _visible(user).filter(pk=job_id).first()


def job_find(*, user: User, key: str, by: JobKey = JobKey.ID) -> Job | None:
    """The job the user may see whose `by` id is `key`, as job_get (None for another user's). A
    Slurm job id names the newest such job: Slurm numbers jobs afresh when its database is reset.
    A `key` that is no Slurm job id or Portal ID is InvalidInput naming `job_id`; one that is no job
    number names no job (None), as every other route's id (portal.core.converters)."""
    named = _key_filter(by, key)
    if named is None and by == JobKey.ID:
        return None
    if named is None:
        raise InvalidInput({"job_id": [f"Expected {_EXPECTED[by]} (by={by.value})."]})
    return _visible(user).filter(named).order_by("-submitted_at", "-id").first()


def job_metrics_list(*, job: Job) -> list[JobMetric]:
    """The job's recorded training metrics, by run and tag."""
    return list(JobMetric.objects.filter(job=job).order_by("run", "tag"))


class Series(Protocol):
    """A scalar series as the chart draws it: a JobMetric, or a run's curve (portal.tracking.curves)."""

    run: str
    tag: str
    steps: list[int]
    values: list[float | None]


def job_metrics_chart(*, metrics: Sequence[Series]) -> dict[str, Any] | None:
    """A Vega-Lite spec with one panel per tag (each with its own scale: a loss and images/sec do
    not share an axis) and a line per run; None when there is nothing to draw."""
    rows = [{"tag": metric.tag, "run": metric.run or ".", "step": step, "value": value}
            for metric in metrics for step, value in zip(metric.steps, metric.values, strict=True)
            if value is not None]
    if not rows:
        return None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "facet": {"row": {"field": "tag", "type": "nominal", "title": None,
                          "header": {"labelAngle": 0, "labelAlign": "left"}}},
        "spec": {
            "width": 560, "height": 140, "mark": {"type": "line", "interpolate": "linear"},
            "encoding": {
                "x": {"field": "step", "type": "quantitative", "title": "step"},
                "y": {"field": "value", "type": "quantitative", "title": None, "scale": {"zero": False}},
                "color": {"field": "run", "type": "nominal", "title": "run"},
                "tooltip": [{"field": "tag"}, {"field": "run"}, {"field": "step"}, {"field": "value"}],
            },
        },
        "resolve": {"scale": {"y": "independent"}},
    }


@dataclass(frozen=True)
class ComposeStart:
    """What the composer starts from instead of the template's defaults."""

    values: dict[str, Any]
    name: str
    # When the values are the user's last job of this template: its submission, which the form names.
    last_submitted_at: datetime | None = None


def job_compose_initial(*, user: User, template: JobTemplate,
                        query: Mapping[str, str]) -> ComposeStart | None:
    """Parameter values and job name the composer starts from: `?clone=ID` (that job as it ran,
    its time limit as extended), the template's own parameters in the query (a preset's link; checked
    as any input when submitted), or the user's last job of this template unless `?defaults=1`;
    None: the defaults."""
    if (clone_id := id_or_none(query.get("clone", ""))) is not None:
        original = job_get(user=user, job_id=clone_id)
        if original is None:  # not one the user may see: the template's defaults, nothing of theirs
            return None
        values = dict(original.parameters)
        values["time_limit"] = int(original.time_limit.total_seconds() // 60)
        return ComposeStart(values, original.name)
    given = {p.name: query[p.name] for p in template.parameters if p.name in query}
    if given:
        return ComposeStart(given, template.slug)
    if query.get("defaults"):
        return None
    last = Job.objects.filter(user=user, template=template.slug).first()  # newest first
    if last is None:
        return None
    return ComposeStart(dict(last.parameters), template.slug, last_submitted_at=last.submitted_at)

