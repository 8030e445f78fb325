"""/usage/efficiency/: the efficiency report per user or group, its CSV, and admins' most wasteful users."""

from dataclasses import replace

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.core.errors import InvalidInput
from portal.core.periods import day_or_none, midnight
from portal.efficiency.reports import (
    ReportQuery,
    efficiency_csv,
    efficiency_report,
    report_range,
    wasteful_users,
)


def _query(request: HttpRequest) -> ReportQuery:
    """From the page's query string: days, the `until` day included; anything malformed is ignored."""
    query = request.GET
    since, until = day_or_none(query.get("since", "")), day_or_none(query.get("until", ""))
    return ReportQuery(
        group_by="group" if query.get("group_by") == "group" else "user",
        since=midnight(since) if since else None,
        until=midnight(until, 1) if until else None,
        username=(query.get("user") or None) if request.user.is_staff else None,
    )


@login_required
def report_view(request: HttpRequest) -> HttpResponse:
    report = _query(request)
    try:
        since, until = report_range(report)
        rows = efficiency_report(user=request.user, query=replace(report, since=since, until=until))
        problems = {}
    except InvalidInput as error:
        since = until = None
        rows, problems = [], error.fields
    return render(request, "efficiency/report.html", {
        "rows": rows, "report": report, "since": since, "until": until, "query": request.GET,
        "problems": problems, "csv_query": request.GET.urlencode(),
        "wasteful": wasteful_users() if request.user.is_staff else None,
    }, status=400 if problems else 200)


@login_required
def report_csv_view(request: HttpRequest) -> HttpResponse:
    rows = efficiency_report(user=request.user, query=_query(request))
    response = HttpResponse(efficiency_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="efficiency.csv"'
    return response
