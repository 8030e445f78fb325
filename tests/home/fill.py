"""Things of one user's for the home page, `n` of each kind, as the poll cycle and the services would
have left them (no Slurm behind them): used by the tests and by bench/home_page.py."""

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.utils import timezone

from portal.accounts.models import User
from portal.cluster.models import SlurmJob
from portal.extensions.models import ExtensionRequest
from portal.gpus.models import IdleWatch
from portal.jobs.models import Job, JobState
from portal.launches.models import Preset
from portal.projects.models import Project
from portal.sessions.models import Session
from portal.tracking.models import Experiment, Run, RunStatus
from portal.waits.models import Waiting
from portal.webapps.models import App, AppState
from tests.factories import AppFactory, JobFactory

TEMPLATES = ("custom", "pytorch-train", "resnet50-benchmark", "nccl-allreduce")


@dataclass
class Filled:
    running_sessions: list[Session]
    waiting_sessions: list[Session]
    running_apps: list[App]
    waiting_apps: list[App]
    running_jobs: list[Job]
    waiting_jobs: list[Job]
    failed_jobs: list[Job]
    extensions: list[ExtensionRequest]
    projects: list[Project]
    runs: list[Run]


def _slurm_id() -> str:
    return str(uuid.uuid4().int % 10**9)


def _waiting(job_id: str, user: User, reason: str = "Resources") -> Waiting:
    return Waiting.objects.create(job_id=job_id, user=user.username, partition="gpu", reason=reason,
                                  estimated_start=timezone.now() + timedelta(minutes=42), position=2,
                                  pending_in_partition=5, updated_at=timezone.now())


def home_fill(user: User, n: int, *, tag: str = "") -> Filled:
    """`n` of each: running and waiting sessions (the running ones warned for idle GPUs), apps and
    jobs; failed jobs, decided extensions, projects over 80 % of their budget, presets and runs."""
    now = timezone.now()
    prefix = f"{tag}{user.username}"
    running_sessions, waiting_sessions = [], []
    for number in range(n):
        job_id = _slurm_id()
        SlurmJob.objects.create(job_id=job_id, user=user.username, partition="gpu", state="RUNNING",
                                gpus=1, nodes="gpu-node1", start_time=now - timedelta(hours=1),
                                end_time=now + timedelta(hours=7))
        server = Session.objects.create(
            user=user, name=f"{prefix}-run-{number}"[:30], partition="gpu", gpus=1, hours=8, job_id=job_id,
            hub_accepted_at=now, started_at=now - timedelta(hours=1), ready_at=now - timedelta(hours=1),
            node="gpu-node1")
        IdleWatch.objects.create(session=server, state=IdleWatch.State.WARNED, warned_at=now,
                                 figures={"gpus": 1, "util_percent": 5, "idle_minutes": 30,
                                          "window_minutes": 30, "grace_minutes": 15, "util_max": 1})
        running_sessions.append(server)
        job_id = _slurm_id()
        _waiting(job_id, user)
        waiting_sessions.append(Session.objects.create(
            user=user, name=f"{prefix}-wait-{number}"[:30], partition="gpu", gpus=4, hours=8, job_id=job_id,
            hub_accepted_at=now, queued_at=now))
    running_apps = [AppFactory(user=user, state=AppState.READY, host="gpu-node1", port=8000,
                               slurm_job_id=_slurm_id(), started_at=now - timedelta(minutes=30))
                    for _ in range(n)]
    waiting_apps = []
    for _ in range(n):
        job_id = _slurm_id()
        _waiting(job_id, user, "Priority")
        waiting_apps.append(AppFactory(user=user, state=AppState.QUEUED, slurm_job_id=job_id))
    running_jobs = [JobFactory(user=user, name=f"train-{number}", template=TEMPLATES[number % len(TEMPLATES)],
                               state=JobState.RUNNING, started_at=now - timedelta(hours=2),
                               node_list="gpu-node1", slurm_job_id=_slurm_id()) for number in range(n)]
    waiting_jobs = []
    for number in range(n):
        job_id = _slurm_id()
        _waiting(job_id, user)
        waiting_jobs.append(JobFactory(user=user, name=f"queued-{number}", state=JobState.PENDING,
                                       slurm_job_id=job_id))
    for job in running_jobs[: max(n // 4, 1)]:
        IdleWatch.objects.create(job=job, state=IdleWatch.State.FLAGGED, warned_at=now, flagged_at=now)
    failed_jobs = [JobFactory(user=user, name=f"broken-{number}", state=JobState.FAILED, exit_code=1,
                              started_at=now - timedelta(hours=1), ended_at=now - timedelta(minutes=number))
                   for number in range(n)]
    extended = running_jobs[0]
    extensions = [ExtensionRequest.objects.create(
        user=user, target=ExtensionRequest.Target.JOB, target_name=str(extended.pk), job=extended,
        slurm_job_id=extended.slurm_job_id, minutes=60, state=ExtensionRequest.State.APPROVED,
        decided_at=now - timedelta(minutes=number)) for number in range(n)]
    group = f"{prefix}-group"
    user.ldap_groups = [*(user.ldap_groups or []), group]
    user.save(update_fields=["ldap_groups"])
    projects = [Project.objects.create(name=f"{prefix}-project-{number}", ldap_group=group,
                                       slurm_account=f"{prefix}p{number}"[:32], budget_gpu_hours=100,
                                       slurm_limit_gpu_minutes=6000, used_gpu_minutes=5400,
                                       usage_checked_at=now) for number in range(n)]
    for number in range(n):
        Preset.objects.create(user=user, kind=Preset.Kind.SESSION, name=f"preset-{number}",
                              values={"partition": "gpu", "gpus": 1, "hours": 2})
    experiment, _ = Experiment.objects.get_or_create(
        owner=user, name="Default", defaults={"artifact_location": "/tmp/mlruns", "creation_time": 0,
                                              "last_update_time": 0})
    start_ms = int(now.timestamp() * 1000)
    runs = [Run.objects.create(run_id=uuid.uuid4().hex, experiment=experiment, owner=user,
                               run_name=f"run-{number}", status=RunStatus.FINISHED,
                               start_time=start_ms - number * 1000, artifact_uri="/tmp/mlruns/x")
            for number in range(n)]
    return Filled(running_sessions, waiting_sessions, running_apps, waiting_apps, running_jobs, waiting_jobs,
                  failed_jobs, extensions, projects, runs)
