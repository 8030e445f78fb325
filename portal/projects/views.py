import csv
import io

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from portal.projects.selectors import budgets_shown
from slurm.clusters import clusters_from_settings

_COLUMNS = ["project", "account", "ldap_group", "budget_gpu_hours", "used_gpu_hours", "left_gpu_hours",
            "used_fraction", "burn_gpu_hours_per_day", "run_out", "checked_at"]


@login_required
def budgets_csv_view(request: HttpRequest) -> HttpResponse:
    """/usage/'s budgets as CSV: an admin's has every project's burn, a user's their own projects.
    Where several clusters are configured, a row per project and cluster, its name in a last column."""
    several = clusters_from_settings().several
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(_COLUMNS + ["cluster"] * several)
    for b in budgets_shown(user=request.user, today=timezone.localdate()):
        writer.writerow([b.project.name, b.project.slurm_account, b.project.ldap_group, b.limit_hours,
                         b.used_hours, b.left_hours, b.used_fraction, b.burn_hours_per_day, b.run_out or "",
                         b.checked_at.isoformat() if b.checked_at else ""] + [b.cluster] * several)
    response = HttpResponse(out.getvalue(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="project-budgets.csv"'
    return response
