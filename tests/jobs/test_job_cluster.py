"""A job's cluster (#38): the API's optional `cluster` (a 400 naming it for one not configured), the
compose form's picker only where there is a choice, and each job's first sbatch on its own cluster's
adapter. Slurm is stubbed at the adapter; the real thing: tests/jobs/test_job_cluster_real.py."""

import contextlib
import functools

import pytest
from django.utils import timezone

from portal.jobs.models import Job, JobState, default_cluster
from portal.jobs.services.submission import jobs_submit_first_attempts
from tests.clusters import clusters_dir
from tests.factories import JobFactory

pytestmark = pytest.mark.django_db

CUSTOM = {"template": "custom", "parameters": {"commands": "true", "partition": "gpu", "time_limit": 5}}


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default) and cluster-b, as two files of CLUSTERS_DIR."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)


@pytest.fixture
def no_sbatch(monkeypatch):
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def test_one_cluster_jobs_carry_its_name_and_the_form_has_no_picker(token_client, partitions, no_sbatch,
                                                                     client, user, settings):
    settings.CLUSTERS_DIR = "/nonexistent/clusters.d"
    assert default_cluster() == settings.SLURM_CLUSTER_NAME == "gpuportal"
    response = token_client.post("/api/v1/jobs/", CUSTOM, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cluster"] == "gpuportal" == Job.objects.get().cluster
    assert token_client.get("/api/v1/jobs/").json()["results"][0]["cluster"] == "gpuportal"
    client.force_login(user)
    assert 'name="cluster"' not in client.get("/jobs/new/custom/").content.decode()


def test_a_job_goes_to_the_cluster_named_and_an_unknown_one_is_a_400(token_client, partitions, no_sbatch,
                                                                      two_clusters):
    response = token_client.post("/api/v1/jobs/", {**CUSTOM, "cluster": "cluster-b"}, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["cluster"] == "cluster-b" == Job.objects.get().cluster
    response = token_client.post("/api/v1/jobs/", CUSTOM, format="json")
    assert response.json()["cluster"] == "gpuportal"
    response = token_client.post("/api/v1/jobs/", {**CUSTOM, "cluster": "mars"}, format="json")
    assert response.status_code == 400 and "Unknown cluster 'mars'" in response.json()["fields"]["cluster"][0]
    assert Job.objects.count() == 2
    # A batch: each item on its own cluster, an unknown one refused alone.
    response = token_client.post("/api/v1/jobs/", [{**CUSTOM, "cluster": "cluster-b"},
                                                   {**CUSTOM, "cluster": "mars"}], format="json")
    first, second = response.json()["results"]
    assert first["job"]["cluster"] == "cluster-b" and "cluster" in second["errors"]["fields"]


def test_the_form_picks_a_cluster_only_with_several(client, user, partitions, two_clusters, no_sbatch):
    client.force_login(user)
    page = client.get("/jobs/new/custom/").content.decode()
    assert 'name="cluster"' in page and '<option value="gpuportal" selected>GPU cluster' in page
    form = {"partition": "gpu", "time_limit": "5", "commands": "true", "gpus": "0", "nodes": "1",
            "action": "submit"}
    client.post("/jobs/new/custom/", {**form, "cluster": "cluster-b"})
    assert Job.objects.get().cluster == "cluster-b"
    page = client.post("/jobs/new/custom/", {**form, "cluster": "mars"}).content.decode()
    assert 'data-errors="cluster"' in page and Job.objects.count() == 1
    # The job's page names its cluster; one no longer configured by its name, still no error.
    job = Job.objects.get()
    assert 'id="job-resources">Cluster B · gpu' in client.get(f"/jobs/{job.pk}/").content.decode()
    Job.objects.filter(pk=job.pk).update(cluster="gone")
    assert 'id="job-resources">gone · gpu' in client.get(f"/jobs/{job.pk}/").content.decode()


def test_each_jobs_first_sbatch_goes_to_its_own_clusters_adapter(monkeypatch, two_clusters):
    asked: list[str | None] = []

    class Stub:
        def __init__(self, cluster):
            self.cluster = cluster

        @contextlib.contextmanager
        def submitter(self, *, user, jobs):
            yield functools.partial(self.submit, user=user)

        def submit(self, *, script, user, comment, environment=None):
            asked.append(self.cluster)
            return "7"  # the same Slurm id on both clusters

    monkeypatch.setattr("portal.jobs.services.submission.Slurm.from_settings", Stub)
    monkeypatch.setattr("portal.jobs.services.submission.job_output_dir_ensure", lambda **kwargs: None)
    jobs = [JobFactory(cluster=name, state=JobState.QUEUED_IN_PORTAL, slurm_job_id="",
                       next_attempt_at=timezone.now()) for name in ("cluster-b", "gpuportal", "cluster-b")]
    jobs_submit_first_attempts(job_ids=[job.pk for job in jobs])
    assert sorted(asked) == ["cluster-b", "cluster-b", "gpuportal"]
    assert {(job.cluster, job.slurm_job_id) for job in Job.objects.all()} == {("cluster-b", "7"),
                                                                              ("gpuportal", "7")}


def test_a_job_whose_cluster_is_no_longer_configured_waits_and_cancel_is_a_409(token_client, user,
                                                                               two_clusters, monkeypatch):
    monkeypatch.setattr("portal.jobs.services.submission.Slurm.from_settings",
                        lambda cluster=None: pytest.fail("Slurm was asked"))
    waiting = JobFactory(cluster="gone", state=JobState.QUEUED_IN_PORTAL, slurm_job_id="",
                         next_attempt_at=timezone.now(), user=user)
    jobs_submit_first_attempts(job_ids=[waiting.pk])
    waiting.refresh_from_db()
    assert waiting.state == JobState.QUEUED_IN_PORTAL and "'gone' is no longer configured" in waiting.reason
    running = JobFactory(cluster="gone", state=JobState.RUNNING, slurm_job_id="7", user=user)
    response = token_client.post(f"/api/v1/jobs/{running.pk}/cancel/")
    assert response.status_code == 409 and response.json()["code"] == "cluster_gone"
