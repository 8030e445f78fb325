"""The job page's "Re-run exactly" button (portal.provenance.rerun)."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from portal.core.errors import InvalidInput, NotFound, PortalError
from portal.provenance.rerun import RerunRefused, job_rerun


@login_required
@require_POST
def job_rerun_view(request: HttpRequest, job_id: int) -> HttpResponse:
    try:
        job = job_rerun(user=request.user, job_id=job_id, run_anyway=request.POST.get("run_anyway") == "1")
    except NotFound:
        raise Http404("No such job.") from None
    except RerunRefused as error:
        messages.error(request, error.message.replace('Send {"run_anyway": true}', 'Tick "even if inputs '
                                                      'changed"'))
        return redirect("jobs:detail", job_id=job_id)
    except InvalidInput as error:  # the record no longer passes the submit's checks
        problems = "; ".join(f"{key}: {value}" for key, value in error.fields.items())
        messages.error(request, f"Not re-run: {problems}")
        return redirect("jobs:detail", job_id=job_id)
    except PortalError as error:  # incomplete record, environment changed, inputs not checkable
        messages.error(request, f"Not re-run: {error.message}")
        return redirect("jobs:detail", job_id=job_id)
    messages.info(request, f"Submitted job {job.pk}, a re-run of job {job_id}.")
    return redirect("jobs:detail", job_id=job.pk)
