"""The cluster snapshot: one `sinfo` and one `squeue` per cluster, stored for everybody.

The poll cycle that calls this (and hands the queue on to jobs and servers) is `portal.poll.cycle`."""

import logging
from collections import Counter, defaultdict

from django.db import transaction

from portal.cluster.models import Node, Partition, PartitionGpu, PollStatus, SlurmJob, default_cluster
from portal.lifecycle.work import db_now
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import NodeInPartition, QueuedJob
from slurm.states import is_pending, is_running

logger = logging.getLogger(__name__)


def cluster_refresh(*, slurm: Slurm, cluster: str | None = None
                    ) -> tuple[PollStatus, list[QueuedJob] | None]:
    """Ask Slurm once for the cluster's state (one `sinfo`, one `squeue`) and store it.

    `cluster` None is the default cluster (PollStatus row 1); another cluster's cycle (#38) stores
    its own snapshot under its name and keeps its own status row, the same two commands. Returns the
    status and this cycle's queue, or None for the queue when Slurm did not answer (the last
    snapshot stays, marked stale by its age). Malformed rows were skipped by the parser and are
    counted here, for the admin page."""
    status = PollStatus.get(cluster or "")
    status.checked_at = db_now()  # the clock leases and lookups are compared on (portal.lifecycle)
    try:
        nodes = slurm.nodes()
        queue = slurm.queue(finished=True)
    except SlurmError as error:
        logger.warning("Slurm poll of %s failed: %s", cluster or "the default cluster", error.message)
        status.error = error.message or "Slurm did not answer."
        # Another cluster's row may not exist yet: its first cycle creates it.
        status.save(update_fields=None if status._state.adding else ["checked_at", "error"])
        return status, None
    cluster_snapshot_store(cluster=cluster or default_cluster(), nodes=nodes.rows, queue=queue.rows)
    status.refreshed_at = status.checked_at
    status.error = ""
    status.malformed_rows = nodes.malformed + queue.malformed
    status.malformed_total += status.malformed_rows
    status.save()
    return status, queue.rows


@transaction.atomic
def cluster_snapshot_store(*, cluster: str, nodes: list[NodeInPartition], queue: list[QueuedJob]) -> None:
    """Replace `cluster`'s stored partitions, nodes and queue with what its Slurm just said; other
    clusters' rows stay."""
    # Slurm's many running and waiting states (CONFIGURING, COMPLETING, REQUEUED...) counted as such.
    running = Counter(job.partition for job in queue if is_running(job.state))
    pending = Counter(job.partition for job in queue if is_pending(job.state))
    by_partition: dict[str, list[NodeInPartition]] = defaultdict(list)
    by_node: dict[str, list[NodeInPartition]] = defaultdict(list)
    for row in nodes:
        by_partition[row.partition].append(row)
        by_node[row.node].append(row)

    # Partitions are updated in place (their ids stay stable for whoever refers to them);
    # GPU rows, nodes and the queue are small and simply replaced.
    Partition.every_cluster.filter(cluster=cluster).exclude(name__in=by_partition).delete()
    PartitionGpu.objects.filter(partition__cluster=cluster).delete()
    Node.every_cluster.filter(cluster=cluster).delete()
    gpu_rows = []
    for name, rows in by_partition.items():
        partition, _ = Partition.every_cluster.update_or_create(cluster=cluster, name=name, defaults={
            "is_default": rows[0].is_default_partition,
            "max_time": rows[0].partition_max_time,
            "node_count": len(rows),
            "cpus_total": sum(row.cpus_total for row in rows),
            "cpus_allocated": sum(row.cpus_allocated for row in rows),
            "running_jobs": running[name],
            "pending_jobs": pending[name],
        })
        totals: dict[str, PartitionGpu] = {}
        for row in rows:
            for gpu_type, count in row.gpus.items():
                gpu = totals.setdefault(gpu_type, PartitionGpu(partition=partition, gpu_type=gpu_type))
                gpu.total += count
                used = row.gpus_used.get(gpu_type, 0)
                gpu.allocated += used
                if not row.usable:
                    gpu.unavailable += count - used
        gpu_rows.extend(totals.values())
    PartitionGpu.objects.bulk_create(gpu_rows)
    Node.objects.bulk_create(
        Node(
            cluster=cluster,
            name=name,
            state=rows[0].state,
            partitions=[row.partition for row in rows],
            cpus_total=rows[0].cpus_total,
            cpus_allocated=rows[0].cpus_allocated,
            memory_mb=rows[0].memory_mb,
            memory_allocated_mb=rows[0].memory_allocated_mb,
            gpus=rows[0].gpus,
            gpus_used=rows[0].gpus_used,
        )
        for name, rows in by_node.items()
    )
    SlurmJob.every_cluster.filter(cluster=cluster).delete()
    SlurmJob.objects.bulk_create(
        SlurmJob(
            cluster=cluster, job_id=job.job_id, user=job.user, partition=job.partition, state=job.state,
            reason=job.reason[:128], gpus=job.gpus, nodes=job.nodes[:256],
            start_time=job.start_time, end_time=job.end_time,
            time_limit=job.time_limit, name=job.name[:256], comment=job.comment[:256],
        )
        for job in queue
    )

