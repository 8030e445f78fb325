"""The suggested resources (portal.efficiency.suggest) and their API: the p95 of what a user's newest
runs of a template or profile used, and what to ask for next time."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.efficiency.models import Efficiency
from portal.efficiency.suggest import percentile, suggested_resources
from portal.policy.models import ResourceProfile
from tests.factories import JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db

GIB = 1024


def efficiency_record(user, *, template="pytorch-train", profile="", minutes_ago=0, **figures) -> Efficiency:
    """An ended run's record: a job of `template`, or a session of `profile`."""
    owner = ({"session": SessionFactory(user=user, profile=profile)} if profile
             else {"job": JobFactory(user=user, template=template)})
    now = timezone.now()
    values = {"partition": "gpu", "cpus": 8, "mem_requested_mb": 16 * GIB, "gpus": 2,
              "time_limit_seconds": 3600, "elapsed_seconds": 600, "mem_peak_mb": 3 * GIB, "gpus_busy": 1,
              **figures}
    return Efficiency.objects.create(user=user, template="" if profile else template, profile=profile,
                                     ended_at=now - timedelta(minutes=minutes_ago), recorded_at=now,
                                     **owner, **values)


@pytest.mark.parametrize(("values", "share", "expected"), [
    ([5], 0.95, 5), ([1, 2, 3], 0.95, 3), (list(range(1, 21)), 0.95, 19), (list(range(1, 11)), 0.95, 10),
    (list(range(1, 11)), 0.5, 5), ([4, 1, 3, 2], 0.5, 2), ([], 0.95, None),
])
def test_percentile_is_the_nearest_rank(values, share, expected):
    assert percentile(values, share) == expected


def test_the_p95_of_the_newest_runs_and_what_to_ask(user):
    for minute, (peak_gib, busy, used) in enumerate([(2, 1, 300), (9, 1, 900), (3, 2, 600), (4, 1, 1200)]):
        efficiency_record(user, minutes_ago=minute, mem_peak_mb=peak_gib * GIB, gpus_busy=busy,
                          elapsed_seconds=used)
    suggestion = suggested_resources(user=user, template="pytorch-train")
    assert suggestion.runs == 4
    assert suggestion.mem_peak_mb_p95 == 9 * GIB  # ceil(0.95 x 4) = the 4th of 4
    assert suggestion.gpus_busy_p95 == 2 and suggestion.elapsed_seconds_p95 == 1200
    assert (suggestion.mem_requested_mb_max, suggestion.gpus_max, suggestion.time_limit_seconds_max) == (
        16 * GIB, 2, 3600)
    assert suggestion.memory_gb == 12  # 9 GiB + 25 %, whole GiB
    assert suggestion.gpus == 2
    assert suggestion.time_minutes == 30 and suggestion.time == "00:30:00" and suggestion.hours == 0.5


def test_only_the_newest_runs_count(user, settings):
    settings.EFFICIENCY_SUGGEST_RUNS = 3
    efficiency_record(user, minutes_ago=60, mem_peak_mb=40 * GIB)  # the oldest: left out
    for minute in range(3):
        efficiency_record(user, minutes_ago=minute, mem_peak_mb=2 * GIB)
    suggestion = suggested_resources(user=user, template="pytorch-train")
    assert suggestion.runs == 3 and suggestion.mem_peak_mb_p95 == 2 * GIB
    assert suggested_resources(user=user, template="pytorch-train", runs=4).mem_peak_mb_p95 == 40 * GIB


def test_too_few_runs_make_no_suggestion(user, settings):
    for minute in range(2):
        efficiency_record(user, minutes_ago=minute)
    assert suggested_resources(user=user, template="pytorch-train") is None
    settings.EFFICIENCY_SUGGEST_MIN_RUNS = 2
    assert suggested_resources(user=user, template="pytorch-train").runs == 2


def test_unknown_figures_are_skipped_and_none_known_is_null(user):
    efficiency_record(user, mem_peak_mb=8 * GIB, gpus_busy=None)
    for minute in range(1, 4):
        efficiency_record(user, minutes_ago=minute, mem_peak_mb=None, gpus_busy=None, mem_requested_mb=None,
                time_limit_seconds=None)
    suggestion = suggested_resources(user=user, template="pytorch-train")
    assert suggestion.mem_peak_mb_p95 == 8 * GIB and suggestion.memory_gb == 10
    assert suggestion.gpus_busy_p95 is None and suggestion.gpus is None  # had GPUs, none measured
    assert suggestion.mem_requested_mb_max == 16 * GIB and suggestion.time_limit_seconds_max == 3600


def test_runs_without_gpus_suggest_none_and_busy_none_suggests_one(user):
    for minute in range(3):
        efficiency_record(user, template="custom", minutes_ago=minute, gpus=0, gpus_busy=None)
        efficiency_record(user, template="nccl-allreduce", minutes_ago=minute, gpus=4, gpus_busy=0)
    assert suggested_resources(user=user, template="custom").gpus == 0
    assert suggested_resources(user=user, template="nccl-allreduce").gpus == 1


