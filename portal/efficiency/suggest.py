"""What a user's recent runs of a job template (or sessions of a profile) actually used, and what to
ask for next time: the composer's and the session form's "use these" panel and
GET /api/v1/templates/{slug}/suggested-resources/. Reads the database only.

The 95th percentile (nearest rank) of each figure over the newest runs, so one odd run neither sets
nor hides the suggestion; the values to ask for are rounded by portal.efficiency.figures, like the
advice on a job's page."""

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings

from portal.accounts.models import User
from portal.efficiency.figures import MIB_PER_GIB, memory_to_ask, slurm_time, time_to_ask
from portal.efficiency.models import Efficiency

_COLUMNS = ("mem_peak_mb", "mem_requested_mb", "gpus", "gpus_busy", "elapsed_seconds", "time_limit_seconds")


@dataclass(frozen=True)
class Suggestion:
    """Used: the p95 of the runs' known figures; asked: the largest and the median request; None:
    no run had the figure. The values to ask for are None where nothing was known."""

    runs: int
    template: str
    profile: str
    mem_peak_mb_p95: float | None
    mem_requested_mb_max: float | None
    mem_requested_mb_typical: float | None
    gpus_busy_p95: int | None
    gpus_max: int
    gpus_typical: int
    elapsed_seconds_p95: int | None
    time_limit_seconds_max: int | None
    time_limit_seconds_typical: int | None
    memory_gb: int | None  # --mem=<N>G
    gpus: int | None  # all nodes together; 0: the runs had none
    time_minutes: int | None  # --time, in minutes

    @property
    def time(self) -> str | None:
        """--time as [D-]HH:MM:SS."""
        return None if self.time_minutes is None else slurm_time(self.time_minutes)

    @property
    def hours(self) -> float | None:
        """The session form's hours."""
        return None if self.time_minutes is None else self.time_minutes / 60


def percentile(values: Sequence[float], share: float) -> float | None:
    """Nearest rank: the smallest value with at least `share` of the values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def suggested_resources(*, user: User, template: str = "", profile: str = "",
                        runs: int | None = None) -> Suggestion | None:
    """The user's newest `runs` (EFFICIENCY_SUGGEST_RUNS) records of the job template, or of the
    session profile; None below EFFICIENCY_SUGGEST_MIN_RUNS of them. One query, on the index
    (user, template|profile, ended_at)."""
    if bool(template) == bool(profile):
        raise ValueError("a template or a profile, one of them")
    runs = settings.EFFICIENCY_SUGGEST_RUNS if runs is None else runs
    records = Efficiency.objects.filter(user=user)
    records = (records.filter(template=template, job__isnull=False) if template
               else records.filter(profile=profile, session__isnull=False))
    rows = list(records.order_by("-ended_at", "-id").values(*_COLUMNS)[:runs])
    if not rows or len(rows) < settings.EFFICIENCY_SUGGEST_MIN_RUNS:
        return None

    def known(column: str) -> list[float]:
        return [row[column] for row in rows if row[column] is not None]

    def p95(column: str) -> float | None:
        return percentile(known(column), 0.95)

    def largest(column: str) -> float | None:
        return max(known(column), default=None)

    def typical(column: str) -> float | None:
        return percentile(known(column), 0.5)

    memory, busy, elapsed = p95("mem_peak_mb"), p95("gpus_busy"), p95("elapsed_seconds")
    had_gpus = any(row["gpus"] for row in rows)
    gpus = (max(1, int(busy)) if busy is not None else None) if had_gpus else 0
    time_limit_max, time_limit_typical = largest("time_limit_seconds"), typical("time_limit_seconds")
    return Suggestion(
        runs=len(rows), template=template, profile=profile,
        mem_peak_mb_p95=memory, mem_requested_mb_max=largest("mem_requested_mb"),
        mem_requested_mb_typical=typical("mem_requested_mb"),
        gpus_busy_p95=None if busy is None else int(busy), gpus_max=int(largest("gpus") or 0),
        gpus_typical=int(typical("gpus") or 0),
        elapsed_seconds_p95=None if elapsed is None else int(elapsed),
        time_limit_seconds_max=None if time_limit_max is None else int(time_limit_max),
        time_limit_seconds_typical=None if time_limit_typical is None else int(time_limit_typical),
        memory_gb=None if memory is None else memory_to_ask(memory),
        gpus=gpus,
        time_minutes=None if elapsed is None else time_to_ask(elapsed),
    )


def _gigabytes(mb: float) -> str:
    return f"{mb / MIB_PER_GIB:.1f}".removesuffix(".0") + " GB"


def _duration(seconds: float) -> str:
    minutes = max(1, round(seconds / 60)) if seconds else 0
    if minutes < 60:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def suggestion_summary(suggestion: Suggestion) -> str:
    """One sentence, the same on the page and in the API: "Your last 10 runs of this template used
    at most (p95): memory 3.1 GB of 16 GB asked, GPUs busy 1 of 2, time 12 min of 1 h."""
    what = "runs of this template" if suggestion.template else "sessions of this profile"
    parts = []
    if suggestion.mem_peak_mb_p95 is not None:
        asked = suggestion.mem_requested_mb_typical
        parts.append(f"memory {_gigabytes(suggestion.mem_peak_mb_p95)}"
                     + (f" of {_gigabytes(asked)} asked" if asked else ""))
    if suggestion.gpus_busy_p95 is not None and suggestion.gpus_typical:
        parts.append(f"GPUs busy {suggestion.gpus_busy_p95} of {suggestion.gpus_typical}")
    if suggestion.elapsed_seconds_p95 is not None:
        limit = suggestion.time_limit_seconds_typical
        parts.append(f"time {_duration(suggestion.elapsed_seconds_p95)}"
                     + (f" of {_duration(limit)}" if limit else ""))
    used = ", ".join(parts) if parts else "nothing Slurm could measure"
    return f"Your last {suggestion.runs} {what} used at most (p95): {used}."


def suggestion_advice(suggestion: Suggestion) -> str:
    """What to ask for, in words: "Ask for 1 GPU, 30 min and 4 GB of memory."."""
    parts = []
    if suggestion.gpus is not None:
        parts.append(f"{suggestion.gpus} GPU{'' if suggestion.gpus == 1 else 's'}")
    if suggestion.time_minutes is not None:
        parts.append(_duration(suggestion.time_minutes * 60))
    if suggestion.memory_gb is not None:
        parts.append(f"{suggestion.memory_gb} GB of memory")
    if not parts:
        return "Nothing to suggest yet: Slurm measured none of these runs."
    return "Ask for " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0]) + "."


def suggestion_data(suggestion: Suggestion) -> dict[str, Any]:
    """Its fields, `time`, `hours` and the two sentences: the API's `suggestion` and the panel's data."""
    return {**asdict(suggestion), "time": suggestion.time, "hours": suggestion.hours,
            "summary": suggestion_summary(suggestion), "advice": suggestion_advice(suggestion)}
