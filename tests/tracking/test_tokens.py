"""Job and session tracking tokens (MLFLOW_TRACKING_TOKEN inside a job): its owner's reads, its own
experiment and runs for writes (portal.tracking.scopes), on the tracking API only, while the job runs."""

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.sessions.models import Session
from portal.sweeps.models import Sweep
from portal.tokens.report import report_token
from portal.tokens.tracking import tracking_environment, tracking_token
from portal.tracking.job_runs import job_run_id, job_runs_create
from portal.tracking.models import Experiment, Run
from tests.factories import JobFactory, UserFactory
from tests.tracking.conftest import Mlflow


@pytest.fixture
def job(db):
    return JobFactory(user=UserFactory(username="alice"), state="RUNNING", ended_at=None,
                      slurm_job_id="4711", partition="gpu", template="pytorch-train")


def _own_experiment(client: Mlflow, name: str = "job-pytorch-train") -> str:
    return client.post("experiments/create", {"name": name})["experiment_id"]


def test_a_jobs_token_acts_as_its_owner_and_links_the_run(job):
    client = Mlflow(tracking_token("job", job.pk))
    run_id = client.run(_own_experiment(client))
    run = Run.objects.get(run_id=run_id)
    assert (run.owner.username, run.job) == ("alice", job)
    tags = {tag.key: tag.value for tag in run.tags.all()}
    assert tags["slurm.job_id"] == "4711" and tags["slurm.partition"] == "gpu"
    assert tags["gpuportal.template"] == "pytorch-train"


def test_an_ended_jobs_token_works_only_within_the_grace(job, settings):
    settings.TRACKING_TOKEN_GRACE_SECONDS = 600
    job.ended_at = timezone.now() - timedelta(seconds=60)
    job.save()
    client = Mlflow(tracking_token("job", job.pk))
    client.run(_own_experiment(client))
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


# --- scope: its own experiment and runs (#33) ---

def _refused(answer: dict) -> None:
    assert answer["error_code"] == "PERMISSION_DENIED" and answer["message"]


def _personal(user) -> Mlflow:
    """A personal API token: what the owner uses outside the job, with all their rights."""
    _, key = api_token_create(user=user, name="mlflow")
    return Mlflow(key)


def test_a_jobs_token_is_refused_on_another_experiment_of_its_owner(job):
    alice = _personal(job.user)
    other = alice.post("experiments/create", {"name": "thesis"})["experiment_id"]
    foreign_run = alice.run(other)
    token = Mlflow(tracking_token("job", job.pk))
    _refused(token.post("runs/create", {"experiment_id": other, "start_time": 1}, status=403))
    _refused(token.post("runs/create", {"experiment_id": "0", "start_time": 1}, status=403))  # Default
    _refused(token.post("experiments/create", {"name": "elsewhere"}, status=403))
    _refused(token.post("experiments/update", {"experiment_id": other, "new_name": "x"}, status=403))
    _refused(token.post("experiments/delete", {"experiment_id": other}, status=403))
    for path, body in (("runs/log-metric", {"key": "loss", "value": 1, "timestamp": 1}),
                       ("runs/log-parameter", {"key": "lr", "value": "1"}),
                       ("runs/log-batch", {"metrics": [{"key": "loss", "value": 1, "timestamp": 1}]}),
                       ("runs/set-tag", {"key": "t", "value": "v"}),
                       ("runs/delete-tag", {"key": "mlflow.user"}),
                       ("runs/update", {"status": "KILLED"}),
                       ("runs/delete", {})):
        _refused(token.post(path, {"run_id": foreign_run, **body}, status=403))
    assert not Experiment.objects.filter(name="elsewhere").exists()
    thesis = Experiment.objects.get(pk=other)
    assert (thesis.name, thesis.lifecycle_stage) == ("thesis", "active")
    run = Run.objects.get(run_id=foreign_run)
    assert (run.status, run.lifecycle_stage, run.latest_metrics.count(), run.params.count()) == \
        ("RUNNING", "active", 0, 0)
    # Reads stay its owner's: the client finds experiments and runs by name and id.
    found = token.get("experiments/get-by-name", {"experiment_name": "thesis"})
    assert found["experiment"]["name"] == "thesis"
    assert token.get("runs/get", {"run_id": foreign_run})["run"]["info"]["run_id"] == foreign_run
    assert [e["name"] for e in token.post("experiments/search", {"max_results": 10})["experiments"]] \
        == ["thesis"]


