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
# rejection was just recorded: by the first sbatch, and by the poll cycle. Receivers only enqueue work.
jobs_changed = Signal()

# Sent with `job` just before its sbatch: each receiver returns a dict of variables for the job's
# environment (portal.tracking: the job's MLflow run), or an empty dict.
job_environment = Signal()
