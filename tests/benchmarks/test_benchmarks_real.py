"""The fio and ResNet-50 templates end to end on the local cluster, submitted through the API as
alice: the poll cycle sees them end, jobs_ended enqueues the recording (eager Celery here), which
reads the job's stdout as alice and records it. ResNet-50 is torchvision's real model in the PyTorch
environment (CPU smoke mode: 32 px, a few steps, one gloo process per allocated fake GPU)."""

import pytest

from portal.benchmarks import charts
from portal.benchmarks.models import BenchmarkResult
from portal.benchmarks.selectors import ResultFilters
from portal.benchmarks.services import reference_create
from portal.environments.services import environment_check, environments_discover
from portal.jobs.models import TERMINAL_STATES, JobState
from tests.environments.conftest import REAL_ROOT, needs_real_envs
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.django_db,
    pytest.mark.usefixtures("polled", "cleanup_jobs"),
]


def _run(client, slurm, capture, template, parameters, timeout=600):
    body = client.post(
        "/api/v1/jobs/",
        {"template": template, "name": f"bench {template}", "parameters": {"time_limit": 10, **parameters}},
        format="json",
    )
    assert body.status_code == 201, body.json()
    # The cycle sends jobs_ended once its transaction commits: run those callbacks as a commit would.
    # The timeout covers waiting in the queue: other tests share the cluster's GPUs.
    with capture(execute=True):
        job = poll_until(slurm, body.json()["id"], TERMINAL_STATES, timeout=timeout)
    stdout = client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state} {job.exit_code}\n{stdout}\n{stderr}"
    return job, stdout


def test_fio_template_is_recorded_and_charted(token_client, slurm, django_capture_on_commit_callbacks):
    job, stdout = _run(
        token_client,
        slurm,
        django_capture_on_commit_callbacks,
        "storage-benchmark",
        {"smoke": True, "block_size_seq": "1M", "block_size_rand": "4k"},
    )
    results = {r.case: r for r in BenchmarkResult.objects.filter(job=job)}
    assert set(results) == {"write 1M", "read 1M", "randwrite 4k", "randread 4k"}, stdout
    for result in results.values():
        assert result.parsed and result.value > 0 and result.unit == "MiB/s", result.reason
        assert (result.tool, result.user.username, result.partition) == ("fio", "alice", job.partition)
        assert result.gpu_type == "a100" and result.data["fio_version"].startswith("fio-3")
    history = token_client.get("/api/v1/benchmarks/?tool=fio").json()["results"]
    assert {r["id"] for r in history} >= {r.pk for r in results.values()}
    spec = charts.storage_chart(user=job.user, filters=ResultFilters())
    rows = {(row["pattern"], row["block_size"]) for row in spec["data"]["values"]}
    assert rows >= {("write", "1M"), ("read", "1M"), ("randwrite", "4k"), ("randread", "4k")}
    token_client.force_login(job.user)  # the pages take a browser session
    page = token_client.get("/benchmarks/charts/?kind=storage")
    assert page.status_code == 200


@needs_real_envs
def test_resnet50_scaling_at_1_2_4_gpus_with_a_flag(
    token_client, user, slurm, settings, django_capture_on_commit_callbacks
):
    settings.ENVIRONMENTS_DIR = str(REAL_ROOT)
    pytorch = next(e for e in environments_discover() if e.name == "pytorch")
    environment_check(environment=pytorch)
    assert pytorch.healthy, pytorch.health_message
    base = {
        "smoke": True,
        "environment": "pytorch",
        "precision": "fp32",
        "batch_size": 8,
        "steps": 4,
        "warmup": 1,
    }
    found = {}
    for gpus in (1, 2, 4):
        if gpus == 4:
            # A reference this run cannot reach (10x linear scaling of the 1-GPU run): it must be flagged.
            admin = UserFactory(username="ada", is_staff=True)
            reference_create(
                user=admin,
                tool="tf_cnn_benchmarks",
                metric="images_per_sec",
                gpus=4,
                model="resnet50",
                precision="fp32",
                value=found[1].value * 40,
                lower=-0.1,
                upper=0.1,
                unit="images/s",
            )
        job, stdout = _run(
            token_client,
            slurm,
            django_capture_on_commit_callbacks,
            "resnet50-benchmark",
            {**base, "gpus": gpus},
        )
        assert "SIMULATED" not in stdout and "total images/sec:" in stdout, stdout
        [result] = BenchmarkResult.objects.filter(job=job)
        assert result.parsed and result.value > 0, result.reason
        assert (result.model, result.framework, result.precision, result.gpus) == (
            "resnet50",
            "PyTorch",
            "fp32",
            gpus,
        )
        assert result.framework_version == pytorch.frameworks["torch"] and result.environment == "pytorch"
        assert result.batch_size_per_gpu == 8 and result.gpu_type == "a100" and result.nodes == 1
        assert result.data["num_gpus"] == gpus  # one process per allocated GPU
        found[gpus] = result
    print("\nResNet-50 (CPU smoke) images/sec by GPUs:", {g: r.value for g, r in found.items()})
    assert not found[1].flagged and not found[2].flagged
    assert found[4].flagged and "outside" in found[4].flag_reason
    flagged = token_client.get("/api/v1/benchmarks/?flagged=true").json()["results"]
    assert [r["id"] for r in flagged] == [found[4].pk]

    spec = charts.scaling_chart(
        user=user, filters=ResultFilters(tool="tf_cnn_benchmarks", model="resnet50", precision="fp32")
    )
    measured = {row["gpus"]: row for row in spec["data"]["values"] if row["kind"] == "measured"}
    ideal = {row["gpus"]: row for row in spec["data"]["values"] if row["kind"] == "ideal"}
    assert set(measured) == set(ideal) == {1, 2, 4}
    assert ideal[4]["images_per_sec"] == pytest.approx(4 * found[1].value, rel=0.01)
    assert measured[4]["efficiency_pct"] == pytest.approx(
        100 * found[4].value / (4 * found[1].value), abs=0.2
    )
    published = [row for row in spec["data"]["values"] if row["kind"] == "published"]
    assert published and all(
        row["series"].startswith("Published: Dell") and row["source"] for row in published
    )
    token_client.force_login(user)
    page = token_client.get("/benchmarks/charts/?kind=scaling&model=resnet50&precision=fp32")
    assert page.status_code == 200 and b"Published: Dell EMC" in page.content
    history = token_client.get("/benchmarks/?model=resnet50")
    assert all(f'data-result="{r.pk}"'.encode() in history.content for r in found.values())
