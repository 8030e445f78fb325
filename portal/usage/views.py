"""/usage/: jobs, GPU-hours and GPU efficiency per user or group, with its CSVs."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from portal.core.errors import InvalidInput
from portal.core.periods import day_or_none, midnight
from portal.usage.gpu_efficiency import gpu_allocated_total, gpu_efficiency_csv, gpu_efficiency_rows
from portal.usage.selectors import UsageQuery, usage_chart, usage_csv, usage_range, usage_rows


def _usage_query(request: HttpRequest) -> UsageQuery:
    query = request.GET
    after, before = day_or_none(query.get("from", "")), day_or_none(query.get("to", ""))
    return UsageQuery(
        period="month" if query.get("period") == "month" else "week",
        group_by="group" if query.get("group_by") == "group" else "user",
        since=midnight(after) if after else None,
        until=midnight(before, 1) if before else None,
        username=(query.get("user") or None) if request.user.is_staff else None,
    )


@login_required
def usage_view(request: HttpRequest) -> HttpResponse:
    usage = _usage_query(request)
    try:
        rows = usage_rows(user=request.user, query=usage)
        since, until = usage_range(usage)
    except InvalidInput as error:
        rows, problems, total, efficiency = [], error.fields, None, None
    else:
        problems = {}
        # One line that ties the table by period (batch jobs) to the efficiency table (jobs and sessions).
        total = gpu_allocated_total(user=request.user, since=since, until=until, username=usage.username)
        efficiency = gpu_efficiency_rows(user=request.user, since=since, until=until, group_by=usage.group_by,
                                         username=usage.username)
    return render(
        request,
        "usage/usage.html",
        {
            "rows": rows,
            "total": total,
            "efficiency": efficiency,
            "usage": usage,
            "query": request.GET,
            "problems": problems,
            "csv_query": request.GET.urlencode(),
            "spec": usage_chart(rows),
        },
    )


@login_required
def usage_csv_view(request: HttpRequest) -> HttpResponse:
    rows = usage_rows(user=request.user, query=_usage_query(request))
    response = HttpResponse(usage_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="usage.csv"'
    return response


@login_required
def usage_gpus_csv_view(request: HttpRequest) -> HttpResponse:
    """/usage/'s GPU efficiency table (gpu_efficiency.py) as CSV, for the same query."""
    usage = _usage_query(request)
    since, until = usage_range(usage)
    rows = gpu_efficiency_rows(user=request.user, since=since, until=until, group_by=usage.group_by,
                               username=usage.username)
    response = HttpResponse(gpu_efficiency_csv(rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="gpu-efficiency.csv"'
    return response
