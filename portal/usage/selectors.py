"""Usage: jobs, GPU-hours, success rate and time in queue per user or group, by week or month.

One aggregate query over the jobs table per call (GROUP BY period and user); groups are rolled up
from the users' directory groups in Python (few users, many jobs). Users see their own usage, admins
everybody's.
"""

import csv
import io
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Count, DurationField, ExpressionWrapper, F, Q, Sum
from django.db.models.functions import TruncMonth, TruncWeek
from django.utils import timezone

from portal.accounts.models import User
from portal.core.periods import period_bounds
from portal.jobs.models import TERMINAL_STATES, Job, JobState

COLUMNS = (
    "period",
    "period_start",
    "group_by",
    "name",
    "jobs",
    "ended",
    "completed",
    "success_rate",
    "gpu_hours",
    "avg_queue_minutes",
)


@dataclass(frozen=True)
class UsageQuery:
    period: str = "week"  # or "month"
    group_by: str = "user"  # or "group"
    since: datetime | None = None
    until: datetime | None = None
    username: str | None = None  # admins: one user


def usage_range(query: UsageQuery) -> tuple[datetime, datetime]:
    """[since, until): by default the last 12 weeks (by week) or year (by month)."""
    span = timedelta(weeks=12) if query.period == "week" else timedelta(days=366)
    return period_bounds(query.since, query.until or timezone.now(), span=span)


def usage_rows(*, user: User, query: UsageQuery) -> list[dict[str, Any]]:
    since, until = usage_range(query)
    jobs = Job.objects.filter(submitted_at__gte=since, submitted_at__lt=until)
    if not user.is_staff:
        jobs = jobs.filter(user=user)
    elif query.username:
        jobs = jobs.filter(user__username=query.username)
    trunc = TruncWeek if query.period == "week" else TruncMonth
    queued = ExpressionWrapper(F("started_at") - F("submitted_at"), output_field=DurationField())
    aggregated = (
        jobs.annotate(bucket=trunc("submitted_at"))
        .values("bucket", "user_id")
        .annotate(
            jobs=Count("id"),
            ended=Count("id", filter=Q(state__in=TERMINAL_STATES)),
            completed=Count("id", filter=Q(state=JobState.COMPLETED)),
            gpu_hours=Sum("gpu_hours"),
            started=Count("started_at"),
            queue=Sum(queued, filter=Q(started_at__isnull=False)),
        )
        .order_by()
    )
    users = {}
    totals: dict[tuple[datetime, str], dict[str, Any]] = defaultdict(
        lambda: {"jobs": 0, "ended": 0, "completed": 0, "gpu_hours": 0.0, "started": 0, "queue": timedelta()}
    )
    rows = list(aggregated)
    if rows:
        users = {
            u.pk: u
            for u in User.objects.filter(pk__in={r["user_id"] for r in rows}).only("username", "ldap_groups")
        }
    for row in rows:
        owner = users[row["user_id"]]
        names = [owner.username] if query.group_by == "user" else (owner.ldap_groups or ["(no group)"])
        for name in names:
            total = totals[(row["bucket"], name)]
            for key in ("jobs", "ended", "completed", "started"):
                total[key] += row[key]
            total["gpu_hours"] += row["gpu_hours"] or 0.0
            total["queue"] += row["queue"] or timedelta()
    result = []
    for (bucket, name), total in sorted(totals.items(), key=lambda item: (item[0][0], item[0][1])):
        result.append(
            {
                "period": query.period,
                "period_start": bucket.date().isoformat(),
                "group_by": query.group_by,
                "name": name,
                "jobs": total["jobs"],
                "ended": total["ended"],
                "completed": total["completed"],
                "success_rate": round(total["completed"] / total["ended"], 3) if total["ended"] else None,
                "gpu_hours": round(total["gpu_hours"], 3),
                "avg_queue_minutes": round(total["queue"].total_seconds() / 60 / total["started"], 2)
                if total["started"]
                else None,
            }
        )
    return result


def usage_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in COLUMNS})
    return out.getvalue()


def _cell(value: Any) -> Any:
    """Spreadsheets run cells starting with = + - @ as formulas: user and group names are user data."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def usage_chart(rows: list[dict[str, Any]]) -> dict[str, Any]:
    layers = [
        {
            "mark": "bar",
            "encoding": {
                "x": {
                    "field": "period_start",
                    "type": "ordinal",
                    "title": rows[0]["period"] if rows else "period",
                },
                "y": {"field": "gpu_hours", "type": "quantitative", "title": "GPU-hours"},
                "color": {"field": "name", "type": "nominal", "title": None},
                "tooltip": [{"field": f} for f in COLUMNS],
            },
        }
    ]
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": "GPU-hours",
        "width": "container",
        "height": 260,
        "data": {"values": rows},
        "layer": layers,
    }
