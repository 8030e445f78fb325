"""Job pages: template picker, composer (form -> preview -> submit), list, detail with live log."""

import csv
import shlex
import uuid
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from portal.cluster.models import PollStatus
from portal.cluster.selectors import cluster_poll_status
from portal.core.converters import id_or_none
from portal.core.csv_cells import csv_cell
from portal.core.errors import Conflict, InvalidInput
from portal.core.live import follows
from portal.core.periods import day_or_none, midnight
from portal.core.throttling import page_throttled
from portal.environments.selectors import clusters_offering, environment_choices, environment_list
from portal.jobs.job_templates import Parameter, catalog
from portal.jobs.models import Job, JobState
from portal.jobs.selectors import (
    JobFilters,
    job_compose_initial,
    job_get,
    job_list,
    job_metrics_chart,
    job_metrics_list,
    partition_limits,
    partition_limits_list,
)
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_cancel, job_submit
from portal.policy.services import partitions_offered, policy_current
from portal.waits.selectors import waiting_get
from slurm.clusters import clusters_from_settings

PAGE_SIZE = 50


def _job_or_404(request: HttpRequest, job_id: int) -> Job:
    job = job_get(user=request.user, job_id=job_id)
    if job is None:
        raise Http404("No such job.")
    return job


def job_part_render(request: HttpRequest, job_id: int, template: str) -> HttpResponse:
    """One part of a job's page alone, from the database: what the page's own polling
    (core/live.js) swaps in, for the parts other apps add to it (GPUs, live curves)."""
    return render(request, template, {"job": _job_or_404(request, job_id), "fragment": True})


@follows(scope="user")
@login_required
def job_list_view(request: HttpRequest) -> HttpResponse:
    query = request.GET
    state = query.get("state") if query.get("state") in JobState.values else None
    after, before = day_or_none(query.get("from", "")), day_or_none(query.get("to", ""))
    filters = JobFilters(
        state=state, template=query.get("template") or None,
        username=(query.get("user") or None) if request.user.is_staff else None,
        submitted_after=midnight(after) if after else None,
        submitted_before=midnight(before, 1) if before else None,
        any_id=query.get("q", "").strip() or None,
    )
    jobs = job_list(user=request.user, filters=filters)
    # Keyset pages ("older than job N"): no COUNT(*) over a long history.
    older_than = id_or_none(query.get("before", ""))
    last = Job.objects.filter(pk=older_than).values("submitted_at").first() if older_than else None
    if last is not None:
        jobs = jobs.filter(Q(submitted_at__lt=last["submitted_at"])
                           | Q(submitted_at=last["submitted_at"], pk__lt=older_than))
    page = list(jobs[:PAGE_SIZE + 1])
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    next_query = query.copy()
    if more:
        next_query["before"] = page[-1].pk
    return render(request, "jobs/list.html", {
        "jobs": page, "poll": PollStatus.get(), "next_query": next_query.urlencode() if more else "",
        "states": JobState.choices,
        "templates": sorted(catalog().templates.values(), key=lambda t: t.name), "query": query,
    })


@login_required
def template_pick_view(request: HttpRequest) -> HttpResponse:
    found = catalog()
    return render(request, "jobs/pick.html", {
        "templates": sorted(found.templates.values(), key=lambda t: t.name),
        "broken": found.errors if request.user.is_staff else {},
        "environments": environment_list(user=request.user),
    })


def _form_value(parameter: Parameter, value: Any) -> Any:
    if parameter.type == "arguments" and isinstance(value, list):  # a job stored when they were lists
        return shlex.join(value)
    if parameter.type == "paths" and isinstance(value, list):  # one a line in the form
        return "\n".join(value)
    return "" if value is None else value


