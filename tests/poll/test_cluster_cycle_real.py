"""cluster-b's own cycle on the bed's two clusters (#38): it writes why its held job waits, which the
job's API reads, and it cancels on cluster-b the job of a user who lost portal access."""

import contextlib
import subprocess
import time

import pytest
from django.utils import timezone

from portal.jobs.models import JobState
from portal.poll.cycle import cluster_poll_cycle
from portal.waits.models import Waiting
from slurm.adapter import Slurm
from tests.clusters import clusters_dir
from tests.factories import JobFactory, UserFactory

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

B = "cluster-b"


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1


@pytest.fixture
def held_on_b():
    """Submits a held job (pending until released) to cluster-b as a bed user; cancels it afterwards."""
    submitted = []

    def submit(user: str) -> str:
        argv = ["/usr/sbin/runuser", "-u", user, "--", "/usr/bin/sbatch", "--parsable", "-M", B, "--hold",
                "--mem=100M", "--output=/dev/null", "--job-name=cycle-b-test", "--wrap", "sleep 60"]
        done = subprocess.run(argv, capture_output=True, text=True, check=True, cwd="/tmp", timeout=20)
        submitted.append(done.stdout.strip().split(";")[0])
        return submitted[-1]

    yield submit
    with contextlib.suppress(subprocess.SubprocessError):
        subprocess.run(["scancel", "-M", B, *submitted], check=False, timeout=20)


def test_cluster_bs_cycle_says_why_its_held_job_waits(held_on_b, user, token_client):
    job_id = held_on_b("alice")
    job = JobFactory(user=user, cluster=B, state=JobState.PENDING, slurm_job_id=job_id,
                     slurm_submitted_at=timezone.now())
    report = cluster_poll_cycle(cluster=B)
    assert report.ran and report.status.error == "" and report.waiting >= 1
    assert Waiting.every_cluster.get(cluster=B, job_id=job_id).reason == "JobHeldUser"
    assert not Waiting.objects.filter(job_id=job_id).exists()  # not the default cluster's
    waiting = token_client.get(f"/api/v1/jobs/{job.pk}/").json()["waiting"]
    assert waiting is not None and waiting["reason"] == "JobHeldUser"


def test_cluster_bs_cycle_cancels_the_job_of_a_deprovisioned_user_there(held_on_b):
    bob = UserFactory(username="bob", is_active=False)
    job_id = held_on_b("bob")
    JobFactory(user=bob, cluster=B, state=JobState.PENDING, slurm_job_id=job_id,
               slurm_submitted_at=timezone.now())
    assert cluster_poll_cycle(cluster=B).inactive.jobs == 1
    adapter, deadline = Slurm.from_settings(B), time.monotonic() + 20
    while not [row for row in adapter.accounting(job_ids=[job_id]).rows
               if row.job_id == job_id and row.state.startswith("CANCELLED")]:
        assert time.monotonic() < deadline, "not cancelled on cluster-b"
        time.sleep(1)
