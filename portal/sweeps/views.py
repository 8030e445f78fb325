"""Sweep pages: the list, and one sweep's progress, runs table (sortable by any column), charts and
the button that cancels the rest. They read the database only."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from portal.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from portal.core.throttling import page_throttled
from portal.jobs.job_templates import catalog
from portal.sweeps.charts import parallel_coordinates, params_vs_objective
from portal.sweeps.models import Sweep
from portal.sweeps.selectors import TaskRun, sweep_get, sweep_list, sweep_view
from portal.sweeps.services import SweepSpec, space_parse, sweep_cancel, sweep_submit
from slurm.clusters import clusters_from_settings


def _sweep_or_404(request: HttpRequest, sweep_id: int) -> Sweep:
    sweep = sweep_get(user=request.user, sweep_id=sweep_id)
    if sweep is None:
        raise NotFound("No such sweep.")
    return sweep


@login_required
def sweep_list_view(request: HttpRequest) -> HttpResponse:
    return render(request, "sweeps/list.html", {"sweeps": list(sweep_list(user=request.user)[:100])})


@login_required
def sweep_detail_view(request: HttpRequest, sweep_id: int) -> HttpResponse:
    view = sweep_view(sweep=_sweep_or_404(request, sweep_id))
    sort = request.GET.get("sort", "")
    descending = sort.startswith("-")
    column = sort.removeprefix("-")
    columns = ["task", "state", *view.param_keys, *view.metric_keys]
    rows = list(view.tasks)
    if column in columns:
        def key(task: TaskRun) -> tuple:
            own = {"task": task.index, "state": task.state}
            value = own.get(column, task.values.get(column, task.metrics.get(column)))
            number = isinstance(value, int | float)
            # Missing values last, whichever way; numbers by value, text as text.
            return (value is None) != descending, not number, value if number else 0, str(value)
        rows.sort(key=key, reverse=descending)
    table = [{"task": task, "cells": [*(task.values.get(k) for k in view.param_keys),
                                      *(_figure(task.metrics.get(k)) for k in view.metric_keys)]}
             for task in rows]
    scored = any(task.metrics.get(view.sweep.objective) is not None for task in view.tasks)
    clusters = clusters_from_settings()
    # Where there are several: the cluster's title (its name, for one no longer configured).
    titles = {known.name: known.title for known in clusters.all} if clusters.several else {}
    return render(request, "sweeps/detail.html", {
        "view": view, "sweep": view.sweep, "table": table, "columns": columns, "sort": sort,
        "cluster": titles.get(view.sweep.cluster, view.sweep.cluster) if titles else "",
        "parallel": parallel_coordinates(view) if scored else None,
        "scatter": params_vs_objective(view) if scored else None,
        "best_value": _figure(view.best.metrics.get(view.sweep.objective)) if view.best else "",
        "refresh": view.sweep.job is not None and not view.sweep.job.is_terminal})


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.4g}"


@login_required
@require_POST
@page_throttled("slurm")
def sweep_cancel_view(request: HttpRequest, sweep_id: int) -> HttpResponse:
    sweep = _sweep_or_404(request, sweep_id)
    try:
        sweep_cancel(sweep=sweep)
    except (Conflict, Unavailable) as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "The rest of the sweep is being cancelled.")
    return redirect("sweeps:detail", sweep_id=sweep.pk)


def _whole(text: str | None) -> int | None:
    return int(text) if text and text.strip().lstrip("-").isdigit() else None


@login_required
@require_POST
def sweep_new_view(request: HttpRequest, template: str) -> HttpResponse:
    """The job composer's "Start the sweep": its template fields are the sweep's base parameters.
    Refused input goes back to the composer, each field's problem as a message."""
    found = catalog().templates.get(template)
    if found is None:
        raise NotFound("No such template.")
    post = request.POST
    try:
        sweep = sweep_submit(user=request.user, spec=SweepSpec(
            template=template, parameters={p.name: p.from_form(post.get(p.name)) for p in found.parameters},
            method=post.get("sweep_method", "grid"), space=space_parse(post.get("sweep_space", "")),
            samples=_whole(post.get("sweep_samples")), seed=_whole(post.get("sweep_seed")),
            concurrency=_whole(post.get("sweep_concurrency")) or 0, objective=post.get("sweep_objective", ""),
            direction=post.get("sweep_direction", ""), name=post.get("name", ""),
            account=post.get("account", ""), cluster=post.get("cluster", "")))
    except InvalidInput as error:
        for field, problems in error.fields.items():
            nested = problems.items() if isinstance(problems, dict) else [(None, problems)]
            for name, messages_of in nested:
                messages.error(request, f"Sweep, {name or field}: {' '.join(str(m) for m in messages_of)}")
        return redirect("jobs:compose", slug=template)
    return redirect("sweeps:detail", sweep_id=sweep.pk)
