"""Queue wait and start latency per partition and day (median, p95), sessions and jobs, for admins.

Sessions: queue wait = Slurm started its job - submitted; start latency = JupyterLab ready - submitted.
Jobs: queue wait = Slurm started it - Slurm accepted it; start latency = started - submitted.
"""

from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from portal.core.csv_cells import csv_cell
from portal.jobs.models import Job
from portal.sessions.models import Session

LATENCY_CSV_COLUMNS = ["day", "kind", "partition", "count", "queue_wait_median_s", "queue_wait_p95_s",
                       "start_latency_median_s", "start_latency_p95_s"]


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile (p50 of [1, 2] is 1): no interpolation between two waits."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))  # ceil
    return ordered[int(rank) - 1]


@dataclass(frozen=True)
class LatencyRow:
    day: date
    kind: str  # session or job
    partition: str
    count: int
    queue_wait_median: float | None
    queue_wait_p95: float | None
    start_latency_median: float | None
    start_latency_p95: float | None

    def csv(self) -> list[str]:
        return [csv_cell(v) for v in (self.day, self.kind, self.partition, self.count, self.queue_wait_median,
                                      self.queue_wait_p95, self.start_latency_median, self.start_latency_p95)]


def latency_by_day(*, since: datetime) -> list[LatencyRow]:
    """Queue wait and start latency per partition and day of submission, newest day first."""
    samples: dict[tuple[date, str, str], tuple[list[float], list[float]]] = defaultdict(lambda: ([], []))
    sessions = Session.objects.filter(created_at__gte=since).values_list(
        "created_at", "partition", "started_at", "ready_at")
    for submitted, partition, started, ready in sessions.iterator():
        waits, latencies = samples[(submitted.date(), "session", partition)]
        if started:
            waits.append((started - submitted).total_seconds())
        if ready:
            latencies.append((ready - submitted).total_seconds())
    jobs = Job.objects.filter(submitted_at__gte=since, started_at__isnull=False).values_list(
        "submitted_at", "partition", "slurm_submitted_at", "started_at")
    for submitted, partition, accepted, started in jobs.iterator():
        waits, latencies = samples[(submitted.date(), "job", partition)]
        waits.append((started - (accepted or submitted)).total_seconds())
        latencies.append((started - submitted).total_seconds())
    rows = [LatencyRow(day=day, kind=kind, partition=partition, count=max(len(waits), len(latencies)),
                       queue_wait_median=percentile(waits, 0.5), queue_wait_p95=percentile(waits, 0.95),
                       start_latency_median=percentile(latencies, 0.5),
                       start_latency_p95=percentile(latencies, 0.95))
            for (day, kind, partition), (waits, latencies) in samples.items()]
    return sorted(rows, key=lambda row: (-row.day.toordinal(), row.kind, row.partition))


def latency_chart(rows: list[LatencyRow]) -> dict[str, Any] | None:
    """Median start latency per day and partition (Vega-Lite), sessions and jobs side by side."""
    values = [{"day": row.day.isoformat(), "kind": row.kind, "partition": row.partition,
               "start latency median (s)": row.start_latency_median,
               "queue wait median (s)": row.queue_wait_median}
              for row in rows if row.start_latency_median is not None]
    if not values:
        return None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": values}, "width": "container", "height": 200,  # fits a phone
        "mark": {"type": "line", "point": True},
        "encoding": {
            "x": {"field": "day", "type": "temporal", "title": "day"},
            "y": {"field": "start latency median (s)", "type": "quantitative"},
            "color": {"field": "partition", "type": "nominal"},
            "strokeDash": {"field": "kind", "type": "nominal"},
            "tooltip": [{"field": "day"}, {"field": "kind"}, {"field": "partition"},
                        {"field": "start latency median (s)"}, {"field": "queue wait median (s)"}],
        },
    }
