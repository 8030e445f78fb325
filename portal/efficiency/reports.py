"""Efficiency reports for /usage/efficiency/, its CSV and the API: per user or directory group over a
period, the CPU-, memory- and GPU-hours the ended jobs and sessions were allocated against what they
used, and what was wasted. From the efficiency records only (one per ended job or session).

- Period: records whose job or session ended in [since, until); by default the last 4 weeks.
- CPU-hours: allocated CPUs x elapsed; used: TotalCPU.
- Memory GB-hours (GB of 1024 MB, Slurm's units): requested x elapsed; used: peak RSS x elapsed, an
  upper bound (a job holds its peak only for a moment).
- GPU-hours: GPUs x elapsed; used: x the mean utilisation of every GPU sample / 100.
- Wasted: allocated - used, over the records whose figure is known only; `*_unknown` counts the
  others (Slurm or the sampler gave no figure), which are never counted as waste.

One aggregate query per report, GROUP BY user twice in a UNION ALL: the period's whole UTC days from
the per-day sums (EfficiencyDay, one row per user and day, kept by the database's triggers), the
partial days at its ends from the records; the same sums, so the same figures. Groups are rolled
up from the users' directory groups in Python (a user counts in each of their groups; few users,
many records). Reports are cached until the next record is written (records are only ever
inserted, so the newest id tells), at most CACHE_SECONDS.
"""

import csv
import hashlib
import io
from collections import defaultdict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, TypeVar

from django.core.cache import cache
from django.db.models import Count, F, FloatField, Max, Q, QuerySet, Sum, Value, Window
from django.db.models.functions import Cast, Coalesce, RowNumber
from django.utils import timezone
from redis.exceptions import RedisError

from portal.accounts.models import User
from portal.core.csv_cells import csv_cell
from portal.core.periods import period_bounds
from portal.efficiency.models import Efficiency, EfficiencyDay

DEFAULT_SPAN = timedelta(weeks=4)
WASTEFUL_SPAN = timedelta(days=7)  # "this week": the last 7 days, never a near-empty Monday
WASTEFUL_USERS = 10
WORST_PER_USER = 3
SECONDS_PER_HOUR = 3600
MB_PER_GB = 1024
CACHE_SECONDS = 600  # a record deleted with its job or user stays in a cached report this long at most
KINDS = ("cpu", "memory", "gpu")
# Per kind: allocated (every record whose allocation is known), allocated_known and used (the
# records whose use is known too), wasted, unknown.
COLUMNS = ("group_by", "name", "jobs", "sessions", *(
    f"{kind}_{figure}" for kind in KINDS for figure in ("allocated", "used", "wasted", "unknown")))

_SECONDS = Cast("elapsed_seconds", FloatField())  # float before multiplying: int4 x int4 overflows
_CPU = Cast("cpus", FloatField()) * _SECONDS
_MEM = F("mem_requested_mb") * _SECONDS
_MEM_PEAK = F("mem_peak_mb") * _SECONDS
_GPU = Cast("gpus", FloatField()) * _SECONDS
_CPU_KNOWN = Q(cpu_seconds__isnull=False)
_MEM_KNOWN = Q(mem_requested_mb__isnull=False, mem_peak_mb__isnull=False)
_GPU_KNOWN = Q(gpus__gt=0, gpu_util_percent__isnull=False)
# In seconds (x MB for memory); hours once divided in Python.
_SUMS = {
    "jobs": Count("id", filter=Q(job__isnull=False)),
    "sessions": Count("id", filter=Q(session__isnull=False)),
    "cpu_allocated": Sum(_CPU),
    "cpu_allocated_known": Sum(_CPU, filter=_CPU_KNOWN),
    "cpu_used": Sum("cpu_seconds"),
    "cpu_unknown": Count("id", filter=~_CPU_KNOWN),
    "memory_allocated": Sum(_MEM),
    "memory_allocated_known": Sum(_MEM, filter=_MEM_KNOWN),
    "memory_used": Sum(_MEM_PEAK, filter=_MEM_KNOWN),
    "memory_unknown": Count("id", filter=~_MEM_KNOWN),
    "gpu_allocated": Sum(_GPU),
    "gpu_allocated_known": Sum(_GPU, filter=_GPU_KNOWN),
    "gpu_used": Sum(_GPU * F("gpu_util_percent") / 100, filter=_GPU_KNOWN),
    "gpu_unknown": Count("id", filter=Q(gpus__gt=0, gpu_util_percent__isnull=True)),
}
_HOURS = {"cpu": SECONDS_PER_HOUR, "memory": SECONDS_PER_HOUR * MB_PER_GB, "gpu": SECONDS_PER_HOUR}


