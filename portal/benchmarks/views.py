"""Benchmark pages: history with filters, one result, compare, charts, admin import; usage + CSV."""

from contextlib import suppress
from datetime import datetime
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.http import Http404, HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.template.defaultfilters import floatformat
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe
from django.utils.text import Truncator
from redis.exceptions import RedisError

from portal.benchmarks import charts
from portal.benchmarks.figures import TOOLS
from portal.benchmarks.models import CONTEXT_FIELDS, BenchmarkResult
from portal.benchmarks.selectors import (
    MAX_COMPARE,
    ResultFilters,
    choices,
    inference_origin,
    job_visible,
    reference_list,
    result_get,
    result_list,
    results_compare,
    results_older_than,
)
from portal.benchmarks.serializers import ContextSerializer
from portal.benchmarks.services import reference_for, result_import
from portal.core.converters import id_or_none
from portal.core.errors import Forbidden, InvalidInput
from portal.core.periods import day_or_none, midnight

PAGE_SIZE = 50
# Tools whose result page shows an inference run's table, accuracy and charts.
INFERENCE_TOOLS = ("inference", "trtexec")
CHART_KINDS = {
    "scaling": "Throughput vs GPUs",
    "precision": "AMP/FP16 vs FP32",
    "storage": "Storage (fio)",
    "nccl": "NCCL bus bandwidth",
    "p2p": "GPU peer-to-peer",
    "inference": "Inference by batch size",
    "history": "History of one figure",
}


def _filters(query: Any) -> ResultFilters:
    """Filters from a page's query string; anything malformed is ignored, as on the jobs page."""
    after, before = day_or_none(query.get("from", "")), day_or_none(query.get("to", ""))
    gpus = id_or_none(query.get("gpus", ""))
    flagged = {"1": True, "0": False}.get(query.get("flagged", ""))
    text = lambda name, limit=128: (query.get(name) or "")[:limit] or None  # noqa: E731
    return ResultFilters(
        tool=query.get("tool") if query.get("tool") in TOOLS else None,
        model=text("model"),
        precision=text("precision", 16),
        gpus=gpus if gpus is not None and gpus <= 100000 else None,
        gpu_type=text("gpu_type", 64),
        partition=text("partition", 64),
        flagged=flagged,
        run_after=midnight(after) if after else None,
        run_before=midnight(before, 1) if before else None,
        username=text("user", 32),
    )


def _menu() -> dict[str, list]:
    """Filter menus: distinct values change slowly, so they are cached for a minute. Without the
    cache (Redis restarting) they are read from the database: a page never fails for the cache."""
    with suppress(RedisError):
        if (found := cache.get("benchmarks:menu")) is not None:
            return found
    found = choices()
    with suppress(RedisError):
        cache.set("benchmarks:menu", found, 60)
    return found


@login_required
def history_view(request: HttpRequest) -> HttpResponse:
    query = request.GET
    filters = _filters(query)
    results = result_list(user=request.user, filters=filters)
    older = id_or_none(query.get("before", ""))
    last = BenchmarkResult.objects.filter(pk=older).values("run_at").first() if older else None
    if last is not None:
        results = results_older_than(results, run_at=last["run_at"], pk=older)
    page = list(results[: PAGE_SIZE + 1])
    more = len(page) > PAGE_SIZE
    page = page[:PAGE_SIZE]
    next_query = query.copy()
    if more:
        next_query["before"] = page[-1].pk
    return render(
        request,
        "benchmarks/history.html",
        {
            "rows": _history_rows(page),
            "query": query,
            "next_query": next_query.urlencode() if more else "",
            "menu": _menu(),
            "tools": TOOLS,
            "max_compare": MAX_COMPARE,
            "chart_query": query.urlencode(),
        },
    )


def _history_rows(results: list[BenchmarkResult]) -> str:
    """The table's rows, built here: the template engine took most of the page's time at 50 rows.
    format_html escapes every value."""
    base = reverse("benchmarks:history")
    rows = []
    for r in results:
        if r.parsed:
            value = format_html("{} {}", floatformat(r.value, 2), r.unit)
            if r.flagged:
                value = format_html(
                    '{} <span class="badge bad" title="{}">flagged</span>', value, r.flag_reason
                )
        else:
            value = format_html(
                '<span class="badge warn" title="{}">unparsed</span> <span class="muted">{}</span>',
                r.reason,
                Truncator(r.reason).chars(80),
            )
        case = format_html(' <span class="muted">{}</span>', r.case) if r.case else ""
        rows.append(
            format_html(
                '<tr data-result="{}"{}><td><input type="checkbox" name="ids" value="{}" '
                'aria-label="compare #{}"></td><td><a href="{}{}/">#{}</a></td><td>{}</td><td>{}{}</td>'
                "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                r.pk,
                mark_safe(' class="flagged"') if r.flagged else "",
                r.pk,
                r.pk,
                base,
                r.pk,
                r.pk,
                r.tool,
                r.model,
                case,
                r.precision,
                "" if r.gpus is None else r.gpus,
                r.gpu_type,
                r.partition,
                value,
                timezone.localtime(r.run_at).strftime("%Y-%m-%d %H:%M"),
                r.user.username if r.user_id else "",
            )
        )
    return mark_safe("\n".join(rows))  # noqa: S308 - every part went through format_html


