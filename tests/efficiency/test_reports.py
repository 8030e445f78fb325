"""The efficiency reports (portal.efficiency.reports): the arithmetic with unknown figures, per user
and per group, who sees what, the period's bounds, the per-day sums giving the records' figures, the
CSV, the admins' most wasteful users, the page and the API."""

import csv
import importlib
import io
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import Sum
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.accounts.services import api_token_create
from portal.core.errors import InvalidInput
from portal.efficiency.models import Efficiency, EfficiencyDay
from portal.efficiency.reports import (
    _CPU_WASTED,
    _GPU_WASTED,
    _SUMS,
    COLUMNS,
    ReportQuery,
    _figures,
    efficiency_csv,
    efficiency_report,
    report_range,
    wasteful_users,
)
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db

HOUR = 3600
GIB = 1024
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _record(user, *, ended_at=None, session=False, **figures) -> Efficiency:
    """An ended job's record (a session's with `session`): 4 CPUs, 8 GiB, 2 GPUs for an hour, half used."""
    owner = {"session": SessionFactory(user=user)} if session else {"job": JobFactory(user=user)}
    values = {"partition": "gpu", "cpus": 4, "mem_requested_mb": 8 * GIB, "gpus": 2, "elapsed_seconds": HOUR,
              "cpu_seconds": 2 * HOUR, "mem_peak_mb": 4 * GIB, "gpu_util_percent": 50.0, **figures}
    return Efficiency.objects.create(user=user, ended_at=ended_at or NOW - timedelta(days=1),
                                     recorded_at=NOW, **owner, **values)


def _report(user, **query) -> list[dict]:
    return efficiency_report(user=user, query=ReportQuery(**query), now=NOW)


@pytest.fixture
def ada(db):
    return UserFactory(username="ada", is_staff=True, ldap_groups=["admins"])


def test_allocated_used_and_wasted_hours(user):
    _record(user)
    _record(user, session=True, cpus=2, elapsed_seconds=2 * HOUR, cpu_seconds=HOUR, gpus=1,
            gpu_util_percent=25.0, mem_requested_mb=2 * GIB, mem_peak_mb=GIB)
    [row] = _report(user)
    assert (row["name"], row["jobs"], row["sessions"]) == ("alice", 1, 1)
    assert (row["cpu_allocated"], row["cpu_used"], row["cpu_wasted"], row["cpu_unknown"]) == (8, 3, 5, 0)
    # GB-hours: 8 GB x 1 h + 2 GB x 2 h requested, 4 GB x 1 h + 1 GB x 2 h at their peaks.
    assert (row["memory_allocated"], row["memory_used"], row["memory_wasted"]) == (12, 6, 6)
    # GPU-hours: 2 x 1 h at 50 % + 1 x 2 h at 25 %.
    assert (row["gpu_allocated"], row["gpu_used"], row["gpu_wasted"], row["gpu_unknown"]) == (4, 1.5, 2.5, 0)


def test_unknown_figures_count_as_allocated_but_never_as_waste(user):
    _record(user)
    _record(user, cpu_seconds=None, mem_peak_mb=None, gpu_util_percent=None)
    _record(user, mem_requested_mb=None, gpus=0, gpu_util_percent=None)  # no GPUs: not an unknown
    [row] = _report(user)
    assert (row["cpu_allocated"], row["cpu_used"], row["cpu_wasted"], row["cpu_unknown"]) == (12, 4, 4, 1)
    # Memory is known where both the request and the peak are: the third's peak is left out of used too.
    assert (row["memory_allocated"], row["memory_used"], row["memory_wasted"], row["memory_unknown"]) == (
        16, 4, 4, 2)
    assert (row["gpu_allocated"], row["gpu_used"], row["gpu_wasted"], row["gpu_unknown"]) == (4, 1, 1, 1)


def test_nothing_known_is_zero_waste_not_an_error(user):
    _record(user, cpu_seconds=None, mem_requested_mb=None, mem_peak_mb=None, gpu_util_percent=None)
    [row] = _report(user)
    assert (row["cpu_wasted"], row["memory_allocated"], row["memory_wasted"], row["gpu_wasted"]) == (
        0, 0, 0, 0)
    assert (row["cpu_unknown"], row["memory_unknown"], row["gpu_unknown"]) == (1, 1, 1)


def test_large_allocations_do_not_overflow(user):
    _record(user, cpus=4096, elapsed_seconds=30 * 24 * HOUR, gpus=512, cpu_seconds=0.0)
    [row] = _report(user, since=NOW - timedelta(days=40))
    assert row["cpu_allocated"] == 4096 * 30 * 24 and row["gpu_allocated"] == 512 * 30 * 24


