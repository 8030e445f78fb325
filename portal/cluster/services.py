"""The cluster snapshot: one `sinfo` and one `squeue` for the whole cluster, stored for everybody.

The poll cycle that calls this (and hands the queue on to jobs and servers) is `portal.poll.cycle`."""

import logging
from collections import Counter, defaultdict

from django.db import transaction

from portal.cluster.models import Node, Partition, PartitionGpu, PollStatus, SlurmJob
from portal.lifecycle.work import db_now
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import NodeInPartition, QueuedJob
from slurm.states import is_pending, is_running

logger = logging.getLogger(__name__)


def cluster_refresh(*, slurm: Slurm) -> tuple[PollStatus, list[QueuedJob] | None]:
    """Ask Slurm once for the cluster's state (one `sinfo`, one `squeue`) and store it.

    Returns the status and this cycle's queue, or None for the queue when Slurm did not answer
    (the last snapshot stays, marked stale by its age). Malformed rows were skipped by the parser
    and are counted here, for the admin page."""
    status = PollStatus.get()
    status.checked_at = db_now()  # the clock leases and lookups are compared on (portal.lifecycle)
    try:
        nodes = slurm.nodes()
        queue = slurm.queue(finished=True)
    except SlurmError as error:
        logger.warning("Slurm poll failed: %s", error.message)
        status.error = error.message or "Slurm did not answer."
        status.save(update_fields=["checked_at", "error"])
        return status, None
    cluster_snapshot_store(nodes=nodes.rows, queue=queue.rows)
    status.refreshed_at = status.checked_at
    status.error = ""
    status.malformed_rows = nodes.malformed + queue.malformed
    status.malformed_total += status.malformed_rows
    status.save()
    return status, queue.rows


def cluster_queue_refresh(*, slurm: Slurm, cluster: str) -> tuple[PollStatus, list[QueuedJob] | None]:
    """A cluster other than the default one (#38): its queue (one `squeue`), for its jobs, and its
    own status row; None for the queue when it did not answer. The stored partitions and nodes stay
    the default cluster's (cluster_refresh)."""
    status = PollStatus.get(cluster)
    status.checked_at = db_now()
    try:
        queue = slurm.queue(finished=True)
    except SlurmError as error:
        logger.warning("Slurm poll of %s failed: %s", cluster, error.message)
        status.error = error.message or "Slurm did not answer."
        status.save()
        return status, None
    status.refreshed_at, status.error = status.checked_at, ""
    status.malformed_rows = queue.malformed
    status.malformed_total += queue.malformed
    status.save()
    return status, queue.rows


@transaction.atomic
def cluster_snapshot_store(*, nodes: list[NodeInPartition], queue: list[QueuedJob]) -> None:
    """Replace the stored partitions, nodes and queue with what Slurm just said."""
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
    Partition.objects.exclude(name__in=by_partition).delete()
    PartitionGpu.objects.all().delete()
    Node.objects.all().delete()
    gpu_rows = []
    for name, rows in by_partition.items():
        partition, _ = Partition.objects.update_or_create(name=name, defaults={
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
    SlurmJob.objects.all().delete()
    SlurmJob.objects.bulk_create(
        SlurmJob(
            job_id=job.job_id, user=job.user, partition=job.partition, state=job.state,
            reason=job.reason[:128], gpus=job.gpus, nodes=job.nodes[:256],
            start_time=job.start_time, end_time=job.end_time,
            time_limit=job.time_limit, name=job.name[:256], comment=job.comment[:256],
        )
        for job in queue
    )

