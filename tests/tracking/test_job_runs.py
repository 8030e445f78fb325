"""A job is a run (portal.tracking.job_runs): the mapping from a job to its MLflow run, without Slurm.
The real job, through sbatch and the real MLflow client, is in test_mlflow_in_job_real.py."""

import subprocess
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import transaction

from portal.benchmarks.models import BenchmarkResult
from portal.jobs.models import Job, JobMetric, JobState
from portal.jobs.services.batch import jobs_store
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_cancel, job_create, jobs_report_environments
from portal.jobs.signals import jobs_changed
from portal.tokens.tracking import tracking_token
from portal.tracking.job_runs import job_run_end, job_run_params, job_runs_create, job_runs_follow
from portal.tracking.models import Experiment, LatestMetric, LifecycleStage, Metric, Run, RunStatus
from portal.tracking.services import log_batch
from tests.factories import JobFactory, UserFactory
from tests.security.conftest import as_portal

pytestmark = pytest.mark.django_db
GIT_COMMIT_SH = Path(__file__).parents[2] / "templates" / "jobs" / "_common" / "git_commit.sh"


def _job(**parameters):
    user = UserFactory(username="alice")
    draft = job_prepare(user=user, template="custom", name="lr sweep by hand",
                        parameters={"commands": "python train.py", "gpus": 0, "time_limit": 5, **parameters})
    return user, draft


def test_a_stored_job_is_a_scheduled_run_with_its_parameters_resources_and_tags(partitions):
    user, draft = _job()
    job = job_create(user=user, draft=draft)
    run = Run.objects.get(job=job)
    assert run.run_id == job.uuid.hex and run.owner == user and run.run_name == "lr sweep by hand"
    assert run.status == RunStatus.SCHEDULED and run.end_time is None
    assert run.experiment.name == "job-custom" and run.artifact_uri.startswith("file:///home/alice/")
    params = {p.key: p.value for p in run.params.all()}
    assert params["commands"] == "python train.py" and params["gpus"] == "0" and params["time_limit"] == "5"
    assert params["slurm.partition"] == job.partition and params["slurm.gpus_per_node"] == "0"
    assert params["slurm.time_limit_minutes"] == "5" and params["slurm.nodes"] == "1"
    assert {"slurm.cpus_per_node", "slurm.mem_mb_per_node"} <= set(params)
    tags = {t.key: t.value for t in run.tags.all()}
    assert tags["mlflow.runName"] == "lr sweep by hand" and tags["mlflow.user"] == "alice"
    assert tags["gpuportal.template"] == "custom" and tags["slurm.partition"] == job.partition
    assert "slurm.job_id" not in tags  # not before sbatch answers
    environment = jobs_report_environments(jobs=[job])[job.pk]
    assert environment["MLFLOW_RUN_ID"] == run.run_id
    assert environment["MLFLOW_EXPERIMENT_NAME"] == "job-custom"
    assert environment["MLFLOW_TRACKING_TOKEN"]

    second = job_create(user=user, draft=replace(draft, uuid=uuid.uuid4()))
    assert Run.objects.get(job=second).experiment == run.experiment  # one experiment per template


def test_a_batch_of_jobs_is_a_batch_of_runs_in_one_experiment(partitions, django_assert_max_num_queries):
    user, draft = _job()
    drafts = [(replace(draft, uuid=uuid.uuid4(), name=f"job {i}"), None) for i in range(20)]
    with transaction.atomic(), django_assert_max_num_queries(12):
        jobs = jobs_store(user=user, drafts=drafts)
    runs = Run.objects.filter(job__in=jobs)
    assert sorted(run.run_name for run in runs) == sorted(f"job {i}" for i in range(20))
    assert {run.experiment.name for run in runs} == {"job-custom"} and Experiment.objects.count() == 1
    assert all(run.params.filter(key="slurm.partition").exists() for run in runs)


def test_a_job_cancelled_before_slurm_is_a_killed_run(partitions, django_capture_on_commit_callbacks):
    user, draft = _job()
    job = job_create(user=user, draft=draft)
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(job=job)
    run = Run.objects.get(job=job)
    assert run.status == RunStatus.KILLED and run.end_time == int(job.ended_at.timestamp() * 1000)


