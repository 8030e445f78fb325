"""prometheus_client collectors: what one scrape of /metrics reads. Nothing is kept in the process:
the GPU gauges come from the database, the request and task counters from Redis, each time."""

import logging
from collections import defaultdict
from collections.abc import Iterator

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from portal.metrics.selectors import GpuGroup, Key, gpu_usage
from portal.metrics.store import LATENCY_BUCKETS, counts_read

logger = logging.getLogger(__name__)
MIB = 1024 * 1024


class GpuCollector(Collector):
    """Gauges per partition and per node (labels: partition, node; never a job or a user), so the
    number of series is set by the cluster, not by how many jobs there were. Where several clusters
    are configured (#38), a `cluster` label too; a one-cluster site's series are as before."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        usage = gpu_usage()
        minutes = int(usage.window.total_seconds() // 60)
        for scope, groups in (("partition", usage.partitions), ("node", usage.nodes)):
            yield from _gpu_families(scope, groups, minutes, several=usage.several)


def _gpu_families(scope: str, groups: dict[Key, GpuGroup], minutes: int, *,
                  several: bool) -> Iterator[GaugeMetricFamily]:
    prefix = f"gpuportal_{scope}_gpus"
    labels = ["cluster", scope] if several else [scope]
    families = {
        "total": GaugeMetricFamily(prefix, f"GPUs of the {scope} in the cluster snapshot", labels=labels),
        "allocated": GaugeMetricFamily(f"{prefix}_allocated", f"GPUs of the {scope} Slurm has allocated",
                                       labels=labels),
        "sampled": GaugeMetricFamily(
            f"{prefix}_sampled", f"GPUs of the {scope} held by running jobs and sessions that sent samples "
                                 f"in the last {minutes} minutes", labels=labels),
        "busy": GaugeMetricFamily(
            f"{prefix}_busy", f"Sampled GPUs of the {scope} whose mean utilisation over the last {minutes} "
                              "minutes is at least METRICS_GPU_BUSY_PERCENT", labels=labels),
        "util": GaugeMetricFamily(
            f"gpuportal_{scope}_gpu_utilization_percent",
            f"Mean utilisation of the {scope}'s sampled GPUs over the last {minutes} minutes "
            "(absent when none was sampled)", labels=labels),
        "memory": GaugeMetricFamily(
            f"gpuportal_{scope}_gpu_memory_used_bytes",
            f"Memory used on the {scope}'s sampled GPUs: each GPU's highest in the last {minutes} minutes, "
            "summed", labels=labels),
    }
    for (cluster, name), group in sorted(groups.items()):
        values = [cluster, name] if several else [name]
        families["total"].add_metric(values, group.total)
        families["allocated"].add_metric(values, group.allocated)
        families["sampled"].add_metric(values, group.sampled)
        families["busy"].add_metric(values, group.busy)
        if group.util_mean is not None:
            families["util"].add_metric(values, round(group.util_mean, 2))
        families["memory"].add_metric(values, group.memory_used_mib * MIB)
    yield from families.values()


class CountsCollector(Collector):
    """Requests (route pattern, method, status class), their latency, and Celery tasks (name, state),
    as every process counted them in Redis. Without Redis these families are left out of the scrape,
    which still answers (`gpuportal_metrics_store_up` says so)."""

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        up = GaugeMetricFamily("gpuportal_metrics_store_up",
                               "1 when the request and task counters could be read from Redis")
        try:
            counts = counts_read()
        except redis.RedisError as error:
            logger.warning("metrics store unreadable: %s", error)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        requests = CounterMetricFamily("gpuportal_http_requests", "HTTP requests the portal answered",
                                       labels=["route", "method", "status"])
        for (route, method, status), count in sorted(counts.requests.items()):
            requests.add_metric([route, method, status], count)
        yield requests
        yield _latency(counts.latency_buckets, counts.latency_sum)
        tasks = CounterMetricFamily("gpuportal_celery_tasks", "Celery tasks that ran, by final state",
                                    labels=["task", "state"])
        for (task, state), count in sorted(counts.tasks.items()):
            tasks.add_metric([task, state], count)
        yield tasks


def _latency(buckets: dict[tuple[str, ...], int],
             sums: dict[tuple[str, ...], float]) -> HistogramMetricFamily:
    family = HistogramMetricFamily("gpuportal_http_request_duration_seconds",
                                   "Time from the request's arrival to the response, whole middleware stack",
                                   labels=["route", "method"])
    per_series: dict[tuple[str, str], dict[str, int]] = defaultdict(dict)
    for (route, method, bound), count in buckets.items():
        per_series[(route, method)][bound] = count
    for (route, method), counted in sorted(per_series.items()):
        cumulative, rows = 0, []
        for bound in (*map(repr, LATENCY_BUCKETS), "+Inf"):
            cumulative += counted.get(bound, 0)
            rows.append((bound, cumulative))
        family.add_metric([route, method], rows, sum_value=sums.get((route, method), 0.0))
    return family


def registry() -> CollectorRegistry:
    """A registry of the portal's own collectors only (no process or platform collectors: the scrape
    answers from one gunicorn worker of several, whose own figures would say little)."""
    portal = CollectorRegistry(auto_describe=False)
    portal.register(GpuCollector())
    portal.register(CountsCollector())
    return portal
