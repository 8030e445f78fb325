"""GET /metrics: who may read it, the GPU gauges per partition and node (computed from the database),
the request and task counters every process adds to in Redis."""

from datetime import timedelta

import pytest
from celery import shared_task
from django.core.management import call_command
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from portal.core.errors import InvalidInput
from portal.gpus.models import GpuPoint
from portal.jobs.models import JobState
from portal.metrics.models import ScrapeToken
from portal.metrics.services import scrape_token_create
from portal.sessions.models import Session
from tests.factories import UserFactory
from tests.metrics.conftest import gpu_jobs_plant

pytestmark = pytest.mark.django_db


def _samples(body: bytes) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def _scrape(client: Client | None = None, **headers) -> dict[tuple[str, tuple], float]:
    response = (client or Client()).get("/metrics", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/plain; version=")
    return _samples(response.content)


@pytest.fixture
def scrape_key():
    return scrape_token_create(name="prometheus")[1]


def test_only_admins_and_scrape_tokens_read_it_anybody_else_gets_401_or_403(scrape_key):
    anonymous = Client().get("/metrics")
    assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == 'Bearer realm="metrics"'
    for header in ("Bearer wrong", "Bearer", "Bearer " + "x" * 5000, "Bearer é", "Token " + scrape_key,
                   "Bearer " + scrape_key[:-1]):
        response = Client().get("/metrics", headers={"Authorization": header})
        assert response.status_code == 401, header
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {scrape_key}"}).status_code == 200

    user, admin = Client(), Client()
    user.force_login(UserFactory(username="alice"))
    admin.force_login(UserFactory(username="ada", is_staff=True))
    assert user.get("/metrics").status_code == 403
    assert admin.get("/metrics").status_code == 200
    # A wrong token is refused even in an admin's session; writes are not allowed at all.
    assert admin.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert admin.post("/metrics").status_code == 405
    assert ScrapeToken.objects.get().digest == ScrapeToken.digest_of(scrape_key)


def _session_plant(node: str, util: float, *, ended: bool = False) -> None:
    now = timezone.now().replace(second=0, microsecond=0)
    session = Session.objects.create(user=UserFactory(username="bob"), name=f"s{util:.0f}",
                                            partition="gpu", gpus=1, hours=1, node=node,
                                            ended_at=now if ended else None)
    GpuPoint.objects.create(session=session, gpu=2, minute=now, samples=1, util_sum=util, util_count=1,
                            mem_used_max_mib=1024)


def test_gpu_gauges_per_partition_and_node_count_running_jobs_and_sessions(partitions, scrape_key, settings):
    settings.METRICS_GPU_BUSY_PERCENT = 5
    running = gpu_jobs_plant(1, state=JobState.RUNNING, node_list="vm", gpus=2, util=80, mem_mib=2048)[0]
    GpuPoint.objects.filter(job=running, gpu=1).update(util_sum=1, util_max=1)  # GPU 1 idle
    gpu_jobs_plant(20, node_list="vm", util=100, mem_mib=70000)  # finished: their GPUs are no one's now
    gpu_jobs_plant(1, state=JobState.RUNNING, node_list="gone[1-2]", partition="debug", gpus=1, util=30)
    _session_plant("vm", 59)
    _session_plant("vm", 100, ended=True)

    got = _scrape(**{"Authorization": f"Bearer {scrape_key}"})
    assert got[("gpuportal_partition_gpus", (("partition", "gpu"),))] == 4
    assert got[("gpuportal_partition_gpus_sampled", (("partition", "gpu"),))] == 3
    assert got[("gpuportal_partition_gpus_busy", (("partition", "gpu"),))] == 2
    assert got[("gpuportal_partition_gpu_utilization_percent", (("partition", "gpu"),))] == 46.67
    assert got[("gpuportal_partition_gpu_memory_used_bytes", (("partition", "gpu"),))] == 5 * 1024 * 2**20
    assert got[("gpuportal_partition_gpu_utilization_percent", (("partition", "debug"),))] == 30
    assert got[("gpuportal_node_gpus", (("node", "vm"),))] == 4
    assert got[("gpuportal_node_gpus_busy", (("node", "vm"),))] == 2
    assert got[("gpuportal_node_gpu_utilization_percent", (("node", "vm"),))] == 46.67
    # A multi-node job's sampler runs on its first node.
    assert got[("gpuportal_node_gpus_sampled", (("node", "gone1"),))] == 1
    assert ("gpuportal_node_gpus_sampled", (("node", "gone2"),)) not in got
    labels = {name for key in got for name, _ in key[1]}
    assert labels <= {"partition", "node", "route", "method", "status", "le", "task", "state"}


def test_requests_are_counted_by_route_pattern_never_the_raw_path(scrape_key):
    client = Client()
    for path in ("/api/v1/jobs/1/", "/api/v1/jobs/2/", "/no/such/page/abc"):
        client.get(path)
    client.generic("BREW", "/api/v1/jobs/3/")

    got = _scrape(**{"Authorization": f"Bearer {scrape_key}"})
    route = "/api/v1/jobs/<str:job_id>/"
    requests = "gpuportal_http_requests_total"
    assert got[(requests, (("method", "GET"), ("route", route), ("status", "4xx")))] == 2
    assert got[(requests, (("method", "other"), ("route", route), ("status", "4xx")))] == 1
    assert got[(requests, (("method", "GET"), ("route", "<unmatched>"), ("status", "4xx")))] == 1
    assert got[("gpuportal_http_request_duration_seconds_count", (("method", "GET"), ("route", route)))] == 2
    assert got[("gpuportal_http_request_duration_seconds_bucket",
                (("le", "+Inf"), ("method", "GET"), ("route", route)))] == 2
    assert not any("/1/" in value or "abc" in value for key in got for _, value in key[1])
    assert got[("gpuportal_metrics_store_up", ())] == 1


@shared_task(name="tests.metrics.noop")
def _noop(fail: bool = False) -> None:
    if fail:
        raise ValueError("asked to")


def test_celery_tasks_are_counted_by_name_and_state(scrape_key):
    _noop.delay()
    _noop.delay()
    _noop.apply(kwargs={"fail": True})
    got = _scrape(**{"Authorization": f"Bearer {scrape_key}"})
    assert got[("gpuportal_celery_tasks_total", (("state", "SUCCESS"), ("task", "tests.metrics.noop")))] == 2
    assert got[("gpuportal_celery_tasks_total", (("state", "FAILURE"), ("task", "tests.metrics.noop")))] == 1


def test_without_redis_requests_and_the_scrape_still_answer(scrape_key, settings):
    settings.METRICS_REDIS_URL = "redis://127.0.0.1:1/0"
    assert Client().get("/api/v1/jobs/1/").status_code == 401
    got = _scrape(**{"Authorization": f"Bearer {scrape_key}"})
    assert got[("gpuportal_metrics_store_up", ())] == 0


def test_an_admin_makes_a_token_in_the_admin_site_or_with_the_command(capsys):
    admin = Client()
    admin.force_login(UserFactory(username="ada", is_staff=True, is_superuser=True))
    response = admin.post("/admin/metrics/scrapetoken/add/", {"name": "prometheus@mon"}, follow=True)
    assert response.status_code == 200
    message = next(str(m) for m in response.context["messages"])
    key = message.split(": ", 1)[1].split(" ")[0]
    token = ScrapeToken.objects.get(name="prometheus@mon")
    assert token.digest == ScrapeToken.digest_of(key) and key not in (token.digest, token.prefix)
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 200

    call_command("metrics_scrape_token", "second")
    key = capsys.readouterr().out.strip()
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert ScrapeToken.objects.count() == 2


def test_a_token_expires_and_its_life_is_in_the_audit_trail(capsys, settings):
    """#33: scrape tokens can expire (METRICS_SCRAPE_TOKEN_DAYS unless said otherwise), and the audit
    trail records them, never their key."""
    from portal.audit.models import ScrapeTokenEvent

    call_command("metrics_scrape_token", "prom", "--days", "0")
    forever = ScrapeToken.objects.get(name="prom")
    assert forever.expires_at is None
    call_command("metrics_scrape_token", "yearly")
    yearly = ScrapeToken.objects.get(name="yearly")
    lifetime = yearly.expires_at - timezone.now()
    assert abs(lifetime - timedelta(days=settings.METRICS_SCRAPE_TOKEN_DAYS)) < timedelta(minutes=1)
    token, key = scrape_token_create(name="short", expires_at=timezone.now() + timedelta(hours=1))
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    ScrapeToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert Client().get("/metrics", headers={"Authorization": f"Bearer {key}"}).status_code == 401
    pk = token.pk
    token.delete()
    events = ScrapeTokenEvent.objects.filter(pgh_obj_id=pk).values_list("pgh_label", flat=True)
    assert sorted(events) == ["create", "delete", "update"]
    assert all(key not in str(row) for row in ScrapeTokenEvent.objects.values())
    with pytest.raises(InvalidInput):
        scrape_token_create(name="past", expires_at=timezone.now() - timedelta(days=1))
