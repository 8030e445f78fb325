"""A job's live training curves: what its runs logged to the tracking API (the MLflow client in the
job, with the job's own token) as it trains, drawn on the job's page. From the database only."""

import math
from collections import defaultdict
from dataclasses import dataclass, field

from portal.jobs.models import Job
from portal.tracking.models import LifecycleStage, Metric, Run

# Points drawn per page: the newest of a long run's history (a chart, not an export: get-history has all).
CURVE_POINTS_MAX = 20000


@dataclass
class Curve:
    """One key of one run, in the shape the job's metrics chart draws (portal.jobs.selectors)."""

    run: str
    tag: str
    steps: list[int] = field(default_factory=list)
    values: list[float | None] = field(default_factory=list)


def job_curves(*, job: Job) -> list[Curve]:
    """The job's live runs' metric histories (runs_curves)."""
    live = Run.objects.filter(job=job, lifecycle_stage=LifecycleStage.ACTIVE).only("pk", "run_name", "run_id")
    return runs_curves(runs={run.pk: run.run_name or run.run_id[:8] for run in live})


def runs_curves(*, runs: dict[int, str]) -> list[Curve]:
    """The metric histories of these runs (primary key -> the label their lines get), by run and key,
    in step order; NaN and ±max (MLflow's infinities) as gaps."""
    if not runs:
        return []
    newest = (Metric.objects.filter(run_id__in=runs).order_by("-timestamp", "-id")
              .values_list("run_id", "key", "step", "value")[:CURVE_POINTS_MAX])
    curves: dict[tuple[int, str], Curve] = defaultdict(lambda: Curve(run="", tag=""))
    for run_id, key, step, value in sorted(newest, key=lambda row: (row[0], row[1], row[2])):
        curve = curves[(run_id, key)]
        curve.run, curve.tag = runs[run_id], key
        curve.steps.append(step)
        curve.values.append(value if math.isfinite(value) and abs(value) < 1e308 else None)
    return sorted(curves.values(), key=lambda curve: (curve.run, curve.tag))
