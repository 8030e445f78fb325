"""Comparing runs (#21): the user's run history, and a few of their runs side by side: their metric
curves overlaid, a diff of their params, and runs that differ only in their `seed` param as one mean
curve with its min-max band. From the database only; another user's run reads as missing."""

import re
from collections import defaultdict
from dataclasses import dataclass
from statistics import fmean
from typing import Any

from django.db.models import QuerySet

from portal.core.errors import InvalidInput, NotFound
from portal.jobs.selectors import job_metrics_chart
from portal.tracking.curves import Curve, runs_curves
from portal.tracking.models import Experiment, LifecycleStage, Param, Run

SEED_PARAM = "seed"
COMPARE_RUNS_MAX = 20
RUN_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class ParamRow:
    """One param across the compared runs: its value in each (None: the run has no such param)."""

    key: str
    values: list[str | None]
    differs: bool


@dataclass(frozen=True)
class SeedGroup:
    """Runs whose params are the same but for their seed."""

    label: str
    runs: list[Run]


@dataclass(frozen=True)
class Comparison:
    runs: list[Run]
    labels: list[str]  # each run's line in the charts, in the order of `runs`
    params: list[ParamRow]
    groups: list[SeedGroup]  # only those of two runs or more
    curves: list[Curve]  # by run label and key
    seed_points: list[dict[str, Any]]  # by group label, key and step: mean, min, max, runs
    chart: dict[str, Any] | None  # every run's curves, one panel per key
    seed_chart: dict[str, Any] | None  # each group's mean and min-max band, one panel per key


def run_history(*, user: Any, experiment: Experiment | None = None) -> QuerySet[Run]:
    """The user's own live runs, newest first; those of one experiment if given."""
    runs = Run.objects.filter(owner=user, lifecycle_stage=LifecycleStage.ACTIVE)
    if experiment is not None:
        runs = runs.filter(experiment=experiment)
    return runs.select_related("experiment", "job", "session").order_by("-start_time", "-id")


def history_experiments(*, user: Any) -> QuerySet[Experiment]:
    return Experiment.objects.filter(owner=user, lifecycle_stage=LifecycleStage.ACTIVE).order_by("name")


def history_experiment(*, user: Any, experiment_id: int) -> Experiment:
    experiment = history_experiments(user=user).filter(pk=experiment_id).first()
    if experiment is None:
        raise NotFound(f"No Experiment with id={experiment_id} exists")
    return experiment


def compare_run_ids(values: list[str]) -> list[str]:
    """Run ids from a query: repeated (`runs=a&runs=b`, a form's checkboxes) or comma-separated,
    in order, once each."""
    ids = list(dict.fromkeys(part.strip() for value in values for part in value.split(",") if part.strip()))
    if not ids:
        raise InvalidInput({"runs": ["Select at least one run."]})
    if len(ids) > COMPARE_RUNS_MAX:
        raise InvalidInput({"runs": [f"Compare at most {COMPARE_RUNS_MAX} runs at once."]})
    if bad := [run_id for run_id in ids if not RUN_ID.fullmatch(run_id)]:
        raise InvalidInput({"runs": [f"Not a run id: {bad[0][:40]!r}."]})
    return ids