def test_other_users_and_other_templates_never_count(user):
    bob = UserFactory(username="bob")
    for minute in range(3):
        efficiency_record(user, minutes_ago=minute, mem_peak_mb=GIB)
        efficiency_record(bob, minutes_ago=minute, mem_peak_mb=40 * GIB)
        efficiency_record(user, template="custom", minutes_ago=minute, mem_peak_mb=30 * GIB)
    assert suggested_resources(user=user, template="pytorch-train").mem_peak_mb_p95 == GIB
    assert suggested_resources(user=UserFactory(username="carol"), template="pytorch-train") is None


def test_a_profile_reads_sessions_and_a_template_jobs(user):
    for minute in range(3):
        efficiency_record(user, profile="small", minutes_ago=minute, elapsed_seconds=7200)
    assert suggested_resources(user=user, template="pytorch-train") is None
    suggestion = suggested_resources(user=user, profile="small")
    assert suggestion.runs == 3 and suggestion.time_minutes == 180 and suggestion.hours == 3
    assert suggested_resources(user=user, profile="large") is None
    with pytest.raises(ValueError):
        suggested_resources(user=user)


def test_one_query(user, django_assert_num_queries):
    for minute in range(5):
        efficiency_record(user, minutes_ago=minute)
    with django_assert_num_queries(1):
        suggested_resources(user=user, template="pytorch-train")


def test_the_query_can_use_the_user_template_index(user):
    efficiency_record(user)
    with CaptureQueriesContext(connection) as queries:
        suggested_resources(user=user, template="pytorch-train")
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + queries[0]["sql"])
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "efficiency_user_template" in plan, plan


# --- The API ---

def test_the_api_answers_a_suggestion(token_client, user):
    for minute in range(10):
        efficiency_record(user, minutes_ago=minute, mem_peak_mb=3.1 * GIB, elapsed_seconds=720)
    response = token_client.get("/api/v1/templates/pytorch-train/suggested-resources/")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["template"] == "pytorch-train" and body["profile"] == "" and body["detail"] == ""
    suggestion = body["suggestion"]
    assert (suggestion["runs"], suggestion["memory_gb"], suggestion["gpus"], suggestion["time"]) == (
        10, 4, 1, "00:30:00")
    assert suggestion["summary"] == ("Your last 10 runs of this template used at most (p95): memory 3.1 GB "
                                     "of 16 GB asked, GPUs busy 1 of 2, time 12 min of 1 h.")
    assert suggestion["advice"] == "Ask for 1 GPU, 30 min and 4 GB of memory."


def test_the_api_says_why_there_is_none(token_client, user):
    efficiency_record(user)
    response = token_client.get("/api/v1/templates/pytorch-train/suggested-resources/")
    assert response.status_code == 200
    body = response.json()
    assert body["suggestion"] is None and body["min_runs"] == 3
    assert "Fewer than 3 of your runs of this template" in body["detail"]


@pytest.mark.parametrize("slug", ["nope", "..", "%00", "<script>", "a" * 300, "custom%20"])
def test_an_unknown_template_is_a_json_404_naming_it(token_client, slug):
    response = token_client.get(f"/api/v1/templates/{slug}/suggested-resources/")
    assert response.status_code == 404
    body = response.json()
    assert body["code"] == "not_found"
    if slug == "nope":
        assert "'nope'" in body["detail"]


def test_a_profile_of_the_users_sessions(token_client, user):
    ResourceProfile.objects.create(name="small", title="1 GPU", partition="gpu", gpus=1, hours=2)
    for minute in range(3):
        efficiency_record(user, profile="small", minutes_ago=minute, elapsed_seconds=3000)
    body = token_client.get("/api/v1/profiles/small/suggested-resources/").json()
    assert body["profile"] == "small" and body["suggestion"]["hours"] == 1.25
    assert body["suggestion"]["summary"].startswith("Your last 3 sessions of this profile")
    response = token_client.get("/api/v1/profiles/large/suggested-resources/")
    assert response.status_code == 404 and "'large'" in response.json()["detail"]


def test_a_profile_offered_to_other_groups_is_a_404(token_client, user):
    ResourceProfile.objects.create(name="big", title="8 GPUs", partition="gpu", gpus=8, hours=2,
                                   groups=["admins-only"])
    assert token_client.get("/api/v1/profiles/big/suggested-resources/").status_code == 404


# --- The pages, before any script runs ---

def test_the_composer_shows_the_suggestion_without_javascript(client, user, partitions):
    client.force_login(user)
    assert 'id="suggest-panel" class="notice" hidden' in client.get("/jobs/new/custom/").content.decode()
    for minute in range(3):
        efficiency_record(user, template="custom", minutes_ago=minute)
    page = client.get("/jobs/new/custom/").content.decode()
    assert "Your last 3 runs of this template used at most (p95): memory 3 GB of 16 GB asked" in page
    assert "Ask for 1 GPU, 15 min and 4 GB of memory." in page
    assert 'data-gpus="1" data-time-minutes="15"' in page
    assert '<button type="button" id="suggest-use" hidden>Use these</button>' in page  # until the script runs


def test_the_session_form_has_the_panel_for_its_profile_buttons(client, user, partitions):
    client.force_login(user)
    page = client.get("/servers/").content.decode()
    assert 'data-url="/api/v1/profiles/_/suggested-resources/"' in page and 'id="suggest-status"' in page
