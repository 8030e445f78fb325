"""Recording a finished job's training metrics.

The job's own exit hook (templates/jobs/_common/prologue.sh.j2) read its TensorBoard events with
TensorBoard's event reader, as the user, and wrote ~/gpuportal/jobs/job-<uuid>.metrics.json. The
portal reads that file only through the job-files helper (as the user, like the job's log), and
checks its shape and size: the file is the user's, so it is input like any other.
"""

import json
import logging
import math
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from portal.core.errors import Unavailable
from portal.jobs.models import Job, JobMetric
from portal.jobs.services.prepare import unix_account
from slurm.errors import SlurmError
from slurm.user_files import OutputUnsafe, job_output_read

logger = logging.getLogger(__name__)

MAX_SERIES = 100
MAX_POINTS = 1000
MAX_NAME = 200


class MetricsInvalid(ValueError):
    """The metrics file is not what the exporter writes."""


@dataclass(frozen=True)
class Series:
    run: str
    tag: str
    steps: list[int]
    values: list[float | None]


def metrics_parse(data: bytes) -> list[Series]:
    """The series in a metrics file, or MetricsInvalid."""
    try:
        document = json.loads(data, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as error:
        raise MetricsInvalid(f"not JSON: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("series"), list):
        raise MetricsInvalid("expected an object with a list `series`")
    if len(document["series"]) > MAX_SERIES:
        raise MetricsInvalid(f"more than {MAX_SERIES} series")
    found: dict[tuple[str, str], Series] = {}
    for item in document["series"]:
        series = _series(item)
        found[series.run, series.tag] = series
    return list(found.values())


def _refuse_constant(name: str) -> None:
    raise MetricsInvalid(f"{name} is not a number JSON knows")


def _series(item: Any) -> Series:
    if not isinstance(item, dict):
        raise MetricsInvalid("a series must be an object")
    run, tag, steps, values = (item.get(key) for key in ("run", "tag", "steps", "values"))
    if not isinstance(run, str) or not isinstance(tag, str) or not tag:
        raise MetricsInvalid("a series needs text `run` and `tag`")
    if len(run) > MAX_NAME or len(tag) > MAX_NAME or "\x00" in run + tag:
        raise MetricsInvalid(f"run and tag names are at most {MAX_NAME} characters, without NUL")
    if not isinstance(steps, list) or not isinstance(values, list) or len(steps) != len(values):
        raise MetricsInvalid(f"{tag}: `steps` and `values` must be lists of the same length")
    if len(steps) > MAX_POINTS:
        raise MetricsInvalid(f"{tag}: more than {MAX_POINTS} points")
    if not all(isinstance(step, int) and not isinstance(step, bool) and 0 <= step < 2**63 for step in steps):
        raise MetricsInvalid(f"{tag}: steps must be whole numbers")
    if not all(value is None or (isinstance(value, int | float) and not isinstance(value, bool)
                                 and math.isfinite(value)) for value in values):
        raise MetricsInvalid(f"{tag}: values must be finite numbers or null")
    return Series(run=run, tag=tag, steps=steps,
                  values=[None if value is None else float(value) for value in values])


def job_metrics_record(*, job: Job) -> int:
    """Read the job's metrics file as its user and store its series (replacing any); returns how
    many. No file (a job that wrote no events) records nothing. Raises Unavailable when the helper
    did not answer, so the caller may retry."""
    username = unix_account(job.user.username).pw_name
    limit = settings.JOBS_METRICS_MAX_BYTES
    try:
        output = job_output_read(user=username, job_uuid=job.uuid, stream="metrics", offset=0, limit=limit)
    except OutputUnsafe as error:
        logger.warning("metrics of job %s not read: %s", job.pk, error.message)
        return 0
    except SlurmError as error:
        raise Unavailable(f"The metrics of job {job.pk} cannot be read right now: {error.message}",
                          code="metrics_unavailable") from error
    if not output.exists:
        return 0
    if output.size > limit:
        logger.warning("metrics of job %s not read: %d bytes, more than %d", job.pk, output.size, limit)
        return 0
    try:
        series = metrics_parse(output.data)
    except MetricsInvalid as error:
        logger.warning("metrics of job %s not recorded: %s", job.pk, error)
        return 0
    with transaction.atomic():
        JobMetric.objects.filter(job=job).delete()
        JobMetric.objects.bulk_create([JobMetric(
            job=job, run=item.run, tag=item.tag, steps=item.steps, values=item.values,
            **_final(item)) for item in series])
    return len(series)


def _final(series: Series) -> dict[str, Any]:
    """The last logged point that is a number."""
    for step, value in zip(reversed(series.steps), reversed(series.values), strict=True):
        if value is not None:
            return {"final_step": step, "final_value": value}
    return {"final_step": None, "final_value": None}
