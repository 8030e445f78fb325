"""Reads: history with filters, one result, side-by-side comparison, references, published series.

Who sees what: benchmark results are the site's shared record (like ReFrame's performance logs), so
every portal user sees every result; the job a result came from stays visible only to its owner and
admins (the jobs app decides that). Only admins import results and set references.
"""

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from portal.accounts.models import User
from portal.benchmarks.models import CONTEXT_FIELDS, BenchmarkResult, PublishedResult, Reference
from portal.jobs.models import Job

# A page of history: bounded whatever the client asks.
MAX_PAGE = 200
MAX_COMPARE = 20
LIST_FIELDS = (
    "id",
    "tool",
    "case",
    "source",
    *CONTEXT_FIELDS,
    "run_at",
    "user_id",
    "user__username",
    "job_id",
    "metric",
    "value",
    "unit",
    "parsed",
    "reason",
    "flagged",
    "flag_reason",
    "reference_id",
)


@dataclass(frozen=True)
class ResultFilters:
    tool: str | None = None
    model: str | None = None
    precision: str | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    partition: str | None = None
    flagged: bool | None = None
    parsed: bool | None = None
    run_after: datetime | None = None
    run_before: datetime | None = None
    username: str | None = None


def result_list(*, user: User, filters: ResultFilters = ResultFilters()) -> QuerySet[BenchmarkResult]:
    """Newest first; one query for a page (the user's name comes in the same join; `data` stays out)."""
    results = BenchmarkResult.objects.select_related("user").defer("data")
    exact = {
        "tool": filters.tool,
        "model": filters.model,
        "precision": filters.precision,
        "gpus": filters.gpus,
        "gpu_type": filters.gpu_type,
        "partition": filters.partition,
        "flagged": filters.flagged,
        "parsed": filters.parsed,
        "user__username": filters.username,
    }
    results = results.filter(**{k: v for k, v in exact.items() if v is not None and v != ""})
    if filters.run_after:
        results = results.filter(run_at__gte=filters.run_after)
    if filters.run_before:
        results = results.filter(run_at__lt=filters.run_before)
    return results.order_by("-run_at", "-id")


def results_older_than(results: QuerySet[BenchmarkResult], *, run_at: datetime, pk: int) -> QuerySet:
    """Keyset page: rows after (run_at, pk) in newest-first order; no OFFSET, no COUNT(*)."""
    return results.filter(Q(run_at__lt=run_at) | Q(run_at=run_at, pk__lt=pk))


def result_get(*, user: User, result_id: int) -> BenchmarkResult | None:
    return BenchmarkResult.objects.select_related("user", "reference", "job").filter(pk=result_id).first()


def results_compare(*, user: User, ids: list[int]) -> list[BenchmarkResult]:
    """The chosen results in the order asked (unknown ids are left out), with their references: two
    queries however many."""
    found = {
        r.pk: r
        for r in BenchmarkResult.objects.select_related("user", "reference").filter(pk__in=ids[:MAX_COMPARE])
    }
    return [found[i] for i in ids[:MAX_COMPARE] if i in found]


def job_visible(*, user: User, result: BenchmarkResult) -> bool:
    return result.job_id is not None and (user.is_staff or result.user_id == user.pk)


def reference_list(*, tool: str | None = None, metric: str | None = None) -> QuerySet[Reference]:
    references = Reference.objects.select_related("created_by")
    if tool:
        references = references.filter(tool=tool)
    if metric:
        references = references.filter(metric=metric)
    return references


def published_list(
    *, metric: str | None = None, model_contains: str | None = None, benchmark: str | None = None
) -> QuerySet[PublishedResult]:
    published = PublishedResult.objects.defer("entry")
    if metric:
        published = published.filter(metric=metric)
    if model_contains:
        published = published.filter(model__icontains=model_contains)
    if benchmark:
        published = published.filter(benchmark=benchmark)
    return published


def choices() -> dict[str, list]:
    """Distinct values for the history's filter menus (small: from the series index)."""
    rows = (
        BenchmarkResult.objects.values_list("tool", "model", "precision", "gpus").order_by().distinct()[:2000]
    )
    tools, models, precisions, gpus = set(), set(), set(), set()
    for tool, model, precision, count in rows:
        tools.add(tool)
        models.add(model)
        precisions.add(precision)
        gpus.add(count)
    partitions = BenchmarkResult.objects.values_list("partition", flat=True).order_by().distinct()[:200]
    gpu_types = BenchmarkResult.objects.values_list("gpu_type", flat=True).order_by().distinct()[:200]
    clean = lambda values: sorted(v for v in values if v not in ("", None))  # noqa: E731
    return {
        "tools": clean(tools),
        "models": clean(models),
        "precisions": clean(precisions),
        "gpus": clean(gpus),
        "partitions": clean(partitions),
        "gpu_types": clean(gpu_types),
    }


_UUID = re.compile(r"[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}")


def inference_origin(*, user: User, result: BenchmarkResult) -> dict[str, Any] | None:
    """The training job whose checkpoint an inference job measured (a pytorch-train job saves it in
    its own folder, named by the job's UUID), and its runs in tracking; None when the viewer may not
    see the job or the checkpoint is no job's."""
    if not job_visible(user=user, result=result) or result.job is None:
        return None
    match = _UUID.search(str((result.job.parameters or {}).get("checkpoint") or ""))
    if match is None:
        return None
    training = Job.objects.filter(uuid=uuid.UUID(match.group(0)), user_id=result.user_id).first()
    if training is None:
        return None
    # Through the jobs' runs (portal.tracking's Run.job): tracking sits above benchmarks.
    runs = list(training.runs.values_list("run_id", flat=True))
    own = list(result.job.runs.values_list("run_id", flat=True))
    return {"job": training, "runs": runs, "own_runs": own}