def test_by_group_a_user_counts_in_each_of_their_groups(user, ada):
    user.ldap_groups = ["ml", "vision"]
    user.save()
    bob = UserFactory(username="bob", ldap_groups=["ml"])
    nobody = UserFactory(username="nobody", ldap_groups=[])
    for owner in (user, bob, nobody):
        _record(owner)
    rows = {row["name"]: row for row in _report(ada, group_by="group")}
    assert sorted(rows) == ["(no group)", "ml", "vision"]
    assert (rows["ml"]["jobs"], rows["ml"]["cpu_allocated"], rows["ml"]["gpu_wasted"]) == (2, 8, 2)
    assert (rows["vision"]["jobs"], rows["(no group)"]["jobs"]) == (1, 1)
    assert {row["group_by"] for row in rows.values()} == {"group"}


def test_a_user_sees_their_own_rows_only(user, ada):
    bob = UserFactory(username="bob")
    _record(user)
    _record(bob)
    assert [row["name"] for row in _report(user)] == ["alice"]
    assert [row["name"] for row in _report(user, username="bob")] == ["alice"]  # `user` is for admins
    assert [row["jobs"] for row in _report(user, group_by="group")] == [1]  # alice's share of her group


def test_an_admin_sees_everybody_or_one_user(user, ada):
    _record(user)
    _record(UserFactory(username="bob"))
    assert [row["name"] for row in _report(ada)] == ["alice", "bob"]
    assert [row["name"] for row in _report(ada, username="bob")] == ["bob"]
    assert _report(ada, username="nobody-here") == []


def test_the_period_is_the_last_4_weeks_by_default_and_until_is_excluded(user):
    assert report_range(ReportQuery(), now=NOW) == (NOW - timedelta(weeks=4), NOW)
    _record(user, ended_at=NOW - timedelta(weeks=4))  # in: since is included
    _record(user, ended_at=NOW - timedelta(weeks=4, seconds=1))  # out
    _record(user, ended_at=NOW)  # out: until is excluded
    assert _report(user)[0]["jobs"] == 1
    assert _report(user, since=NOW - timedelta(weeks=5), until=NOW + timedelta(seconds=1))[0]["jobs"] == 3


@pytest.mark.parametrize(("query", "field"), [
    ({"since": NOW, "until": NOW}, "since"),
    ({"since": NOW - timedelta(days=4 * 366)}, "since"),
    ({"until": datetime(1, 1, 1, tzinfo=UTC)}, "until"),
])
def test_a_period_refused_names_its_field(query, field):
    with pytest.raises(InvalidInput) as refused:
        report_range(ReportQuery(**query), now=NOW)
    assert field in refused.value.fields


def test_one_query_for_the_records_whatever_their_number(user, ada):
    for _ in range(5):
        _record(user)
        _record(UserFactory())
    with CaptureQueriesContext(connection) as queries:
        _report(ada, group_by="group")
    # The newest record (the cache's key), the days' and the edges' GROUP BY user, the users' groups.
    assert len(queries) == 3


def test_a_report_is_cached_until_a_record_is_written(user):
    _record(user)
    assert _report(user)[0]["jobs"] == 1
    with CaptureQueriesContext(connection) as queries:
        assert _report(user)[0]["jobs"] == 1
    assert len(queries) == 1  # the newest record's id only
    _record(user)
    assert _report(user)[0]["jobs"] == 2
    assert report_range(ReportQuery(), now=NOW + timedelta(seconds=1))[1] == NOW + timedelta(minutes=1)


def test_csv_cells_are_never_formulas(user):
    evil = UserFactory(username="=cmd", ldap_groups=["@group", "+sum"])
    _record(evil)
    rows = efficiency_report(user=UserFactory(username="root", is_staff=True),
                             query=ReportQuery(group_by="group"), now=NOW)
    table = list(csv.reader(io.StringIO(efficiency_csv(rows))))
    assert table[0] == list(COLUMNS)
    assert [line[1] for line in table[1:]] == ["'+sum", "'@group"]
    assert table[1][COLUMNS.index("gpu_wasted")] == "1.0"


