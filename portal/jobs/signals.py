"""What the jobs app tells the apps above it (metrics, benchmarks) without importing them."""

from django.dispatch import Signal

# Sent once per poll cycle, after the cycle's transaction commits, with `job_ids`: the portal ids of
# the jobs whose final state (COMPLETED, FAILED, ...) this cycle recorded. Receivers should only
# enqueue work (a Celery task): the poll cycle is shared by everybody.
jobs_ended = Signal()

# Sent by the service that stores jobs, inside its transaction, with `jobs`: the new Job rows.
# Receivers run synchronously and write in that transaction (portal.tracking makes each job's run).
jobs_created = Signal()

# Sent with `job_ids` (on commit) when a job's Slurm id, live state (PENDING, RUNNING, SUSPENDED) or
# rejection was just recorded: by the first sbatch, and by the poll cycle. Receivers only enqueue work,
# except with `in_task=True`: sent from the jobs' own Celery task (their first sbatch), where a
# receiver does its work at once rather than pay a second message and task for it.
jobs_changed = Signal()

# Sent with `jobs` just before their sbatch: each receiver returns {job id: variables} for the jobs'
# environments (portal.tracking: each job's MLflow run), leaving out the jobs it adds nothing to.
jobs_environment = Signal()