@login_required
def result_view(request: HttpRequest, result_id: int) -> HttpResponse:
    result = result_get(user=request.user, result_id=result_id)
    if result is None:
        raise Http404
    chart_list = []
    if result.tool == "nccl" and result.parsed:
        chart_list.append(("nccl", charts.nccl_chart(results=[result]), "NCCL bus bandwidth vs message size"))
    if result.tool == "p2p" and result.parsed:
        chart_list.append(("p2p", charts.p2p_chart(result=result), "Peer-to-peer bandwidth"))
    inference = _inference_context(request, result) if result.tool in INFERENCE_TOOLS else {}
    chart_list += inference.pop("charts", [])
    if result.parsed and result.metric:
        series = ResultFilters(
            tool=result.tool,
            model=result.model or None,
            precision=result.precision or None,
            gpus=result.gpus,
            gpu_type=result.gpu_type or None,
        )
        references = [result.reference] if result.reference else []
        chart_list.append(
            (
                "history",
                charts.history_chart(user=request.user, filters=series, references=references),
                f"{result.metric} over time (same tool, model, precision, GPUs, GPU type)",
            )
        )
    return render(
        request,
        "benchmarks/result_inference.html" if inference else "benchmarks/result.html",
        {
            "result": result,
            "job_visible": job_visible(user=request.user, result=result),
            "charts": chart_list,
            "reference_now": reference_for(result) if result.parsed else None,
            **inference,
        },
    )


def _inference_context(request: HttpRequest, result: BenchmarkResult) -> dict[str, Any]:
    """An inference run's every case (whichever of its results is opened), its accuracy table, its
    charts, and where its model came from; each chart's figures are also in a table (the page's
    text alternative)."""
    if not result.parsed:
        return {}
    return {
        "inference_rows": charts.inference_rows(result),
        "accuracy": charts.inference_accuracy(result),
        "speedups": charts.inference_speedups(result),
        "published": charts.inference_published(result),
        "origin": inference_origin(user=request.user, result=result),
        "charts": [
            ("inference-throughput", charts.inference_throughput_chart(result), "Throughput vs batch size"),
            ("inference-latency", charts.inference_latency_chart(result),
             "Latency percentiles vs throughput"),
            ("inference-speedup", charts.inference_speedup_chart(result), "INT8 speed-up over FP32"),
        ],
    }


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, datetime):
        return timezone.localtime(value).strftime("%Y-%m-%d %H:%M")
    return value


@login_required
def compare_view(request: HttpRequest) -> HttpResponse:
    ids = [
        i
        for i in (id_or_none(v) for v in request.GET.getlist("ids") + request.GET.get("ids", "").split(","))
        if i is not None
    ]
    ids = list(dict.fromkeys(ids))[:MAX_COMPARE]
    results = results_compare(user=request.user, ids=ids)
    rows = [
        {
            "kind": "measured",
            "result": f"#{r.pk} {r.tool} {r.model or r.case}",
            "value": r.value,
            "unit": r.unit,
            "gpus": r.gpus,
            "precision": r.precision,
            "flagged": r.flagged,
        }
        for r in results
        if r.value is not None
    ]
    spec = charts._base(
        "Compared results",
        rows,
        [
            {
                "mark": "bar",
                "encoding": {
                    "x": {"field": "result", "type": "nominal", "sort": None, "title": None},
                    "y": {
                        "field": "value",
                        "type": "quantitative",
                        "title": " / ".join(sorted({r["unit"] for r in rows})),
                    },
                    "color": {"condition": {"test": "datum.flagged", "value": "#c0392b"}, "value": "#2c6fbb"},
                    "tooltip": [
                        {"field": f} for f in ("result", "value", "unit", "gpus", "precision", "flagged")
                    ],
                },
            }
        ],
    )
    chart_list = [("compare", spec, "Key figure of each result")]
    nccl = [r for r in results if r.tool == "nccl" and r.parsed]
    if nccl:
        chart_list.append(("nccl", charts.nccl_chart(results=nccl), "NCCL bus bandwidth vs message size"))
    fields = [
        "tool",
        "case",
        *CONTEXT_FIELDS,
        "run_at",
        "metric",
        "value",
        "unit",
        "flagged",
        "flag_reason",
        "reason",
    ]
    # Built here, like the history's rows: 20 columns x 19 fields through the template engine cost more
    # than the queries. format_html escapes every value.
    table = mark_safe(  # noqa: S308
        "\n".join(
            format_html(
                "<tr><th>{}</th>{}</tr>",
                name.replace("_", " "),
                format_html_join(
                    "",
                    "<td>{}</td>",
                    ((_cell(getattr(r, name)),) for r in results),
                ),
            )
            for name in fields
        )
    )
    return render(
        request, "benchmarks/compare.html", {"results": results, "table": table, "charts": chart_list}
    )