def test_the_most_wasteful_users_of_the_week_with_their_worst_runs(user, ada):
    bob, carol = UserFactory(username="bob"), UserFactory(username="carol")
    for util in (90.0, 0.0, 50.0, 10.0):  # alice's worst: 0 %, 10 %, 50 %
        _record(user, gpu_util_percent=util, ended_at=NOW - timedelta(hours=1))
    idle = _record(bob, session=True, gpus=8, gpu_util_percent=0.0, ended_at=NOW - timedelta(hours=2))
    # Before the last 7 days: not counted.
    _record(bob, gpus=0, gpu_util_percent=None, cpu_seconds=0.0, ended_at=NOW - timedelta(days=8))
    _record(carol, gpus=0, gpu_util_percent=None, cpu_seconds=0.0, ended_at=NOW - timedelta(days=1))
    _record(UserFactory(username="dave"), gpus=0, gpu_util_percent=None, cpu_seconds=4 * HOUR)  # no waste
    found = wasteful_users(now=NOW)
    assert [(w.username, w.gpu_wasted, w.cpu_wasted) for w in found] == [
        ("bob", 8, 2), ("alice", 5, 8), ("carol", 0, 4)]
    assert [run.session_name for run in found[0].worst] == [idle.session.name]
    assert [run.gpu_wasted for run in found[1].worst] == [2, 1.8, 1]
    assert all(run.job_id and run.name for run in found[1].worst)


def test_the_wasteful_list_is_ten_users_in_four_queries(ada):
    for number in range(12):
        owner = UserFactory(username=f"u{number}")
        for _ in range(4):
            _record(owner, gpu_util_percent=float(number), ended_at=NOW - timedelta(hours=1))
    with CaptureQueriesContext(connection) as queries:
        found = wasteful_users(now=NOW)
    assert len(queries) == 4  # the newest record (the cache's key), the sums, their names, the worst runs
    assert [w.username for w in found] == [f"u{number}" for number in range(10)]
    assert all(len(w.worst) == 3 for w in found)


# The per-day sums


def _raw_report(since: datetime, until: datetime, group_by: str) -> list[dict]:
    """The report as it was before the per-day sums: one GROUP BY user over the period's records."""
    totals: dict[str, dict] = defaultdict(lambda: dict.fromkeys(_SUMS, 0))
    for row in (Efficiency.objects.filter(ended_at__gte=since, ended_at__lt=until)
                .values("user__username", "user__ldap_groups").annotate(**_SUMS).order_by()):
        username, groups = row.pop("user__username"), row.pop("user__ldap_groups")
        names = [username] if group_by == "user" else groups or ["(no group)"]
        for name in names:
            for key, value in row.items():
                totals[name][key] += value or 0
    return [{"group_by": group_by, "name": name, **_figures(sums)} for name, sums in sorted(totals.items())]


def _random_records(draw: random.Random) -> None:
    """Three users' jobs and sessions over 5 days around midnights, any figure unknown now and then.
    Few: more would make autovacuum analyze the table mid-run, and other tests' plans change."""
    owners = [UserFactory(username=name, ldap_groups=groups)
              for name, groups in (("u0", ["ml"]), ("u1", ["ml", "bio"]), ("u2", []))]

    def maybe(value: float) -> float | None:
        return None if draw.random() < 0.2 else value

    for _ in range(40):
        _record(draw.choice(owners), session=draw.random() < 0.3,
                ended_at=NOW - timedelta(seconds=draw.randrange(5 * 24 * HOUR)), cpus=draw.choice([1, 4, 16]),
                elapsed_seconds=draw.randrange(60, 10 * HOUR), gpus=draw.choice([0, 1, 2, 4]),
                cpu_seconds=maybe(draw.uniform(0, 5 * HOUR)), gpu_util_percent=maybe(draw.uniform(0, 100)),
                mem_requested_mb=maybe(draw.uniform(1, 64) * GIB),
                mem_peak_mb=maybe(draw.uniform(0, 64) * GIB))


def _periods(draw: random.Random) -> list[tuple[datetime, datetime]]:
    midnight = NOW.replace(hour=0)
    return [
        (NOW - timedelta(weeks=4), NOW),  # whole days, and a partial day at the end
        (midnight - timedelta(days=3), midnight),  # whole days only
        (midnight - timedelta(days=1, hours=5), midnight - timedelta(days=1, hours=2)),  # within one day
        (midnight - timedelta(hours=1), midnight + timedelta(hours=1)),  # two partial days, no whole one
        (midnight - timedelta(days=2, seconds=1), midnight + timedelta(seconds=1)),  # a second each side
        *((NOW - timedelta(seconds=draw.randrange(6 * 24 * HOUR)),
           NOW - timedelta(seconds=draw.randrange(HOUR))) for _ in range(10)),
    ]


