"""Tracking on the portal's pages: a job's live curves on their own (what the job page polls), the
user's run history and the comparison of some of their runs. GET only, from the database."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.core.converters import id_or_none
from portal.core.errors import InvalidInput, NotFound, PortalError
from portal.core.throttling import page_throttled
from portal.jobs.views import job_part_render
from portal.tracking.artifacts import run_artifacts
from portal.tracking.compare import (
    COMPARE_RUNS_MAX,
    compare_run_ids,
    history_experiment,
    history_experiments,
    run_history,
    runs_compare,
)

HISTORY_RUNS_MAX = 200  # newest first; a filter by experiment reaches older ones


@login_required
@require_GET
def job_curves_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's live curves alone (core/live.js swaps them in)."""
    return job_part_render(request, job_id, "tracking/job_curves.html")


@login_required
@require_GET
def run_history_view(request: HttpRequest) -> HttpResponse:
    """The user's runs, newest first, to pick some to compare; `?experiment=<id>`: that one's only."""
    chosen = request.GET.get("experiment", "")
    experiment = None
    if chosen:
        experiment_id = id_or_none(chosen)
        try:
            experiment = history_experiment(user=request.user, experiment_id=experiment_id or 0)
        except NotFound:
            raise Http404("No such experiment.") from None
    runs = list(run_history(user=request.user, experiment=experiment)[:HISTORY_RUNS_MAX + 1])
    return render(request, "tracking/runs.html", {
        "runs": runs[:HISTORY_RUNS_MAX], "more": len(runs) > HISTORY_RUNS_MAX, "experiment": experiment,
        "experiments": history_experiments(user=request.user), "compare_max": COMPARE_RUNS_MAX})


@login_required
@require_GET
@page_throttled("job_files")
def runs_compare_view(request: HttpRequest) -> HttpResponse:
    """`?runs=<id>&runs=<id>` (or `runs=<id>,<id>`): those of the user's runs side by side; another
    user's run is not found (404). One run is that run's page, with its artifact files."""
    try:
        comparison = runs_compare(user=request.user, run_ids=compare_run_ids(request.GET.getlist("runs")))
    except InvalidInput as error:
        return render(request, "tracking/compare.html", {"errors": error.fields["runs"]}, status=400)
    except NotFound:
        raise Http404("No such run.") from None
    artifacts, artifacts_error = None, ""
    if len(comparison.runs) == 1:  # one run: its page, with its artifact files (listed as its owner)
        try:
            artifacts = run_artifacts(user=request.user, run_id=comparison.runs[0].run_id)
        except PortalError as error:
            artifacts_error = error.message
    return render(request, "tracking/compare.html", {"comparison": comparison, "artifacts": artifacts,
                                                     "artifacts_error": artifacts_error})
