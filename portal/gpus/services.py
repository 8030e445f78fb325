"""Recording what the GPU sampler of a batch job or of a notebook session's job pushes
(portal.reports hands the samples over, after checking that job's or session's own report token).
Writes only: reads are in portal.gpus.selectors."""

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from portal.gpus.models import GpuPoint, GpuSummary
from portal.jobs.models import IN_SLURM_STATES, Job
from portal.sessions.models import Session

# Energy is power integrated over the time between two samples of a GPU; a longer gap than this
# (the sampler stopped, pushes lost) counts nothing rather than a guess.
ENERGY_MAX_GAP_SECONDS = 600


@dataclass(frozen=True)
class GpuSample:
    t: float  # Unix time of the reading
    gpu: int  # nvidia-smi's index on the node
    util: float | None = None  # utilization.gpu, %
    mem_util: float | None = None  # utilization.memory, %
    mem_used_mib: float | None = None
    power_w: float | None = None


def _max(a: float | None, b: float | None) -> float | None:
    return b if a is None else a if b is None else max(a, b)


def gpu_samples_record(*, job_id: int, samples: Sequence[GpuSample], now: datetime | None = None) -> bool:
    """Merge samples into the job's 1-minute points and its summary; False (nothing changed) when
    the job does not exist or ended more than GPU_REPORT_GRACE_MINUTES ago. Samples from before
    the job was submitted are ignored. Keeps at most GPU_POINTS_PER_JOB points: the oldest go."""
    now = now or timezone.now()
    grace = now - timedelta(minutes=settings.GPU_REPORT_GRACE_MINUTES)
    job = (Job.objects.filter(pk=job_id).filter(Q(state__in=IN_SLURM_STATES) | Q(ended_at__gte=grace))
           .only("pk", "submitted_at").first())
    if job is None:
        return False
    return _record({"job_id": job_id}, since=job.submitted_at, samples=samples)


def session_gpu_samples_record(*, server_id: int, samples: Sequence[GpuSample],
                               now: datetime | None = None) -> bool:
    """The same for a notebook session: False when the session does not exist or ended more than
    GPU_REPORT_GRACE_MINUTES ago; samples from before it was asked for are ignored."""
    now = now or timezone.now()
    grace = now - timedelta(minutes=settings.GPU_REPORT_GRACE_MINUTES)
    server = (Session.objects.filter(pk=server_id)
              .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=grace)).only("pk", "created_at").first())
    if server is None:
        return False
    return _record({"session_id": server_id}, since=server.created_at, samples=samples)


def _record(owner: dict[str, int], *, since: datetime, samples: Sequence[GpuSample]) -> bool:
    earliest = since.timestamp() - 60
    kept = sorted((s for s in samples if s.t >= earliest), key=lambda s: (s.t, s.gpu))
    if not kept:
        return False
    with transaction.atomic():
        locked = GpuSummary.objects.select_for_update()  # one push at a time per job or session
        summary = locked.filter(**owner).first()
        if summary is None:  # the first push (get_or_create settles a race of two first pushes)
            GpuSummary.objects.get_or_create(**owner)
            summary = locked.get(**owner)
        _summary_add(summary, kept)
        summary.save()
        _points_add(owner, kept)
    return True


def _summary_add(summary: GpuSummary, samples: Sequence[GpuSample]) -> None:
    last = dict(summary.last)
    for s in samples:
        summary.samples += 1
        if s.util is not None:
            summary.util_sum += s.util
            summary.util_count += 1
        summary.util_max = _max(summary.util_max, s.util)
        summary.mem_used_max_mib = _max(summary.mem_used_max_mib, s.mem_used_mib)
        at = datetime.fromtimestamp(s.t, tz=UTC)
        summary.first_at = at if summary.first_at is None else min(summary.first_at, at)
        summary.last_at = at if summary.last_at is None else max(summary.last_at, at)
        before = last.get(str(s.gpu))
        if before is not None and s.t <= before["t"]:
            continue  # late or repeated: counted above, but neither an interval nor the current figure
        gap = s.t - before["t"] if before is not None else None
        if gap is not None and before["power_w"] is not None and gap <= ENERGY_MAX_GAP_SECONDS:
            summary.energy_wh += before["power_w"] * gap / 3600
        last[str(s.gpu)] = {"t": s.t, "util": s.util, "mem_util": s.mem_util, "mem_used_mib": s.mem_used_mib,
                            "power_w": s.power_w}
    summary.last = last


_POINT_SUMS = ["samples", "util_sum", "util_count", "util_max", "mem_util_sum", "mem_util_count",
               "mem_used_max_mib", "power_sum", "power_count"]


def _points_add(owner: dict[str, int], samples: Sequence[GpuSample]) -> None:
    by_key: dict[tuple[datetime, int], list[GpuSample]] = defaultdict(list)
    for s in samples:
        minute = datetime.fromtimestamp(s.t - s.t % 60, tz=UTC)
        by_key[(minute, s.gpu)].append(s)
    existing = {(p.minute, p.gpu): p for p in GpuPoint.objects.filter(
        **owner, minute__in={minute for minute, _ in by_key})}
    points, new_minute = [], False
    for (minute, gpu), group in by_key.items():
        point = existing.get((minute, gpu))
        if point is None:
            point = GpuPoint(**owner, minute=minute, gpu=gpu, util_max=None, mem_used_max_mib=None)
            new_minute = True
        point.pk = None  # merged here (under the summary's lock), written back by one upsert
        points.append(point)
        for s in group:
            point.samples += 1
            if s.util is not None:
                point.util_sum += s.util
                point.util_count += 1
            point.util_max = _max(point.util_max, s.util)
            if s.mem_util is not None:
                point.mem_util_sum += s.mem_util
                point.mem_util_count += 1
            point.mem_used_max_mib = _max(point.mem_used_max_mib, s.mem_used_mib)
            if s.power_w is not None:
                point.power_sum += s.power_w
                point.power_count += 1
    (owner_field,) = (name.removesuffix("_id") for name in owner)
    GpuPoint.objects.bulk_create(points, update_conflicts=True, unique_fields=[owner_field, "minute", "gpu"],
                                 update_fields=_POINT_SUMS)
    if not new_minute:
        return  # the bound can only be crossed by a new point
    kept = GpuPoint.objects.filter(**owner)
    extra = kept.count() - settings.GPU_POINTS_PER_JOB
    if extra > 0:
        oldest = list(kept.order_by("minute", "gpu").values_list("pk", flat=True)[:extra])
        GpuPoint.objects.filter(pk__in=oldest).delete()
