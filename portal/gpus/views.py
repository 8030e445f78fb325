"""GPU pages: a job's GPU card on its own (what the job page polls) and the admins' cluster heat map."""

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.jobs.selectors import job_get


@login_required
@require_GET
def job_card_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's GPU card alone, from the database (gpus/live.js swaps it in)."""
    job = job_get(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job.")
    return render(request, "gpus/job_card.html", {"job": job, "fragment": True})
