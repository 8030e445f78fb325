"""What differs: two of the user's runs side by side (the page of GET .../provenance/diff/). Another
user's job is a 404 (admins' included) and a bad `other` a 400, through the pages' error mapping."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET

from portal.provenance.selectors import provenance_compare, provenance_pair


@login_required
@require_GET
def differs_pick_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's picker sends `?other=`: on to the pair's own address."""
    this, other = provenance_pair(user=request.user, job_id=job_id, other=request.GET.get("other", ""))
    return redirect("provenance:differs", this.job_id, other.job_id)


@login_required
@require_GET
def differs_view(request: HttpRequest, job_id: int, other_id: int) -> HttpResponse:
    this, other = provenance_pair(user=request.user, job_id=job_id, other=str(other_id))
    return render(request, "provenance/differs.html", {"comparison": provenance_compare(this, other)})
