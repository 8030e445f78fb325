"""The home page (/) and its selectors, from the database: each section, the empty states, another
user's things never shown, and a GET that writes nothing."""

import itertools
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from portal.audit.models import Login
from portal.extensions.models import ExtensionRequest
from portal.home.selectors import home_get, home_since, templates_last_used
from portal.jobs.models import JobState
from portal.projects.models import Project
from portal.sessions.models import Session
from portal.webapps.models import AppState
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.home.fill import home_fill

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(db):
    return UserFactory(username="alice")


@pytest.fixture
def bob(db):
    return UserFactory(username="bob")


@pytest.fixture
def page(client, alice):
    client.force_login(alice)

    def get(path: str = "/") -> str:
        response = client.get(path)
        assert response.status_code == 200, response.status_code
        return response.content.decode()

    return get


def test_anonymous_goes_to_the_login_page(client):
    for path in ("/", "/home/part/"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_a_newcomer_sees_what_to_do_in_every_section(page):
    html = page()
    assert html.count("<h1") == 1
    for empty in ("needs-you-none", "running-none", "waiting-none", "runs-none"):
        assert f'id="{empty}"' in html, empty
    assert "Start your first session" in html and 'href="/servers/#start-form"' in html
    assert 'href="/jobs/new/"' in html and 'href="/apps/"' in html
    assert "the last 7 days (no earlier sign-in of yours is recorded)" in html


def test_running_and_waiting_with_state_node_time_left_and_reason(alice):
    filled = home_fill(alice, 2)
    home = home_get(user=alice)
    kinds = sorted(item.kind for item in home.running.items)
    assert kinds == ["app", "app", "job", "job", "session", "session"]
    session = next(item for item in home.running.items if item.kind == "session")
    assert (session.state, session.tone, session.node) == ("Ready", "ok", "gpu-node1")
    assert timedelta(hours=6, minutes=58) < session.time_left <= timedelta(hours=7)
    job = next(item for item in home.running.items if item.kind == "job")
    assert job.state == "Running" and job.node == "gpu-node1"
    assert timedelta(hours=5, minutes=58) < job.time_left <= timedelta(hours=6)  # 8 h limit, 2 h in
    waiting = sorted(item.kind for item in home.waiting.items)
    assert waiting == ["app", "app", "job", "job", "session", "session"]
    assert all(item.waiting is not None and item.waiting.estimated_start for item in home.waiting.items)
    queued = next(item for item in home.waiting.items if item.title == filled.waiting_jobs[0].name)
    assert queued.waiting.job_id == filled.waiting_jobs[0].slurm_job_id


def test_the_page_shows_the_reason_in_words_and_the_estimated_start(page, alice):
    home_fill(alice, 1)
    html = page()
    waiting = html.split('id="waiting"')[1].split("</section>")[0]
    # portal.waits' words for Resources and Priority, through its own template.
    assert "in use by running jobs" in waiting and "Other jobs waiting for the same partition" in waiting
    assert "Estimated start: <strong data-estimated-start>" in waiting
    running = html.split('id="running"')[1].split("</section>")[0]
    assert re.search(r"data-time-left>\d h \d\d min</span> left", running)
    assert '<span class="badge ok">Ready</span>' in running
    assert '<span class="badge ok">Running</span>' in running


def test_what_needs_you(page, alice):
    filled = home_fill(alice, 2)
    html = page()
    needs = html.split('id="needs-you"')[1].split("</section>")[0]
    server = filled.running_sessions[0].name
    # The idle warning is gpus/_idle_warning.html, with its Keep it button.
    assert f'action="/idle-gpus/sessions/{server}/keep/"' in needs and f'id="keep-{server}"' in needs
    assert "Keep it" in needs
    assert f'data-idle-job="{filled.running_jobs[0].pk}"' in needs
    assert f'data-project="{filled.projects[0].slurm_account}"' in needs and "Over 80 %" in needs
    assert f'href="/jobs/{filled.failed_jobs[0].pk}/"' in needs
    assert "Failed jobs since your last visit" in needs
    assert f'data-extension="{filled.extensions[0].pk}"' in needs and "Approved and applied" in needs
    assert 'id="needs-you-none"' not in needs


def test_a_budget_under_80_percent_and_a_cancel_do_not_need_you(alice):
    alice.ldap_groups = ["lab"]
    alice.save()
    Project.objects.create(name="lab", ldap_group="lab", slurm_account="lab", slurm_limit_gpu_minutes=6000,
                           used_gpu_minutes=1000, usage_checked_at=timezone.now())
    JobFactory(user=alice, state=JobState.CANCELLED, ended_at=timezone.now())
    JobFactory(user=alice, state=JobState.COMPLETED, ended_at=timezone.now())
    home = home_get(user=alice)
    assert not home.needs_you


def test_since_is_the_previous_sign_in_at_least_a_day_else_a_week(alice):
    now = timezone.now()
    assert home_since(user=alice, now=now).at == now - timedelta(days=7)
    for days in (3, 0):  # an earlier sign-in, then the current one
        login = Login.objects.create(user=alice, username="alice", succeeded=True)
        Login.objects.filter(pk=login.pk).update(created_at=now - timedelta(days=days))
    Login.objects.create(user=alice, username="alice", succeeded=False)  # failures are no visit
    since = home_since(user=alice, now=now)
    assert since.at == now - timedelta(days=3) and since.previous_login == now - timedelta(days=3)
    login = Login.objects.create(user=alice, username="alice", succeeded=True)  # signed in again just now
    Login.objects.filter(pk=login.pk).update(created_at=now)
    assert home_since(user=alice, now=now).at == now - timedelta(days=1)


def test_failures_and_decisions_before_the_last_visit_are_not_shown(alice):
    old = timezone.now() - timedelta(days=8)
    JobFactory(user=alice, state=JobState.TIMEOUT, submitted_at=old, ended_at=old)
    ExtensionRequest.objects.create(user=alice, target="job", target_name="1", minutes=60,
                                    state=ExtensionRequest.State.DENIED, decided_at=old)
    recent = JobFactory(user=alice, state=JobState.OUT_OF_MEMORY, ended_at=timezone.now())
    home = home_get(user=alice)
    assert [job.pk for job in home.failed_jobs] == [recent.pk] and home.extensions == []


def test_quick_starts_last_session_templates_and_apps(page, alice):
    Session.objects.create(user=alice, name="old", partition="gpu", gpus=1, hours=2,
                                  ended_at=timezone.now())
    Session.objects.create(user=alice, name="newest", partition="gpu", gpus=2, hours=3,
                                  environment="pytorch", ended_at=timezone.now())
    for template in ("custom", "nccl-allreduce", "custom", "pytorch-train", "resnet50-benchmark", "gone"):
        JobFactory(user=alice, template=template, submitted_at=timezone.now())
    AppFactory(user=alice)  # makes sure the catalog is there
    last = [template.slug for template in templates_last_used(user=alice)]
    assert last == ["resnet50-benchmark", "pytorch-train", "custom"]
    html = page()
    quick = html.split('id="quick-starts"')[1].split("</section>")[0]
    assert "Start a session like newest" in quick and "gpu · 2 GPUs · 3 h · pytorch" in quick
    assert 'href="/jobs/new/resnet50-benchmark/"' in quick and 'href="/jobs/new/nccl-allreduce/"' not in quick
    assert 'href="/apps/#app-form-tensorboard"' in quick


def test_recent_runs_are_linked(page, alice):
    filled = home_fill(alice, 7)
    html = page()
    runs = html.split('id="recent-runs"')[1].split("</section>")[0]
    assert f'href="/tracking/runs/compare/?runs={filled.runs[0].run_id}"' in runs
    assert runs.count("<li data-run=") == 5 and filled.runs[6].run_id not in runs


def test_another_users_things_are_never_shown(page, alice, bob):
    theirs = home_fill(bob, 2, tag="b")
    bob.is_staff = True  # an admin's home is their own things too
    bob.save()
    html = page()
    for name in ([s.name for s in theirs.running_sessions + theirs.waiting_sessions]
                 + [j.name for j in theirs.running_jobs + theirs.waiting_jobs + theirs.failed_jobs]
                 + [p.name for p in theirs.projects] + [r.run_id for r in theirs.runs]):
        assert name not in html, name
    assert 'id="running-none"' in html and 'id="waiting-none"' in html and 'id="needs-you-none"' in html
    mine = home_get(user=bob)
    assert len(mine.running.items) == 6
    assert not home_get(user=UserFactory(username="ada", is_staff=True)).running.items


def test_the_part_is_the_pages_live_element_alone(page, alice):
    home_fill(alice, 1)
    html, part = page(), page("/home/part/")
    assert part.lstrip().startswith("<div id=\"home-live\"") and "<h1" not in part and "<html" not in part
    assert 'data-live-url="/home/part/" data-live="true"' in html
    assert '<script src="/static/core/live.js"' in html or "core/live." in html
    assert "<script>" not in html  # no inline script (CSP)


def test_a_get_writes_nothing_and_its_queries_are_bounded(client, alice, django_assert_max_num_queries):
    home_fill(alice, 20)
    Login.objects.create(user=alice, username="alice", succeeded=True)
    client.force_login(alice)
    client.get("/")  # warm: the job template catalog is read once per process
    for path in ("/", "/home/part/"):
        with CaptureQueriesContext(connection) as queries, django_assert_max_num_queries(60):
            assert client.get(path).status_code == 200
        writes = [q["sql"] for q in queries if re.match(r"\s*(INSERT|UPDATE|DELETE)", q["sql"], re.I)]
        assert writes == [], writes


def test_accessible_markup(page, alice):
    home_fill(alice, 1)
    html = page()
    levels = [int(level) for level in re.findall(r"<h([1-6])", html.split('<main')[1])]
    assert levels[0] == 1 and all(b - a <= 1 for a, b in itertools.pairwise(levels)), levels
    assert "<table" not in html.split('id="home-live"')[1].replace('<table class="small">', "")
    for badge in re.findall(r'<span class="badge[^"]*">([^<]*)</span>', html):
        assert badge.strip(), "a badge without a word"
    for text in re.findall(r"<a [^>]*>(.*?)</a>", html, re.S):
        assert re.sub(r"<[^>]+>", "", text).strip(), "a link without a name"


def test_app_states(alice):
    AppFactory(user=alice, state=AppState.STARTING, host="gpu-node1", started_at=timezone.now())
    home = home_get(user=alice)
    running = [(item.kind, item.state, item.tone) for item in home.running.items]
    assert running == [("app", "Starting", "warn")]
    assert home.moving


def test_one_screen_the_newest_of_each_section_and_how_many_more(page, alice):
    filled = home_fill(alice, 20)
    home = home_get(user=alice)
    assert len(home.running.items) == 8 and home.running.more_total == 52
    assert home.running.more == {"session": 20, "app": 20, "job": 12}  # jobs are the newest here
    assert len(home.idle_sessions) == 3 and home.idle_sessions_more == 17
    assert len(home.failed_jobs) == 5 and home.more["failed_jobs"]
    html = page()
    assert 'data-more="52"' in html and 'href="/apps/">20 apps</a>' in html
    assert "17 more of your sessions are warned for idle GPUs" in html
    assert filled.failed_jobs[0].name in html and filled.failed_jobs[19].name not in html


def test_budgets_are_read_in_bulk_as_project_budget_reads_each(alice, django_assert_num_queries):
    from portal.projects.models import ProjectUsageDay
    from portal.projects.selectors import project_budget, project_budgets

    today = timezone.localdate()
    filled = home_fill(alice, 3)
    for number, project in enumerate(filled.projects):
        for days_ago, used in ((10, 4000), (0, 5400 - number)):
            ProjectUsageDay.objects.create(project=project, day=today - timedelta(days=days_ago),
                                           used_gpu_minutes=used)
    with django_assert_num_queries(1):
        bulk = project_budgets(projects=filled.projects, today=today)
    assert bulk == [project_budget(project=project, today=today) for project in filled.projects]
    assert all(budget.run_out and budget.level == "warning" for budget in bulk)
    assert [budget.run_out for budget in home_get(user=alice).budgets] == [budget.run_out for budget in bulk]
