"""What to ask for next time: a small rule table that turns one record's figures into sentences with a
concrete value, `#SBATCH` options for a job (`--mem=6G`), the session form's fields for a session
(`--gpus 1`, as `gpuportal session start` and the form take them). Efficient work gets no advice;
an unknown figure gives none; a run shorter than EFFICIENCY_SHORT_RUN_MINUTES gets no memory or time
advice (its peak and its share of the limit say little). The thresholds are settings
(docs/user/efficiency.md)."""

import math
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from portal.efficiency.figures import (
    MIB_PER_GIB,
    Figures,
    efficiency_figures,
    memory_to_ask,
    slurm_time,
    time_to_ask,
)
from portal.efficiency.models import Efficiency


@dataclass(frozen=True)
class Advice:
    kind: str  # cpu, memory, gpu, time
    text: str
    option: str  # the value to ask for: `--mem=6G` (a job), `--hours 0.5` (a session)


def _below(figure: float | None, percent: float) -> bool:
    return figure is not None and figure * 100 < percent


def _short(record: Efficiency) -> bool:
    return record.elapsed_seconds < settings.EFFICIENCY_SHORT_RUN_MINUTES * 60


def format_gb(mb: float) -> str:
    """MiB as the advice and the pages say them: `0.2 GB`, `16 GB`."""
    return f"{mb / MIB_PER_GIB:.1f} GB".replace(".0 GB", " GB")


def format_duration(seconds: float) -> str:
    """`12 min`, `4 h`, `1 h 30 min` (whole minutes, rounded up)."""
    minutes = math.ceil(seconds / 60)
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{minutes} min"
    return f"{hours} h {rest} min" if rest else f"{hours} h"


def _cpu(record: Efficiency, figures: Figures) -> Advice | None:
    """Cores a job kept busy on average, per node; a session's cores come with its GPUs."""
    if record.session_id or not _below(figures.cpu, settings.EFFICIENCY_CPU_ADVICE_PERCENT):
        return None
    per_node = record.cpus // max(record.nodes, 1)
    busy = max(1, math.ceil(record.cpu_seconds / record.elapsed_seconds / max(record.nodes, 1)))
    if busy >= per_node:
        return None
    return Advice("cpu", f"{busy} of {per_node} CPU cores per node were busy on average "
                         f"({round(figures.cpu * 100)} %): ask for --cpus-per-task={busy}.",
                  f"--cpus-per-task={busy}")


def _memory(record: Efficiency, figures: Figures) -> Advice | None:
    """`--mem` is per node; a session's memory comes with its GPUs."""
    if (record.session_id or _short(record)
            or not _below(figures.memory, settings.EFFICIENCY_MEMORY_ADVICE_PERCENT)):
        return None
    per_node_mb = record.mem_requested_mb / max(record.nodes, 1)
    gib = memory_to_ask(record.mem_peak_mb)
    if gib * MIB_PER_GIB >= per_node_mb:
        return None
    return Advice("memory", f"Peak memory {format_gb(record.mem_peak_mb)} of {format_gb(per_node_mb)}: "
                            f"ask for --mem={gib}G.", f"--mem={gib}G")


def _gpu(record: Efficiency, figures: Figures) -> Advice | None:
    """GPUs that never reached the busy line (GPUs that were busy, but little, are the work's own
    matter: fewer of them would not help)."""
    if record.gpus_busy is None or record.gpus_busy >= record.gpus:
        return None
    session = bool(record.session_id)
    if record.gpus_busy == 0:
        lead = "Its GPU was idle" if record.gpus == 1 else f"Its {record.gpus} GPUs were idle"
        if record.gpus == 1:
            text = (f"{lead}: start it without GPUs (--gpus 0) on a CPU partition." if session
                    else f"{lead}: if it needs no GPU, run it on a CPU partition without --gpus.")
            return Advice("gpu", text, "--gpus 0" if session else "--gpus=0")
        text = (f"{lead}: start it with 1 GPU, or without GPUs if it needs none." if session
                else f"{lead}: ask for --gpus=1, or a CPU partition if it needs none.")
        return Advice("gpu", text, "--gpus 1" if session else "--gpus=1")
    busy = record.gpus_busy
    lead = f"{busy} of {record.gpus} GPUs {'was' if busy == 1 else 'were'} busy"
    if session:
        return Advice("gpu", f"{lead}: ask for {busy} GPU{'s' * (busy > 1)}.", f"--gpus {busy}")
    return Advice("gpu", f"{lead}: ask for --gpus={busy}.", f"--gpus={busy}")


def _time(record: Efficiency, figures: Figures) -> Advice | None:
    if _short(record) or not _below(figures.time, settings.EFFICIENCY_TIME_ADVICE_PERCENT):
        return None
    minutes = time_to_ask(record.elapsed_seconds)
    if minutes * 60 >= record.time_limit_seconds:
        return None
    used, limit = format_duration(record.elapsed_seconds), format_duration(record.time_limit_seconds)
    if record.session_id:
        hours = f"{minutes / 60:g}"
        return Advice("time", f"Ended after {used} of {limit}: ask for {hours} h; a shorter session starts "
                              "sooner through backfill.", f"--hours {hours}")
    return Advice("time", f"Finished in {used} of {limit}: --time={slurm_time(minutes)} starts sooner "
                          "through backfill.", f"--time={slurm_time(minutes)}")


RULES: tuple[Callable[[Efficiency, Figures], Advice | None], ...] = (_cpu, _memory, _gpu, _time)


def efficiency_advice(record: Efficiency) -> list[Advice]:
    """Each rule's advice for the record, in the rule table's order (CPU, memory, GPU, time)."""
    figures = efficiency_figures(record)
    return [advice for rule in RULES if (advice := rule(record, figures)) is not None]
