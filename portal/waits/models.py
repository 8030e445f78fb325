from collections.abc import Callable

from django.db import models

from portal.cluster.models import DefaultClusterManager, default_cluster
from portal.waits.reasons import reason_text

# An account's project name and GPU-hour budget, for a spent budget's words. The projects app, which
# sits above this one (it reads the fair shares and the queue kept here), registers it when ready.
AccountBudget = Callable[[str], tuple[str, float | None] | None]
_account_budget: AccountBudget | None = None


def account_budget_register(lookup: AccountBudget) -> None:
    global _account_budget
    _account_budget = lookup


class Waiting(models.Model):
    """Why one pending Slurm job waits, as of the last poll cycle: one row per job Slurm holds
    pending (anybody's: the position counts them all), replaced every cycle, gone once it left
    pending. Jobs, sessions and apps find theirs by Slurm job id, on their cluster: each cluster's
    cycle (#38) replaces its own rows; `objects` reads the default cluster's, `every_cluster` all."""

    # Slurm's ClusterName of the cluster whose cycle wrote it: its Slurm id and rank are that one's.
    cluster = models.CharField(max_length=40, default=default_cluster)
    job_id = models.CharField(max_length=32)
    user = models.CharField(max_length=64)
    account = models.CharField(max_length=64, blank=True)
    partition = models.CharField(max_length=64, help_text="Where it ranks best, of those it asked for")
    reason = models.CharField(max_length=500, blank=True, help_text="As squeue prints it")
    estimated_start = models.DateTimeField(null=True, blank=True, help_text="squeue --start; null: not known")
    position = models.PositiveIntegerField(
        null=True, blank=True, help_text="1 = next of the partition's jobs that may start now, by priority")
    pending_in_partition = models.PositiveIntegerField(null=True, blank=True)
    # sprio's weighted factors; null where sprio lists no such job (held, --begin, dependency).
    priority_total = models.PositiveBigIntegerField(null=True, blank=True)
    priority_age = models.PositiveBigIntegerField(null=True, blank=True)
    priority_fairshare = models.PositiveBigIntegerField(null=True, blank=True)
    priority_jobsize = models.PositiveBigIntegerField(null=True, blank=True)
    priority_partition = models.PositiveBigIntegerField(null=True, blank=True)
    priority_qos = models.PositiveBigIntegerField(null=True, blank=True)
    fairshare = models.FloatField(null=True, blank=True, help_text="sshare's FairShare of its association")
    updated_at = models.DateTimeField()

    every_cluster = models.Manager()
    objects = DefaultClusterManager()

    class Meta:
        default_manager_name = "objects"
        constraints = [models.UniqueConstraint(fields=["cluster", "job_id"], name="uniq_waiting_cluster")]

    def __str__(self) -> str:
        return f"{self.job_id} ({self.reason or 'pending'})"

    @property
    def reason_text(self) -> str:
        # Only a spent budget's words name the project: no query for any other reason.
        spent = self.reason.startswith("AssocGrpGRESMinutes") and self.account
        budget = _account_budget(self.account) if spent and _account_budget else None
        if budget is None:
            return reason_text(self.reason)
        project, hours = budget
        return reason_text(self.reason, project=project, budget_gpu_hours=hours)

    @property
    def priority(self) -> dict[str, int] | None:
        if self.priority_total is None:
            return None
        return {"age": self.priority_age, "fairshare": self.priority_fairshare,
                "jobsize": self.priority_jobsize, "partition": self.priority_partition,
                "qos": self.priority_qos, "total": self.priority_total}


class FairShareRow(models.Model):
    """A user's fair-share factor in one account, from the poll cycle's `sshare` (the one it runs
    for why-waiting): replaced whenever that runs, so the forms can say which project would start a
    job sooner without asking Slurm. Kept as they were while nothing is pending (no sshare then)."""

    account = models.CharField(max_length=64)
    user = models.CharField(max_length=64)
    fairshare = models.FloatField(help_text="0..1, what sprio weighs; 1: little used lately")
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["account", "user"],
                                               name="fairshare_one_per_association")]

    def __str__(self) -> str:
        return f"{self.user} in {self.account}: {self.fairshare:.3f}"
