"""The four efficiency figures of a record, as `seff` and `jobstats` compute them, and the one rule
for turning what was used into what to ask for next time (advice.py and the suggested resources
both round through here, so a page never suggests one value and the composer another)."""

import math
from dataclasses import dataclass

from portal.efficiency.models import Efficiency

MIB_PER_GIB = 1024


@dataclass(frozen=True)
class Figures:
    """Each used ÷ allocated, from 0 (None: unknown, never 0)."""

    cpu: float | None  # TotalCPU ÷ (Elapsed x AllocCPUS), seff's CPU efficiency
    memory: float | None  # peak RSS ÷ ReqMem, seff's memory efficiency
    gpu: float | None  # mean utilisation of every GPU sample ÷ 100
    time: float | None  # Elapsed ÷ Timelimit


def _ratio(used: float | None, allocated: float | None) -> float | None:
    if used is None or not allocated:
        return None
    return used / allocated


def efficiency_figures(record: Efficiency) -> Figures:
    return Figures(
        cpu=_ratio(record.cpu_seconds, record.elapsed_seconds * record.cpus),
        memory=_ratio(record.mem_peak_mb, record.mem_requested_mb),
        gpu=None if record.gpu_util_percent is None or not record.gpus else record.gpu_util_percent / 100,
        time=_ratio(record.elapsed_seconds, record.time_limit_seconds),
    )


def memory_to_ask(peak_mb: float) -> int:
    """Peak RSS plus a quarter for headroom, rounded up to whole GiB (at least 1): `--mem=<N>G`."""
    return max(1, math.ceil(peak_mb * 1.25 / MIB_PER_GIB))


def time_to_ask(used_seconds: float) -> int:
    """Time used plus half for headroom, rounded up to 15 minutes (at least 15): minutes for
    `--time`. Backfill starts short jobs sooner, so a close limit is worth asking for."""
    return max(15, math.ceil(used_seconds * 1.5 / 60 / 15) * 15)


def slurm_time(minutes: int) -> str:
    """`--time`'s [D-]HH:MM:SS."""
    days, minutes = divmod(minutes, 24 * 60)
    clock = f"{minutes // 60:02d}:{minutes % 60:02d}:00"
    return f"{days}-{clock}" if days else clock