def test_a_jobs_token_is_refused_on_its_own_experiment_s_rename_and_delete(job):
    token = Mlflow(tracking_token("job", job.pk))
    own = _own_experiment(token)
    _refused(token.post("experiments/update", {"experiment_id": own, "new_name": "x"}, status=403))
    _refused(token.post("experiments/delete", {"experiment_id": own}, status=403))


def test_a_jobs_token_writes_its_own_runs_in_its_own_experiment(job):
    token = Mlflow(tracking_token("job", job.pk))
    own = _own_experiment(token)
    run_id = token.run(own)
    for path, body in (("runs/log-metric", {"key": "loss", "value": 1, "timestamp": 1}),
                       ("runs/log-parameter", {"key": "lr", "value": "1"}),
                       ("runs/log-batch", {"metrics": [{"key": "acc", "value": 1, "timestamp": 1}]}),
                       ("runs/set-tag", {"key": "t", "value": "v"}),
                       ("runs/delete-tag", {"key": "t"}),
                       ("runs/update", {"status": "FINISHED", "end_time": 2}),
                       ("runs/delete", {})):
        token.post(path, {"run_id": run_id, **body})
    run = Run.objects.get(run_id=run_id)
    assert (run.status, run.lifecycle_stage, run.job) == ("FINISHED", "deleted", job)
    assert {m.key for m in run.latest_metrics.all()} == {"loss", "acc"}


def test_a_jobs_token_writes_the_run_the_portal_made_for_it_but_not_another_jobs(job):
    [run] = job_runs_create(jobs=[job])
    sibling = JobFactory(user=job.user, state="RUNNING", ended_at=None, template="pytorch-train")
    [sibling_run] = job_runs_create(jobs=[sibling])
    assert run.experiment == sibling_run.experiment  # the same job-<template> experiment
    token = Mlflow(tracking_token("job", job.pk))
    commit = {"key": "mlflow.source.git.commit", "value": "a" * 40}  # what git_commit.sh sets
    token.post("runs/set-tag", {"run_id": job_run_id(job), **commit})
    token.post("runs/update", {"run_id": job_run_id(job), "status": "RUNNING"})
    _refused(token.post("runs/set-tag", {"run_id": job_run_id(sibling), **commit}, status=403))
    _refused(token.post("runs/delete", {"run_id": job_run_id(sibling)}, status=403))
    token.run(str(run.experiment.pk))  # a second run of its own in its experiment


def test_another_users_objects_stay_missing_not_forbidden(job):
    bob = _personal(UserFactory(username="bob"))
    bobs = bob.post("experiments/create", {"name": "job-pytorch-train"})["experiment_id"]
    bobs_run = bob.run(bobs)
    token = Mlflow(tracking_token("job", job.pk))
    assert token.post("runs/create", {"experiment_id": bobs}, status=404)["error_code"] == \
        "RESOURCE_DOES_NOT_EXIST"
    assert token.post("runs/set-tag", {"run_id": bobs_run, "key": "k", "value": "v"}, status=404)[
        "error_code"] == "RESOURCE_DOES_NOT_EXIST"


def test_a_sweeps_token_may_make_the_sweeps_experiment(job):
    sweep = Sweep.objects.create(user=job.user, name="s", template="pytorch-train", parameters={},
                                 method="grid", space={}, tasks=[], concurrency=1, objective="loss",
                                 direction="min", job=job)
    token = Mlflow(tracking_token("job", job.pk))
    token.run(_own_experiment(token, f"sweep-{sweep.pk}"))
    _refused(token.post("experiments/create", {"name": f"sweep-{sweep.pk + 1}"}, status=403))


def test_a_sessions_token_is_scoped_to_its_session_experiment(job):
    session = Session.objects.create(user=job.user, name="tracked", partition="gpu", gpus=0, hours=1)
    token = Mlflow(tracking_token("session", session.pk))
    run_id = token.run(_own_experiment(token, "session-tracked"))
    assert Run.objects.get(run_id=run_id).session == session
    _refused(token.post("experiments/create", {"name": "job-pytorch-train"}, status=403))
    job_token = Mlflow(tracking_token("job", job.pk))
    _refused(job_token.post("runs/set-tag", {"run_id": run_id, "key": "k", "value": "v"}, status=403))