@login_required
def charts_view(request: HttpRequest) -> HttpResponse:
    query = request.GET
    kind = query.get("kind") if query.get("kind") in CHART_KINDS else "scaling"
    filters = _filters(query)
    overlay = query.get("overlay", "1") == "1"
    references = list(reference_list(tool=filters.tool)[:20]) if query.get("references") == "1" else []
    if kind == "scaling":
        filters = ResultFilters(
            **{**filters.__dict__, "gpus": None, "tool": filters.tool or "tf_cnn_benchmarks"}
        )
        spec = charts.scaling_chart(
            user=request.user,
            filters=filters,
            overlay_published=overlay,
            references=[r for r in references if r.metric == "images_per_sec"],
        )
    elif kind == "precision":
        filters = ResultFilters(**{**filters.__dict__, "tool": filters.tool or "tf_cnn_benchmarks"})
        spec = charts.precision_chart(user=request.user, filters=filters)
    elif kind == "storage":
        spec = charts.storage_chart(
            user=request.user,
            filters=filters,
            measure="iops" if query.get("measure") == "iops" else "bw_mib_s",
            references=references,
            overlay_published=overlay,
        )
    elif kind == "p2p":
        newest = result_list(user=request.user, filters=ResultFilters(**{**filters.__dict__, "tool": "p2p"}))
        spec = charts.p2p_chart(result=newest.filter(parsed=True).first(), overlay_published=overlay)
    elif kind == "inference":
        # The newest inference run matching the filters; its page has its tables and other charts.
        newest = result_list(
            user=request.user, filters=ResultFilters(**{**filters.__dict__, "tool": "inference"})
        ).filter(parsed=True).first()
        spec = charts.inference_throughput_chart(newest) if newest else charts._base(
            "No inference run matches", [], [{"mark": "point"}])
    elif kind == "nccl":
        nccl = list(
            result_list(
                user=request.user, filters=ResultFilters(**{**filters.__dict__, "tool": "nccl"})
            ).filter(parsed=True)[:5]
        )
        spec = charts.nccl_chart(results=nccl, references=references)
    else:
        spec = charts.history_chart(user=request.user, filters=filters, references=references)
    return render(
        request,
        "benchmarks/charts.html",
        {
            "kind": kind,
            "kinds": CHART_KINDS,
            "spec": spec,
            "title": CHART_KINDS[kind],
            "query": query,
            "menu": _menu(),
            "tools": TOOLS,
            "overlay": overlay,
        },
    )


@login_required
def import_view(request: HttpRequest) -> HttpResponse:
    if not request.user.is_staff:
        raise Forbidden("Only portal admins may import results.")
    problems: dict[str, Any] = {}
    if request.method == "POST":
        upload = request.FILES.get("file")
        text = request.POST.get("text", "")
        if upload is not None:
            if upload.size > 8 * 1024 * 1024:
                problems["file"] = ["At most 8 MiB."]
            else:
                text = upload.read().decode("utf-8", errors="replace")
        # A QueryDict: the form's text is parsed as text (portal.core.fields); empty fields are not given.
        filled = QueryDict(mutable=True)
        filled.update({key: value for key, value in request.POST.items() if value != ""})
        context = ContextSerializer(data=filled)
        if not context.is_valid():
            problems.update(context.errors)
        if not text.strip():
            problems["text"] = ["Paste the output or choose a file."]
        if not problems:
            try:
                results = result_import(
                    user=request.user,
                    tool=request.POST.get("tool", ""),
                    text=text,
                    context=context.validated_data,
                )
            except InvalidInput as error:
                problems = error.fields
            else:
                messages.info(request, f"Imported {len(results)} result(s).")
                return redirect("benchmarks:result", result_id=results[0].pk)
    return render(
        request,
        "benchmarks/import.html",
        {"tools": TOOLS, "problems": problems, "posted": request.POST},
        status=400 if problems else 200,
    )
