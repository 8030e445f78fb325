"""What an extension applies to: a running session or job of the user's, with its current limit."""

from dataclasses import dataclass

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.cluster.models import SlurmJob
from portal.extensions.models import ExtensionRequest
from portal.jobs.models import Job, JobState
from portal.sessions.models import Session
from slurm.states import RUNNING as SLURM_RUNNING


@dataclass(frozen=True)
class Target:
    kind: str  # ExtensionRequest.Target
    name: str
    slurm_job_id: str
    partition: str
    limit_minutes: int
    running: bool
    job: Job | None = None
    server: Session | None = None
    cluster: str = ""  # the cluster its Slurm job runs on (#38): its id is that cluster's


def session_target(*, user: User, name: str, lock: bool = False) -> Target | None:
    """The user's active session `name`; running: Slurm runs its job."""
    servers = Session.objects.filter(user=user, name=name, ended_at__isnull=True)
    server = (servers.select_for_update() if lock else servers).first()
    if server is None:
        return None
    # Started: as the spawner reported it, or as the last poll saw it, whichever came first.
    running = bool(server.job_id) and (server.started_at is not None or SlurmJob.every_cluster.filter(
        cluster=server.cluster, job_id=server.job_id, state__in=SLURM_RUNNING).exists())
    return Target(kind=ExtensionRequest.Target.SESSION, name=server.name, slurm_job_id=server.job_id,
                  partition=server.partition, limit_minutes=round(server.hours * 60), running=running,
                  server=server, cluster=server.cluster)


def job_target(*, user: User, job_id: int, lock: bool = False) -> Target | None:
    """The user's own job (admins too get only their own: extending is the owner's call)."""
    jobs = Job.objects.filter(user=user, pk=job_id)
    job = (jobs.select_for_update() if lock else jobs).first()
    if job is None:
        return None
    return Target(kind=ExtensionRequest.Target.JOB, name=str(job.pk), slurm_job_id=job.slurm_job_id,
                  partition=job.partition, limit_minutes=int(job.time_limit.total_seconds() // 60),
                  running=job.state == JobState.RUNNING and bool(job.slurm_job_id), job=job,
                  cluster=job.cluster)


def extension_list(*, user: User) -> QuerySet[ExtensionRequest]:
    return ExtensionRequest.objects.filter(user=user)