def test_the_per_day_sums_give_the_records_figures(ada):
    draw = random.Random(35)
    _random_records(draw)
    for since, until in _periods(draw):
        for group_by in ("user", "group"):
            assert _report(ada, group_by=group_by, since=since, until=until) == _raw_report(
                since, until, group_by), (since, until, group_by)
    # The wasteful list: the week's records' waste, the week with partial days at both ends.
    until = NOW - timedelta(hours=7)
    raw = {row["user__username"]: (round(row["gpu"], 3), round(row["cpu"], 3)) for row in (
        Efficiency.objects.filter(ended_at__gte=until - timedelta(days=7), ended_at__lt=until)
        .values("user__username").annotate(gpu=Sum(_GPU_WASTED), cpu=Sum(_CPU_WASTED)).order_by())}
    found = wasteful_users(now=until)
    assert {w.username: (w.gpu_wasted, w.cpu_wasted) for w in found} == raw
    assert [w.username for w in found] == sorted(raw, key=lambda name: (-raw[name][0], -raw[name][1]))
    # Migration 0002's fill gives the same sums as the triggers.
    kept = list(EfficiencyDay.objects.order_by("user", "day").values())
    EfficiencyDay.objects.all().delete()
    migration = importlib.import_module("portal.efficiency.migrations.0002_efficiency_day")
    with connection.cursor() as cursor:
        cursor.execute(migration._add("efficiency_efficiency"))
    filled = list(EfficiencyDay.objects.order_by("user", "day").values())
    assert [{**day, "id": 0} for day in filled] == [{**day, "id": 0} for day in kept]


# The page and its CSV


def test_the_page_shows_the_report_and_admins_the_wasteful_list(client, user, ada):
    job = _record(user, ended_at=timezone.now() - timedelta(hours=1)).job
    client.force_login(user)
    page = client.get("/usage/efficiency/").content.decode()
    assert 'data-name="alice"' in page and "the last 4 weeks" in page and 'id="wasteful"' not in page
    client.force_login(ada)
    page = client.get("/usage/efficiency/?group_by=group").content.decode()
    assert 'data-name="portal-users"' in page and 'data-user="alice"' in page
    assert f'href="/jobs/{job.pk}/"' in page


def test_the_page_names_a_refused_period_and_ignores_malformed_days(client, user):
    client.force_login(user)
    response = client.get("/usage/efficiency/?since=2026-05-02&until=2026-05-01")
    assert response.status_code == 400 and "Must be before" in response.content.decode()
    assert client.get("/usage/efficiency/?since=nope&until=2026-02-30").status_code == 200


def test_the_csv_is_the_pages_rows(client, user):
    _record(user, ended_at=timezone.now() - timedelta(days=2))
    client.force_login(user)
    day = timezone.now().date()
    response = client.get(f"/usage/efficiency/csv/?since={day - timedelta(days=3)}&until={day}")
    assert response["Content-Type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(response.content.decode())))
    assert [line[1] for line in table[1:]] == ["alice"]


def test_usage_and_the_menu_link_to_the_page(client, user):
    client.force_login(user)
    assert 'href="/usage/efficiency/"' in client.get("/usage/").content.decode()
    assert 'id="efficiency-link"' in client.get("/").content.decode()


# The API


def _token(user) -> dict:
    return {"HTTP_AUTHORIZATION": f"Token {api_token_create(user=user, name='t')[1]}"}


def test_the_api_gives_the_report(client, user):
    _record(user, ended_at=timezone.now() - timedelta(hours=1))
    _record(UserFactory(username="bob"), ended_at=timezone.now() - timedelta(hours=1))
    body = client.get("/api/v1/usage/efficiency/?user=bob", **_token(user)).json()
    assert [row["name"] for row in body["rows"]] == ["alice"]
    assert body["group_by"] == "user" and body["rows"][0]["gpu_wasted"] == 1.0
    since, until = (datetime.fromisoformat(body[key]) for key in ("since", "until"))
    assert until - since == timedelta(weeks=4)


@pytest.mark.parametrize(("query", "field"), [
    ("group_by=project", "group_by"), ("since=yesterday", "since"), ("until=2026-02-30T00:00:00Z", "until"),
    ("since=2026-05-02T00:00:00Z&until=2026-05-01T00:00:00Z", "since"),
    ("until=0001-01-01T00:00:00Z", "until"), ("user=%0a", "user"),
])
def test_the_api_names_a_refused_query_field(client, user, query, field):
    response = client.get(f"/api/v1/usage/efficiency/?{query}", **_token(user))
    assert response.status_code == 400 and field in response.json()["fields"], response.content[:200]


def test_the_wasteful_api_is_for_admins(client, user, ada):
    _record(user, ended_at=timezone.now() - timedelta(hours=1))
    assert client.get("/api/v1/usage/efficiency/wasteful/", **_token(user)).status_code == 403
    body = client.get("/api/v1/usage/efficiency/wasteful/", **_token(ada)).json()
    [alice] = body["users"]
    assert (alice["username"], alice["gpu_wasted"], alice["cpu_wasted"]) == ("alice", 1.0, 2.0)
    assert alice["worst"][0]["job_id"] and alice["worst"][0]["session_name"] is None
