"""Tracking on the portal's pages: a job's live curves on their own (what the job page polls)."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.jobs.selectors import job_get


@login_required
@require_GET
def job_curves_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's live curves alone, from the database (core/live.js swaps them in)."""
    job = job_get(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job.")
    return render(request, "tracking/job_curves.html", {"job": job, "fragment": True})