@login_required
def job_compose_view(request: HttpRequest, slug: str) -> HttpResponse:
    template = catalog().templates.get(slug)
    if template is None:
        raise Http404
    errors: dict[str, Any] = {}
    preview = ""
    last_submitted_at: datetime | None = None
    if request.method == "POST":
        values = {p.name: p.from_form(request.POST.get(p.name)) for p in template.parameters}
        name = request.POST.get("name", "")
        account, cluster = request.POST.get("account", ""), request.POST.get("cluster", "")
        try:
            job_uuid = uuid.UUID(request.POST.get("uuid", ""))
        except ValueError:
            job_uuid = uuid.uuid4()
        try:
            if request.POST.get("action") == "submit":
                job = job_submit(user=request.user, template=slug, parameters=values, name=name or None,
                                 job_uuid=job_uuid, notify_email=request.POST.get("notify_email") == "on",
                                 account=account, cluster=cluster)
                messages.info(request, f"Job {job.name} submitted: {job.get_state_display().lower()}.")
                return redirect("jobs:detail", job_id=job.pk)
            preview = job_prepare(user=request.user, template=slug, parameters=values, name=name or None,
                                  job_uuid=job_uuid, account=account, cluster=cluster).script
        except InvalidInput as invalid:
            errors = invalid.fields
    else:
        job_uuid = uuid.uuid4()
        values = {p.name: p.default for p in template.parameters}
        name, account, cluster = template.slug, "", ""
        # A clone, a preset's link, or the user's last job of this template (which the form says).
        if start := job_compose_initial(user=request.user, template=template, query=request.GET):
            values.update({k: v for k, v in start.values.items() if template.parameter(k)})
            name, last_submitted_at = start.name, start.last_submitted_at
    environments = list(environment_choices(user=request.user))
    chosen = values.get("environment") if isinstance(values.get("environment"), str) else ""
    clusters = clusters_from_settings()
    several = clusters.several  # then each partition and environment lists the clusters offering it
    if several:  # each cluster's partitions with its own sizes (#38)
        policy = policy_current()
        partitions = [(partition_limits(rules, is_default=rules.name == policy.default_partition), offered)
                      for rules, offered in partitions_offered(policy, clusters)]
    else:
        partitions = [(partition, "") for partition in partition_limits_list()]
    parameter_errors = errors.get("parameters", {}) if isinstance(errors.get("parameters"), dict) else {}
    fields = [{"parameter": p, "value": _form_value(p, values.get(p.name)),
               "errors": parameter_errors.get(p.name, [])} for p in template.parameters]
    return render(request, "jobs/compose.html", {
        "template": template, "fields": fields, "name": name, "uuid": job_uuid, "preview": preview,
        "errors": errors, "partitions": partitions,
        "environments": [(environment, clusters_offering(clusters, environment) if several else "")
                         for environment in environments],
        # A clone of a job whose environment has since gone keeps it visible (and refused) rather
        # than silently falling back to none.
        "environment_gone": chosen if chosen and chosen not in {e.name for e in environments} else "",
        "notify_email": request.POST.get("notify_email") == "on" if request.method == "POST"
        else request.user.email_on_job_end,
        "gpu_field": template.gpus_per_node if isinstance(template.gpus_per_node, str) else "",
        "nodes_field": template.nodes if isinstance(template.nodes, str) else "",
        "account": account, "last_submitted_at": last_submitted_at,
        # A picker only where there is a choice: a one-cluster site's form is as before.
        "clusters": clusters.all if several else (),
        "cluster": cluster,
    })


@login_required
def job_detail_view(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_or_404(request, job_id)
    metrics = job_metrics_list(job=job)
    pending = job.state == JobState.PENDING
    waiting = waiting_get(job_id=job.slurm_job_id, cluster=job.cluster) if pending else None
    clusters = clusters_from_settings()
    # Where there are several: the cluster's title (its name, for one no longer configured).
    titles = {known.name: known.title for known in clusters.all} if clusters.several else {}
    cluster = titles.get(job.cluster, job.cluster) if titles else ""
    return render(request, "jobs/detail.html", {"job": job, "poll": cluster_poll_status(job.cluster),
                                                "cluster": cluster, "metrics": metrics,
                                                "metrics_chart": job_metrics_chart(metrics=metrics),
                                                "waiting": waiting})


@login_required
@require_POST
@page_throttled("slurm")
def job_cancel_view(request: HttpRequest, job_id: int) -> HttpResponse:
    job = _job_or_404(request, job_id)
    try:
        job_cancel(job=job)
        messages.info(request, "Cancellation requested.")
    except Conflict as error:
        messages.info(request, error.message)
    return redirect("jobs:detail", job_id=job.pk)


@login_required
@require_GET
def job_timing_csv_view(request: HttpRequest) -> HttpResponse:
    """Your jobs' timing (submitted, accepted by Slurm, started, ended, pending reasons over time),
    newest first, at most 10,000."""
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = 'attachment; filename="jobs-timing.csv"'
    writer = csv.writer(response)
    writer.writerow(["id", "name", "partition", "state", "slurm_job_id", "submitted", "slurm_submitted",
                     "started", "ended", "queue_wait_seconds", "pending_reasons"])
    jobs = Job.objects.filter(user=request.user).order_by("-submitted_at", "-id").only(
        "id", "name", "partition", "state", "slurm_job_id", "submitted_at", "slurm_submitted_at",
        "started_at", "ended_at", "pending_reasons")[:10000]
    for job in jobs:
        accepted = job.slurm_submitted_at or job.submitted_at
        wait = (job.started_at - accepted).total_seconds() if job.started_at else None
        reasons = "; ".join(f"{when} {reason}" for when, reason in job.pending_reasons or [])
        writer.writerow([csv_cell(value) for value in (
            job.pk, job.name, job.partition, job.state, job.slurm_job_id, job.submitted_at,
            job.slurm_submitted_at, job.started_at, job.ended_at, wait, reasons)])
    return response
