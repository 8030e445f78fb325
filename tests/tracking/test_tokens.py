"""Job and session tracking tokens (MLFLOW_TRACKING_TOKEN inside a job): its owner, on the tracking
API only, while the job runs."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.core.report_tokens import report_token
from portal.core.tracking_tokens import tracking_environment, tracking_token
from portal.tracking.models import Run
from tests.factories import JobFactory, UserFactory
from tests.tracking.conftest import Mlflow


@pytest.fixture
def job(db):
    return JobFactory(user=UserFactory(username="alice"), state="RUNNING", ended_at=None,
                      slurm_job_id="4711", partition="gpu", template="pytorch-train")


def test_a_jobs_token_acts_as_its_owner_and_links_the_run(job):
    client = Mlflow(tracking_token("job", job.pk))
    run_id = client.run()
    run = Run.objects.get(run_id=run_id)
    assert (run.owner.username, run.job) == ("alice", job)
    tags = {tag.key: tag.value for tag in run.tags.all()}
    assert tags["slurm.job_id"] == "4711" and tags["slurm.partition"] == "gpu"
    assert tags["gpuportal.template"] == "pytorch-train"


def test_an_ended_jobs_token_works_only_within_the_grace(job, settings):
    settings.TRACKING_TOKEN_GRACE_SECONDS = 600
    job.ended_at = timezone.now() - timedelta(seconds=60)
    job.save()
    Mlflow(tracking_token("job", job.pk)).run()
    job.ended_at = timezone.now() - timedelta(seconds=601)
    job.save()
    refused = Mlflow(tracking_token("job", job.pk)).post("runs/create", {}, status=401)
    assert refused["error_code"] == "UNAUTHENTICATED"


@pytest.mark.parametrize("token", [
    "job:1:forged", "session:1:x", "job:999999:" + "A" * 27, "report:1:x", "x" * 300])
def test_forged_tokens_are_refused(job, token):
    assert Mlflow(token).post("runs/create", {}, status=401)["error_code"] == "UNAUTHENTICATED"


def test_a_report_token_is_no_tracking_token_nor_the_reverse(job):
    assert Mlflow(report_token("job", job.pk)).post("runs/create", {}, status=401)["error_code"] == \
        "UNAUTHENTICATED"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {tracking_token('job', job.pk)}")
    assert client.get("/api/v1/jobs/").status_code == 401  # the portal's own API: not with this token


def test_an_inactive_owners_token_is_refused(job):
    job.user.is_active = False
    job.user.save()
    assert Mlflow(tracking_token("job", job.pk)).post("runs/create", {}, status=401)["error_code"] == \
        "UNAUTHENTICATED"


def test_the_environment_a_job_gets(job, settings):
    settings.PORTAL_URL_FOR_JOBS = "http://portal.example:8000/"
    environment = tracking_environment(kind="job", pk=job.pk)
    assert environment == {"MLFLOW_TRACKING_URI": "http://portal.example:8000",
                           "MLFLOW_TRACKING_TOKEN": tracking_token("job", job.pk)}