@dataclass(frozen=True)
class ReportQuery:
    group_by: str = "user"  # or "group"
    since: datetime | None = None
    until: datetime | None = None
    username: str | None = None  # admins: one user


T = TypeVar("T")


def _minute_up(moment: datetime) -> datetime:
    """The next whole minute (`moment` itself if whole): "up to now" that stays the same for a minute."""
    whole = moment.replace(second=0, microsecond=0)
    return whole if whole == moment else whole + timedelta(minutes=1)


def _cached(parts: tuple, compute: Callable[[], T]) -> T:
    """`compute()`, cached until a record is written. Without the cache (Redis restarting) it is
    computed: a page never fails for the cache."""
    latest = Efficiency.objects.aggregate(latest=Max("id"))["latest"] or 0
    key = "efficiency:report:" + hashlib.sha256(repr((latest, *parts)).encode()).hexdigest()
    with suppress(RedisError):
        if (found := cache.get(key)) is not None:
            return found
    found = compute()
    with suppress(RedisError):
        cache.set(key, found, CACHE_SECONDS)
    return found


def report_range(query: ReportQuery, *, now: datetime | None = None) -> tuple[datetime, datetime]:
    """[since, until): by default the 4 weeks up to now (the next whole minute)."""
    return period_bounds(query.since, query.until or _minute_up(now or timezone.now()), span=DEFAULT_SPAN)


M = TypeVar("M", Efficiency, EfficiencyDay)


def _visible(rows: QuerySet[M], user: User, username: str | None) -> QuerySet[M]:
    """Users see their own records; admins everybody's, or one user's with `username`."""
    if not user.is_staff:
        return rows.filter(user=user)
    return rows.filter(user__username=username) if username else rows


def _day_start(day: date) -> datetime:
    return datetime.combine(day, time(), tzinfo=UTC)


def _per_user(visible: Callable[[QuerySet], QuerySet], since: datetime,
              until: datetime) -> dict[int, dict[str, Any]]:
    """The _SUMS of each user's records that ended in [since, until): its whole UTC days from
    EfficiencyDay, the partial days at its ends from the records; one query."""
    first = since.astimezone(UTC).date()
    if _day_start(first) < since:
        first += timedelta(days=1)
    last = until.astimezone(UTC).date()  # whole days: [first, last)
    if first < last:
        edges = Q(ended_at__gte=since, ended_at__lt=_day_start(first)) | Q(
            ended_at__gte=_day_start(last), ended_at__lt=until)
        parts = [visible(EfficiencyDay.objects.filter(day__gte=first, day__lt=last)).values("user_id")
                 .annotate(**{key: Sum(key) for key in _SUMS}).order_by()]
    else:
        edges, parts = Q(ended_at__gte=since, ended_at__lt=until), []
    rows = visible(Efficiency.objects.filter(edges)).values("user_id").annotate(**_SUMS).order_by()
    per_user: dict[int, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(_SUMS, 0))
    for row in rows.union(*parts, all=True):
        sums = per_user[row.pop("user_id")]
        for key, value in row.items():
            sums[key] += value or 0
    return per_user


def _figures(sums: dict[str, Any]) -> dict[str, Any]:
    """A row's hours from the SQL sums (seconds, MB-seconds): allocated, used, wasted, unknown."""
    row: dict[str, Any] = {"jobs": sums["jobs"], "sessions": sums["sessions"]}
    for kind in KINDS:
        per_hour = _HOURS[kind]
        used = (sums[f"{kind}_used"] or 0.0) / per_hour
        row[f"{kind}_allocated"] = round((sums[f"{kind}_allocated"] or 0.0) / per_hour, 3)
        row[f"{kind}_used"] = round(used, 3)
        row[f"{kind}_wasted"] = round((sums[f"{kind}_allocated_known"] or 0.0) / per_hour - used, 3)
        row[f"{kind}_unknown"] = sums[f"{kind}_unknown"]
    return row


def efficiency_report(*, user: User, query: ReportQuery, now: datetime | None = None) -> list[dict[str, Any]]:
    """One row per user (or directory group: a user counts in each of their groups), by name, over
    the records that ended in the period."""
    since, until = report_range(query, now=now)
    scope = ("all", query.username or "") if user.is_staff else ("user", user.pk)
    return _cached(("rows", *scope, query.group_by, since, until),
                   lambda: _report_rows(user, query, since, until))


