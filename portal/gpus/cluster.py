"""The cluster's GPUs for admins: every GPU of every node (the poll cycle's node list), what holds it
now with its last sample, and a heat map of its utilisation per hour over the last days. From the
database only.

A job's or session's points are its first node's GPUs (the sampler runs beside the batch script,
or the notebook server, there). An hour's cell is the GPU's busy share of the hour: the sum of its
sampled minutes' mean utilisation over 60 minutes, so a minute nobody sampled (no job held the GPU)
counts as idle."""

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Count, F, FloatField, Q, Sum
from django.db.models.functions import Cast, TruncHour
from django.utils import timezone

from portal.cluster.models import Node
from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import IN_SLURM_STATES
from slurm.parsing import first_node

HEATMAP_DAYS = 7


@dataclass
class ClusterGpu:
    node: str
    index: int
    partitions: str
    node_state: str
    holder: str = ""  # "job 12 (alice)", "session nb (alice)"
    current: dict[str, Any] = field(default_factory=dict)  # the holder's last sample of this GPU

    @property
    def label(self) -> str:
        return f"{self.node} · GPU {self.index}"


def cluster_gpus() -> list[ClusterGpu]:
    """Every GPU by partition and node, with what holds it now (a running job's or session's last
    sample of it)."""
    gpus = {(node.name, index): ClusterGpu(node=node.name, index=index, partitions=", ".join(node.partitions),
                                          node_state=node.state)
            for node in Node.objects.order_by("name") for index in range(sum(node.gpus.values()))}
    held = Q(job__state__in=IN_SLURM_STATES) | Q(session__isnull=False, session__ended_at__isnull=True)
    running = GpuSummary.objects.filter(held).select_related("job__user", "session__user")
    for summary in running:
        if summary.job_id:
            node = first_node(summary.job.node_list)
            holder = f"job {summary.job_id} ({summary.job.user.username})"
        else:
            node = summary.session.node
            holder = f"session {summary.session.name} ({summary.session.user.username})"
        for index, last in summary.last.items():
            gpu = gpus.get((node, int(index)))
            if gpu is not None:
                gpu.holder = holder
                gpu.current = {**last, "t": datetime.fromtimestamp(last["t"], tz=UTC)}
    return sorted(gpus.values(), key=lambda gpu: (gpu.partitions, gpu.node, gpu.index))


def cluster_gpu_hours(*, now: datetime | None = None, days: int = HEATMAP_DAYS) -> list[dict[str, Any]]:
    """Per GPU (node, index) and hour of the last `days`: busy share of the hour in % and the
    minutes sampled. One grouped query over the points; the owners' nodes in the same rows."""
    now = now or timezone.now()
    since = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    grouped = (GpuPoint.objects.filter(minute__gte=since, util_count__gt=0)
               .annotate(hour=TruncHour("minute"))
               .values("hour", "gpu", "job__node_list", "session__node")
               .annotate(busy=Sum(F("util_sum") / Cast("util_count", FloatField())),
                         minutes=Count("id"))
               .order_by())
    cells: dict[tuple[str, int, datetime], list[float]] = defaultdict(lambda: [0.0, 0])
    for row in grouped:
        node = first_node(row["job__node_list"]) if row["job__node_list"] else row["session__node"]
        if node:
            cell = cells[(node, row["gpu"], row["hour"])]
            cell[0] += row["busy"] / 60  # % of the hour: each minute's mean % over 60 minutes
            cell[1] += row["minutes"]
    return [{"node": node, "gpu": gpu, "hour": hour, "util": round(min(busy, 100.0), 1), "minutes": minutes}
            for (node, gpu, hour), (busy, minutes) in sorted(cells.items())]


def cluster_heatmap_chart(*, gpus: list[ClusterGpu], hours: list[dict[str, Any]],
                          now: datetime | None = None, days: int = HEATMAP_DAYS) -> dict[str, Any]:
    """Vega-Lite rect chart: a row per GPU (every GPU, also those without a sample), a column per
    hour, colour the busy share of the hour."""
    now = now or timezone.now()
    labels = {(gpu.node, gpu.index): f"{gpu.partitions or '—'} · {gpu.label}" for gpu in gpus}
    rows = [{"gpu": labels[(cell["node"], cell["gpu"])], "hour": cell["hour"].isoformat(),
             "hour_end": (cell["hour"] + timedelta(hours=1)).isoformat(), "util": cell["util"],
             "minutes": cell["minutes"]} for cell in hours if (cell["node"], cell["gpu"]) in labels]
    start = (now - timedelta(days=days)).replace(minute=0, second=0, microsecond=0)
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "title": f"GPU utilisation per hour, last {days} days",
        "width": "container", "height": {"step": 14},
        "data": {"values": rows},
        # One cell per GPU-hour is noise to a screen reader (and an empty mark group has no name):
        # the figure is named by its title, the numbers are in its CSV.
        "mark": {"type": "rect", "aria": False},
        "encoding": {
            "x": {"field": "hour", "type": "temporal", "title": None,
                  "scale": {"domain": [start.isoformat(), now.isoformat()]},
                  "axis": {"format": "%a %d %H:00"}},
            "x2": {"field": "hour_end"},
            "y": {"field": "gpu", "type": "nominal", "title": None,
                  "scale": {"domain": list(labels.values())}},
            "color": {"field": "util", "type": "quantitative", "title": "busy %",
                      "scale": {"domain": [0, 100], "scheme": "yellowgreenblue"}},
            "tooltip": [{"field": "gpu", "title": "GPU"},
                        {"field": "hour", "type": "temporal", "format": "%Y-%m-%d %H:00"},
                        {"field": "util", "title": "busy % of the hour"},
                        {"field": "minutes", "title": "minutes sampled"}],
        },
    }