def runs_compare(*, user: Any, run_ids: list[str]) -> Comparison:
    """The user's own runs side by side; NotFound if any of them is not theirs or does not exist."""
    found = {run.run_id: run for run in Run.objects.filter(owner=user, run_id__in=run_ids)
             .select_related("experiment")}
    if missing := [run_id for run_id in run_ids if run_id not in found]:
        raise NotFound(f"Run '{missing[0]}' not found")
    runs = [found[run_id] for run_id in run_ids]
    labels = _labels(runs)
    params: dict[int, dict[str, str]] = defaultdict(dict)
    for run_pk, key, value in Param.objects.filter(run__in=runs).values_list("run_id", "key", "value"):
        params[run_pk][key] = value
    keys = sorted({key for run in runs for key in params[run.pk]})
    rows = [ParamRow(key=key, values=(values := [params[run.pk].get(key) for run in runs]),
                     differs=len(set(values)) > 1) for key in keys]
    label_of = {run.pk: label for run, label in zip(runs, labels, strict=True)}
    curves = runs_curves(runs=label_of)
    groups = _seed_groups(runs, params, differing={row.key for row in rows if row.differs})
    seed_points = _seed_points(groups, curves, label_of)
    return Comparison(runs=runs, labels=labels, params=rows, groups=groups, curves=curves,
                      seed_points=seed_points, chart=job_metrics_chart(metrics=curves),
                      seed_chart=_seed_chart(seed_points))


def _labels(runs: list[Run]) -> list[str]:
    """Run names, with the id's start where two runs share a name."""
    names = [run.run_name or run.run_id[:8] for run in runs]
    return [f"{name} ({run.run_id[:6]})" if names.count(name) > 1 else name
            for name, run in zip(names, runs, strict=True)]


def _seed_groups(runs: list[Run], params: dict[int, dict[str, str]], differing: set[str]) -> list[SeedGroup]:
    """Runs with a seed whose other params are all equal, in groups of two or more; each labelled by
    the params that set it apart from the other runs compared."""
    grouped: dict[tuple[tuple[str, str], ...], list[Run]] = defaultdict(list)
    for run in runs:
        if SEED_PARAM in params[run.pk]:
            grouped[tuple(sorted((k, v) for k, v in params[run.pk].items() if k != SEED_PARAM))].append(run)
    groups = []
    for key, members in grouped.items():
        if len(members) < 2:
            continue
        apart = " ".join(f"{k}={v}" for k, v in key if k in differing) or "same params"
        groups.append(SeedGroup(label=f"{apart} ({len(members)} seeds)", runs=members))
    return groups


def _seed_points(groups: list[SeedGroup], curves: list[Curve],
                 labels: dict[int, str]) -> list[dict[str, Any]]:
    """Per group and key, at each step: the mean of the group's runs' values there, and their min
    and max (a band), from the runs that have a value at that step."""
    rows: list[dict[str, Any]] = []
    for group in groups:
        members = {labels[run.pk] for run in group.runs}
        at: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
        for curve in curves:
            if curve.run in members:
                for step, value in zip(curve.steps, curve.values, strict=True):
                    if value is not None:
                        at[curve.tag][step].append(value)
        rows += [{"tag": tag, "group": group.label, "step": step, "mean": fmean(values), "min": min(values),
                  "max": max(values), "runs": len(values)}
                 for tag, steps in sorted(at.items()) for step, values in sorted(steps.items())]
    return rows


def _seed_chart(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not rows:
        return None
    return {
        "$schema": "https://vega.github.io/schema/vega-lite/v5.json",
        "data": {"values": rows},
        "facet": {"row": {"field": "tag", "type": "nominal", "title": None,
                          "header": {"labelAngle": 0, "labelAlign": "left"}}},
        "spec": {
            "width": 560, "height": 140,
            "encoding": {"x": {"field": "step", "type": "quantitative", "title": "step"},
                         "color": {"field": "group", "type": "nominal", "title": "runs"}},
            "layer": [
                {"mark": {"type": "area", "opacity": 0.25},
                 "encoding": {"y": {"field": "min", "type": "quantitative", "title": None,
                                    "scale": {"zero": False}},
                              "y2": {"field": "max"}}},
                {"mark": {"type": "line", "interpolate": "linear"},
                 "encoding": {"y": {"field": "mean", "type": "quantitative", "title": None},
                              "tooltip": [{"field": "group"}, {"field": "step"}, {"field": "mean"},
                                          {"field": "min"}, {"field": "max"}, {"field": "runs"}]}},
            ],
        },
        "resolve": {"scale": {"y": "independent"}},
    }