def _report_rows(user: User, query: ReportQuery, since: datetime, until: datetime) -> list[dict[str, Any]]:
    per_user = _per_user(lambda rows: _visible(rows, user, query.username), since, until)
    totals: dict[str, dict[str, Any]] = defaultdict(lambda: dict.fromkeys(_SUMS, 0))
    for owner in User.objects.filter(pk__in=per_user).only("username", "ldap_groups"):
        names = [owner.username] if query.group_by == "user" else (owner.ldap_groups or ["(no group)"])
        for name in names:
            for key, value in per_user[owner.pk].items():
                totals[name][key] += value or 0
    return [{"group_by": query.group_by, "name": name, **_figures(sums)}
            for name, sums in sorted(totals.items())]


def efficiency_csv(rows: list[dict[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(COLUMNS)
    writer.writerows([csv_cell(row[key]) for key in COLUMNS] for row in rows)
    return out.getvalue()


@dataclass(frozen=True)
class WastedRun:
    """One ended job or session of a wasteful user, its waste in hours."""

    job_id: int | None
    session_name: str | None
    name: str
    ended_at: datetime
    gpu_wasted: float
    cpu_wasted: float


@dataclass(frozen=True)
class WastefulUser:
    username: str
    gpu_wasted: float
    cpu_wasted: float
    worst: list[WastedRun]


# Per record, in hours; 0 where the use is unknown (never counted as waste).
_GPU_WASTED = Coalesce(_GPU * (1 - F("gpu_util_percent") / 100), Value(0.0)) / SECONDS_PER_HOUR
_CPU_WASTED = Coalesce(_CPU - F("cpu_seconds"), Value(0.0)) / SECONDS_PER_HOUR


def wasteful_until(now: datetime | None = None) -> datetime:
    """The end of the wasteful list's 7 days: now, to the next whole minute."""
    return _minute_up(now or timezone.now())


def wasteful_users(*, now: datetime | None = None) -> list[WastefulUser]:
    """For admins: the users who wasted most in the 7 days up to wasteful_until(now) (GPU-hours
    first, then CPU-hours), each with their worst jobs or sessions. Four queries, whatever the
    number of records (one once cached)."""
    until = wasteful_until(now)
    return _cached(("wasteful", until), lambda: _wasteful(until))


def _wasteful(until: datetime) -> list[WastefulUser]:
    since = until - WASTEFUL_SPAN
    # A user's waste: what was allocated where the use is known, less the use (the records' sum).
    wasted = {owner: ((sums["gpu_allocated_known"] - sums["gpu_used"]) / SECONDS_PER_HOUR,
                      (sums["cpu_allocated_known"] - sums["cpu_used"]) / SECONDS_PER_HOUR)
              for owner, sums in _per_user(lambda rows: rows, since, until).items()}
    wasted = {owner: waste for owner, waste in wasted.items() if waste[0] > 0 or waste[1] > 0}
    names = dict(User.objects.filter(pk__in=wasted).values_list("pk", "username"))
    top = sorted(wasted, key=lambda owner: (-wasted[owner][0], -wasted[owner][1], names[owner]))[
        :WASTEFUL_USERS]
    worst: dict[int, list[WastedRun]] = defaultdict(list)
    # Ranked without the jobs' and sessions' names: those are joined for the winners only, by id (the
    # LIMIT, never reached, tells the planner how few they are).
    week = Efficiency.objects.filter(ended_at__gte=since, ended_at__lt=until, user_id__in=top)
    best = week.annotate(rank=Window(RowNumber(), partition_by=F("user_id"), order_by=[
        _GPU_WASTED.desc(), _CPU_WASTED.desc(), F("id").desc()])).filter(rank__lte=WORST_PER_USER)
    ranked = (
        Efficiency.objects.filter(id__in=best.values("id")[:WASTEFUL_USERS * WORST_PER_USER])
        .annotate(gpu_wasted=_GPU_WASTED, cpu_wasted=_CPU_WASTED)
        .values("user_id", "job_id", "job__name", "session__name", "ended_at", "gpu_wasted", "cpu_wasted")
        .order_by("user_id", "-gpu_wasted", "-cpu_wasted", "-id")
    )
    for run in ranked:
        worst[run["user_id"]].append(WastedRun(
            job_id=run["job_id"], session_name=run["session__name"],
            name=run["job__name"] if run["job_id"] else run["session__name"], ended_at=run["ended_at"],
            gpu_wasted=round(run["gpu_wasted"], 3), cpu_wasted=round(run["cpu_wasted"], 3)))
    return [WastefulUser(username=names[owner], gpu_wasted=round(wasted[owner][0], 3),
                         cpu_wasted=round(wasted[owner][1], 3), worst=worst[owner]) for owner in top]
