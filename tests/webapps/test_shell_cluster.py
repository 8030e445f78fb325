"""A shell inside a job on another cluster (#38) is refused with a 409 naming that cluster: the
helper's `srun --jobid` runs with the login host's slurm.conf, the default cluster's, where the same
Slurm id may be somebody else's job. The helper is stubbed: nothing starts."""

import pytest
from django.utils import timezone

from portal.webapps.models import App
from tests.clusters import clusters_dir
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@pytest.fixture
def started(monkeypatch):
    """The helper's argv, answered as user-shell answers a start."""
    calls = []

    class Runner:
        def run(self, command, args, **options):
            calls.append(args)
            return "port 40123 pid 4242\n"

    monkeypatch.setattr("portal.webapps.shells.SlurmRunner", lambda **kwargs: Runner())
    return calls


def test_a_job_or_session_on_another_cluster_gets_a_409_naming_it(user, token_client, started):
    job = JobFactory(user=user, cluster="cluster-b", state="RUNNING", slurm_job_id="7")
    SessionFactory(user=user, cluster="cluster-b", name="onb", job_id="8", started_at=timezone.now())
    for body in ({"job": job.pk}, {"session": "onb"}):
        response = token_client.post("/api/v1/shells/", body, format="json")
        assert response.status_code == 409, response.json()
        assert "cluster-b" in str(response.json())
    assert started == [] and not App.objects.exists()


def test_a_job_on_the_default_cluster_gets_its_shell(user, token_client, started):
    job = JobFactory(user=user, cluster="gpuportal", state="RUNNING", slurm_job_id="7")
    response = token_client.post("/api/v1/shells/", {"job": job.pk}, format="json")
    assert response.status_code == 201, response.json()
    assert "job=7" in started[0]