def test_the_portals_account_may_hand_sbatch_every_variable_a_job_gets(partitions):
    """The bed's and a site's portal run as their own account (tests run as root): sudo must keep
    every name a job's sbatch is handed (deploy/sudoers.d/gpuportal), or Slurm never sees the job."""
    user, draft = _job()
    job = job_create(user=user, draft=draft)
    environment = jobs_report_environments(jobs=[job])[job.pk]
    assert {"MLFLOW_RUN_ID", "MLFLOW_TRACKING_TOKEN", "GPUPORTAL_REPORT_TOKEN"} <= set(environment)
    # As slurm/runner.py hands them: by name through sudo (--preserve-env), in the environment.
    result = as_portal("/usr/bin/sudo", "-n", f"--preserve-env={','.join(environment)}", "-u", "alice",
                       "--", "/usr/bin/sbatch", "--version", env={"PATH": "/usr/bin:/bin", **environment})
    assert result.returncode == 0, result.stderr


def test_an_array_job_gets_no_run_so_each_task_makes_its_own(partitions):
    user, draft = _job()
    lines = draft.script.split("\n")
    script = "\n".join([lines[0], "#SBATCH --array=0-3%2", *lines[1:]])
    job = job_create(user=user, draft=replace(draft, script=script))
    assert not Run.objects.filter(job=job).exists()
    assert "MLFLOW_RUN_ID" not in jobs_report_environments(jobs=[job])[job.pk]
    assert "MLFLOW_TRACKING_TOKEN" in jobs_report_environments(jobs=[job])[job.pk]


def test_a_deleted_job_experiment_is_not_revived(partitions):
    user, draft = _job()
    Experiment.objects.create(owner=user, name="job-custom", lifecycle_stage=LifecycleStage.DELETED,
                              artifact_location="file:///home/alice/x", creation_time=1, last_update_time=1)
    job = job_create(user=user, draft=draft)
    assert not Run.objects.filter(job=job).exists()
    assert "MLFLOW_RUN_ID" not in jobs_report_environments(jobs=[job])[job.pk]


def test_params_are_text_within_mlflows_limits():
    job = JobFactory.build(user=UserFactory.build(username="alice"),
                           parameters={"smoke": True, "args": "x" * 7000, "bad key!": 1, "ids": [1, 2]})
    params = job_run_params(job)
    assert params["smoke"] == "true" and params["ids"] == "[1, 2]" and len(params["args"]) == 6000
    assert "bad key!" not in params


def _running_job():
    job = JobFactory(state=JobState.PENDING, slurm_job_id="", ended_at=None)
    [run] = job_runs_create(jobs=[job])
    return job, run


def test_the_run_follows_the_jobs_state():
    job, run = _running_job()
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    job.state, job.started_at, job.slurm_job_id = JobState.RUNNING, started, "4242"
    job.save()
    assert job_runs_follow(job_ids=[job.pk]) == 1
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and run.start_time == int(started.timestamp() * 1000)
    assert run.tags.get(key="slurm.job_id").value == "4242"

    Run.objects.filter(pk=run.pk).update(status=RunStatus.FINISHED)  # the job's client ended it
    assert job_runs_follow(job_ids=[job.pk]) == 0  # a live job does not reopen it

    job.state, job.ended_at = JobState.OUT_OF_MEMORY, started + timedelta(minutes=3)
    job.save()
    job_runs_follow(job_ids=[job.pk])
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED and run.end_time == int(job.ended_at.timestamp() * 1000)


def test_the_first_sbatchs_own_task_follows_at_once_and_the_poll_cycle_enqueues(monkeypatch):
    job, run = _running_job()
    job.slurm_job_id = "4243"
    job.save()
    queued = []
    monkeypatch.setattr("portal.tracking.tasks.job_runs_follow_task.delay", queued.append)
    jobs_changed.send(sender=Job, job_ids=[job.pk], in_task=True)  # as jobs_sbatch sends it
    assert not queued and run.tags.get(key="slurm.job_id").value == "4243"
    assert Run.objects.get(pk=run.pk).status == RunStatus.SCHEDULED
    assert job_runs_follow(job_ids=[job.pk]) == 0  # nothing to move: a pending job's run is SCHEDULED
    jobs_changed.send(sender=Job, job_ids=[job.pk])  # as the poll cycle sends it: another task's work
    assert queued == [[job.pk]]
    job.slurm_job_id = "4244"  # submitted again (e.g. requeued under a new id): the one tag follows
    job.save()
    job_runs_follow(job_ids=[job.pk])
    assert list(run.tags.filter(key="slurm.job_id").values_list("value", flat=True)) == ["4244"]


