import csv
from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone
from django.views.decorators.http import require_GET

from portal.core.errors import Forbidden
from portal.poll.timing import LATENCY_CSV_COLUMNS, latency_by_day, latency_chart

DAYS = 30


@login_required
@require_GET
def timing_view(request: HttpRequest) -> HttpResponse:
    """Admins: queue wait and start latency per partition and day (median, p95), sessions and jobs;
    `?format=csv` for the table."""
    if not request.user.is_staff:
        raise Forbidden("Only admins see the timing of everybody's sessions and jobs.")
    rows = latency_by_day(since=timezone.now() - timedelta(days=DAYS))
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="start-latency.csv"'
        writer = csv.writer(response)
        writer.writerow(LATENCY_CSV_COLUMNS)
        writer.writerows(row.csv() for row in rows)
        return response
    return render(request, "poll/timing.html", {"rows": rows, "chart": latency_chart(rows), "days": DAYS})
