"""GPU pages: a job's GPU card on its own (what the job page polls) and the admins' cluster heat map."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from portal.core.errors import Forbidden
from portal.gpus.cluster import HEATMAP_DAYS, cluster_gpu_hours, cluster_gpus, cluster_heatmap_chart
from portal.jobs.views import job_part_render


@login_required
@require_GET
def job_card_view(request: HttpRequest, job_id: int) -> HttpResponse:
    """The job page's GPU card alone (core/live.js swaps it in)."""
    return job_part_render(request, job_id, "gpus/job_card.html")


@login_required
@require_GET
def cluster_view(request: HttpRequest) -> HttpResponse:
    """Admins: every GPU by partition and node, what holds it now, and a heat map of the last days."""
    if not request.user.is_staff:
        raise Forbidden("Only admins see the whole cluster's GPUs.")
    gpus = cluster_gpus()
    chart = cluster_heatmap_chart(gpus=gpus, hours=cluster_gpu_hours())
    return render(request, "gpus/cluster.html", {"gpus": gpus, "chart": chart, "days": HEATMAP_DAYS})