@pytest.mark.parametrize(("state", "status"), [(JobState.COMPLETED, RunStatus.FINISHED),
                                               (JobState.CANCELLED, RunStatus.KILLED),
                                               (JobState.TIMEOUT, RunStatus.FAILED),
                                               (JobState.REJECTED, RunStatus.FAILED)])
def test_an_ended_jobs_state_is_the_runs_last_word(state, status):
    job, run = _running_job()
    job.state, job.ended_at = state, datetime(2026, 1, 2, tzinfo=UTC)
    job.save()
    job_runs_follow(job_ids=[job.pk])
    run.refresh_from_db()
    assert run.status == status


def test_a_run_the_jobs_client_made_is_left_to_it():
    job, _ = _running_job()
    other = Run.objects.create(run_id="f" * 32, experiment=Experiment.objects.get(), owner=job.user,
                               run_name="mine", start_time=1, artifact_uri="file:///x", job=job)
    job.state, job.ended_at = JobState.FAILED, datetime(2026, 1, 2, tzinfo=UTC)
    job.save()
    job_runs_follow(job_ids=[job.pk])
    other.refresh_from_db()
    assert other.status == RunStatus.RUNNING


def test_at_its_end_the_run_gets_tensorboard_and_benchmark_metrics_it_did_not_log_live():
    job, run = _running_job()
    job.state, job.ended_at = JobState.COMPLETED, datetime(2026, 1, 2, tzinfo=UTC)
    job.save()
    log_batch(user=job.user, run_id=run.run_id, params=[], tags=[],
              metrics=[{"key": "loss", "value": 0.5, "timestamp": 5, "step": 1}])
    JobMetric.objects.create(job=job, run="", tag="loss", steps=[0, 1], values=[0.9, 0.5])
    JobMetric.objects.create(job=job, run="", tag="accuracy", steps=[0, 1, 2], values=[0.5, None, 0.9])
    JobMetric.objects.create(job=job, run="eval", tag="top 1 (%)", steps=[2], values=[97.0])
    BenchmarkResult.objects.create(tool="nccl", case="all_reduce", metric="busbw_gb_s", value=180.5,
                                   user=job.user, job=job)
    BenchmarkResult.objects.create(tool="nccl", metric="x", value=None, parsed=False, user=job.user, job=job)

    assert job_run_end(job_id=job.pk) == 4
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    latest = dict(LatestMetric.objects.filter(run=run).values_list("key", "value"))
    assert latest == {"loss": 0.5, "accuracy": 0.9, "eval/top 1 _": 97.0,
                      "benchmark/all_reduce/busbw_gb_s": 180.5}
    assert Metric.objects.filter(run=run, key="loss").count() == 1  # logged live: not duplicated
    assert list(Metric.objects.filter(run=run, key="accuracy").values_list("step", "value")) == \
        [(0, 0.5), (2, 0.9)]
    assert job_run_end(job_id=job.pk) == 0  # a retried task adds nothing


@pytest.mark.django_db(transaction=True)
def test_the_job_script_tags_its_run_with_the_scripts_git_commit(live_server, tmp_path):
    """templates/jobs/_common/git_commit.sh as the training templates call it, against this portal:
    git as whoever runs the job, the tag through the MLflow API with the job's own token."""
    job = JobFactory(state=JobState.RUNNING, ended_at=None)
    [run] = job_runs_create(jobs=[job])
    repo = tmp_path / "repo"
    git = ["git", "-c", "user.email=a@example.org", "-c", "user.name=a"]
    subprocess.run([*git, "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    environment = {"PATH": "/usr/bin:/bin", "MLFLOW_TRACKING_URI": live_server.url,
                   "MLFLOW_TRACKING_TOKEN": tracking_token("job", job.pk), "MLFLOW_RUN_ID": run.run_id}
    call = f'set -euo pipefail; source {GIT_COMMIT_SH}; gpuportal_git_commit "$1"'
    for script in (tmp_path / "elsewhere" / "train.py", repo / "train.py"):  # no repository: no tag
        subprocess.run(["bash", "-c", call, "bash", str(script)], env=environment, check=True, timeout=30)
    assert run.tags.get(key="mlflow.source.git.commit").value == commit
