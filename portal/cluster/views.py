from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.cluster.selectors import clusters_overview
from portal.core.live import follows


@follows(scope="cluster")
@login_required
def status_view(request: HttpRequest) -> HttpResponse:
    return render(request, "cluster/status.html", {"clusters": clusters_overview()})
