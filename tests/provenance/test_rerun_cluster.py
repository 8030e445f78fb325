"""A re-run goes to the cluster its job ran on (#38), and one whose cluster is no longer configured is a
400 naming `cluster`, never a job on another cluster."""

import pytest

from portal.jobs.models import Job
from tests.clusters import clusters_dir
from tests.provenance.test_rerun import _ran, alices_data, dispatched  # noqa: F401 - fixtures

pytestmark = pytest.mark.django_db


@pytest.fixture
def two_clusters(tmp_path, settings):
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


def test_a_rerun_runs_on_its_jobs_cluster(user, token_client, partitions, alices_data, dispatched,  # noqa: F811
                                          two_clusters):
    job = _ran(user, alices_data)
    Job.objects.filter(pk=job.pk).update(cluster="cluster-b")
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cluster"] == "cluster-b" == Job.objects.get(pk=response.json()["id"]).cluster
    Job.objects.filter(pk=job.pk).update(cluster="gone")
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 400 and "gone" in response.json()["fields"]["cluster"][0]
    assert len(dispatched) == 1
