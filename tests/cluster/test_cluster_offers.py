"""What a cluster file offers (#38): a job or a session on a cluster whose file does not offer the
partition, environment or container runtime asked for is a 400 naming that field and the cluster;
work that names no partition goes to one the cluster offers; the default cluster, whose file leaves
them out, offers everything. Slurm and the hub are stubbed (tests/sessions/test_api.py's hub)."""

import re

import pytest

from portal.containers.models import Image
from portal.environments.models import Environment
from portal.jobs.models import Job
from portal.sessions.models import Session
from tests.clusters import clusters_dir
from tests.environments.conftest import environment
from tests.sessions.test_api import URL, hub, partitions  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db

B = 'partitions = ["debug"]\nenvironments = ["pytorch", "ngc"]\nruntimes = ["podman"]\n'
JOB = {"template": "custom", "cluster": "cluster-b", "parameters": {"commands": "true", "time_limit": 5}}


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default, offering everything) and cluster-b (debug, pytorch and ngc, podman)."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path, b=B)


@pytest.fixture
def environments(db):
    """pytorch and tensorflow (Python), and ngc: an image charliecloud runs."""
    environment()
    environment(name="tensorflow", kernel="tensorflow", path="/opt/gpuportal/envs/tensorflow")
    ngc = environment(name="ngc", kind=Environment.Kind.CONTAINER, path="", kernel="")
    Image.objects.create(name="ngc", runtime="charliecloud", environment=ngc,
                         reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm")


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


@pytest.mark.parametrize(("fields", "field", "message"), [
    ({"partition": "gpu"}, "partition",
     "The cluster Cluster B (cluster-b) does not offer the partition 'gpu'; it offers: debug."),
    ({"environment": "tensorflow"}, "environment",
     "The cluster Cluster B (cluster-b) does not offer the environment 'tensorflow'; it offers: pytorch, "
     "ngc."),
    ({"environment": "ngc"}, "environment",
     "The cluster Cluster B (cluster-b) does not offer the runtime 'charliecloud'; it offers: podman."),
])
def test_a_session_on_a_cluster_that_does_not_offer_it_is_a_400_naming_the_field(
        token_client, hub, two_clusters, environments, fields, field, message):  # noqa: F811
    response = token_client.post(URL, {"name": "work", "cluster": "cluster-b", **fields}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["fields"][field] == [message]
    assert hub.started == [] and not Session.objects.exists()
    # The default cluster offers all the site has.
    response = token_client.post(URL, {"name": "here", **fields}, format="json")
    assert response.status_code == 202, response.json()


def test_a_session_naming_no_partition_gets_one_its_cluster_offers(
        token_client, hub, two_clusters, environments):  # noqa: F811
    response = token_client.post(URL, {"name": "work", "cluster": "cluster-b", "environment": "pytorch"},
                                 format="json")
    assert response.status_code == 202, response.json()
    assert (response.json()["partition"], hub.started[0]["partition"]) == ("debug", "debug")
    assert token_client.post(URL, {"name": "here"}, format="json").json()["partition"] == "gpu"


@pytest.mark.parametrize(("parameters", "field", "message"), [
    ({"partition": "gpu"}, "partition",
     "The cluster Cluster B (cluster-b) does not offer the partition 'gpu'; it offers: debug."),
    ({"environment": "tensorflow"}, "environment",
     "The cluster Cluster B (cluster-b) does not offer the environment 'tensorflow'; it offers: pytorch, "
     "ngc."),
])
def test_a_job_on_a_cluster_that_does_not_offer_it_is_a_400_naming_the_field(
        token_client, two_clusters, environments, no_sbatch, parameters, field, message):
    body = {**JOB, "parameters": {**JOB["parameters"], **parameters}}
    response = token_client.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["fields"]["parameters"][field] == [message]
    assert not Job.objects.exists()
    response = token_client.post("/api/v1/jobs/", {**body, "cluster": "gpuportal"}, format="json")
    assert response.status_code == 201, response.json()


def test_a_job_naming_no_partition_goes_to_one_its_cluster_offers(token_client, two_clusters, no_sbatch):
    response = token_client.post("/api/v1/jobs/", JOB, format="json")
    assert response.status_code == 201, response.json()
    assert (Job.objects.get().cluster, Job.objects.get().partition) == ("cluster-b", "debug")


def test_the_forms_partitions_and_environments_name_the_clusters_offering_them(
        client, user, two_clusters, environments, hub):  # noqa: F811
    client.force_login(user)
    for url in ("/jobs/new/custom/", "/servers/"):
        page = client.get(url).content.decode()
        assert re.search(r'<option value="gpu"[^>]* data-clusters="gpuportal"[\s>]', page), url
        assert re.search(r'<option value="debug"[^>]* data-clusters="cluster-b gpuportal"[\s>]', page), url
        assert re.search(r'<option value="tensorflow"[^>]* data-clusters="gpuportal"[\s>]', page), url
        assert re.search(r'<option value="ngc"[^>]* data-clusters="gpuportal"[\s>]', page), url
        assert "core/cluster_offers.js" in page, url


def test_a_one_cluster_sites_forms_are_as_before(client, user, settings, environments, hub):  # noqa: F811
    settings.CLUSTERS_DIR = "/nonexistent/clusters.d"
    client.force_login(user)
    for url in ("/jobs/new/custom/", "/servers/"):
        page = client.get(url).content.decode()
        assert "data-clusters" not in page and "cluster_offers.js" not in page, url
