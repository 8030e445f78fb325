"""Writes: record results (from ended jobs, from admin imports), references and their flags, and the
built-in published series."""

import hashlib
import json
import logging
import re
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.benchmarks import parsers
from portal.benchmarks.figures import TOOLS, Figure, figures
from portal.benchmarks.models import CONTEXT_FIELDS, BenchmarkResult, PublishedResult, Reference, Source
from portal.cluster.models import Node, PartitionGpu
from portal.core.errors import InvalidInput, NotFound
from portal.environments.models import Environment
from portal.jobs.job_templates import catalog
from portal.jobs.models import Job, JobState
from portal.jobs.services.logs import job_log_read

logger = logging.getLogger(__name__)

PUBLISHED_FILE = Path(__file__).resolve().parent / "data" / "published_results.json"
MAX_OUTPUT_BYTES = 8 * 1024 * 1024
# What a template prints when the real tool (or GPU, or framework) is missing. Such a run measured
# nothing, whatever numbers it printed: it is kept as unparsed, never as a figure.
SIMULATED = re.compile(r"^.*\bSIMULATED\b.*$", re.MULTILINE)
_FRAMEWORKS = {"torch": "PyTorch", "tensorflow": "TensorFlow", "jax": "JAX"}


def benchmark_tool_of(template_slug: str) -> str | None:
    template = catalog().templates.get(template_slug)
    return getattr(template, "benchmark", None) if template else None


def result_record_from_job(*, job_id: int) -> list[BenchmarkResult]:
    """Parse an ended benchmark job's stdout and record it; [] for jobs of other templates, jobs
    that never ran, and jobs already recorded (so a retried task adds nothing)."""
    job = Job.objects.select_related("user").filter(pk=job_id).first()
    if job is None or not job.is_terminal or job.started_at is None:
        return []
    tool = benchmark_tool_of(job.template)
    if tool is None or BenchmarkResult.objects.filter(job=job).exists():
        return []
    text = _job_output(job)
    parsed = _parse(tool, text)
    if job.state != JobState.COMPLETED and parsed.get("parsed"):
        parsed = {**parsed, "parsed": False, "reason": f"the job ended {job.state}; its figures are not kept"}
    context = _job_context(job, tool)
    try:
        with transaction.atomic():
            return _store(
                tool=tool,
                parsed=parsed,
                context=context,
                source=Source.JOB,
                user=job.user,
                job=job,
                run_at=job.ended_at or timezone.now(),
            )
    except IntegrityError:  # another worker recorded it first
        return []


def result_import(*, user: User, tool: str, text: str, context: Mapping[str, Any]) -> list[BenchmarkResult]:
    """An admin's result from outside the portal, parsed exactly like a job's output."""
    if tool not in TOOLS:
        raise InvalidInput({"tool": [f"Unknown tool; one of: {', '.join(TOOLS)}."]})
    if len(text.encode("utf-8", errors="replace")) > MAX_OUTPUT_BYTES:
        raise InvalidInput({"text": [f"At most {MAX_OUTPUT_BYTES} bytes."]})
    known = {k: v for k, v in context.items() if k in CONTEXT_FIELDS and v not in (None, "")}
    run_at = context.get("run_at") or timezone.now()
    with transaction.atomic():
        return _store(
            tool=tool,
            parsed=_parse(tool, text),
            context=known,
            source=Source.IMPORT,
            user=user,
            job=None,
            run_at=run_at,
        )


def _parse(tool: str, text: str) -> dict[str, Any]:
    if simulated := SIMULATED.search(text):
        return {
            "parsed": False,
            "reason": f"simulated output, nothing was measured: {simulated.group(0).strip()[:200]}",
        }
    return parsers.parse(tool, text)


def _store(
    *,
    tool: str,
    parsed: dict[str, Any],
    context: Mapping[str, Any],
    source: str,
    user: User | None,
    job: Job | None,
    run_at: Any,
) -> list[BenchmarkResult]:
    found = figures(tool, parsed)
    if not found:
        reason = parsed.get("reason") or ("" if parsed.get("parsed") else "not parsed")
        found = [Figure(case="", metric="", value=None, unit="")]
    else:
        reason = ""
    results = []
    for figure in found:
        values = {
            **{k: v for k, v in figure.context.items() if k in CONTEXT_FIELDS and v not in (None, "")},
            **context,
        }
        result = BenchmarkResult(
            tool=tool,
            case=figure.case,
            source=source,
            user=user,
            job=job,
            run_at=run_at,
            metric=figure.metric,
            value=figure.value,
            unit=figure.unit,
            parsed=bool(parsed.get("parsed")) and figure.value is not None,
            reason=reason or ("" if figure.value is not None else "the output has no value for this case"),
            data=_jsonable(parsed),
            **{k: _clip(BenchmarkResult, k, v) for k, v in values.items()},
        )
        if result.parsed:
            _flag(result)
        results.append(result)
    return BenchmarkResult.objects.bulk_create(results)


def _clip(model: type, name: str, value: Any) -> Any:
    limit = getattr(model._meta.get_field(name), "max_length", None)
    return str(value)[:limit] if limit else value


def _jsonable(parsed: dict[str, Any]) -> dict[str, Any]:
    """PostgreSQL's jsonb refuses NUL characters and non-finite numbers; parsers may pass them on."""
    text = json.dumps(parsed, default=str).replace("\\u0000", "")
    return json.loads(text.replace("NaN", "null").replace("-Infinity", "null").replace("Infinity", "null"))


def _job_output(job: Job) -> str:
    chunks, offset = [], 0
    while offset < MAX_OUTPUT_BYTES:
        chunk = job_log_read(job=job, stream="stdout", offset=offset, limit=1024 * 1024)
        chunks.append(chunk.text)
        if not chunk.exists or chunk.next_offset >= chunk.size or chunk.next_offset == offset:
            break
        offset = chunk.next_offset
    return "".join(chunks)


def _job_context(job: Job, tool: str) -> dict[str, Any]:
    params = job.parameters or {}
    context: dict[str, Any] = {
        "partition": job.partition,
        "nodes": job.nodes,
        "gpus": job.gpus_allocated if job.gpus_allocated is not None else job.gpus,
        "gpu_type": gpu_type_of(job),
    }
    if isinstance(params.get("precision"), str):
        context["precision"] = params["precision"]
    if isinstance(params.get("batch_size"), int):
        context["batch_size_per_gpu"] = params["batch_size"]
    if isinstance(params.get("model"), str):
        context["model"] = params["model"]
    environment = params.get("environment") or ""
    context["environment"] = environment
    if params.get("environment"):
        frameworks = (
            Environment.objects.filter(name=params["environment"])
            .values_list("frameworks", flat=True)
            .first()
        ) or {}
        for name, title in _FRAMEWORKS.items():
            if name in frameworks and tool in ("tf_cnn_benchmarks", "dle_resnet", "mlperf"):
                context.update(framework=title, framework_version=str(frameworks[name]))
                break
    return {k: v for k, v in context.items() if v not in (None, "")}


def gpu_type_of(job: Job) -> str:
    """The GPU type Slurm's GRES gave the job: its nodes' types from its own cluster's snapshot, else
    the partition's when it has only one."""
    types: set[str] = set()
    if job.node_list:
        for node in Node.every_cluster.filter(cluster=job.cluster, name__in=hostlist_expand(job.node_list)
                                              ).values_list("gpus", flat=True):
            types.update(kind for kind, count in (node or {}).items() if count)
    if not types:
        types = set(
            PartitionGpu.objects.filter(partition__cluster=job.cluster, partition__name=job.partition,
                                        total__gt=0).values_list("gpu_type", flat=True)
        )
    types.discard("")
    return ",".join(sorted(types))


def hostlist_expand(text: str, limit: int = 1024) -> list[str]:
    """'node[1-3,7],gpu01' -> ['node1', 'node2', 'node3', 'node7', 'gpu01'] (Slurm's compact form)."""
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]*)\]|([^,\[\]]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            low, _, high = part.partition("-")
            if not low.isdigit() or (high and not high.isdigit()):
                continue
            for number in range(int(low), int(high or low) + 1):
                names.append(f"{prefix}{number:0{len(low)}d}")
                if len(names) >= limit:
                    return names
    return names


# References and flags.


def _specificity(reference: Reference) -> int:
    return sum(
        bool(v)
        for v in (
            reference.model,
            reference.precision,
            reference.gpus,
            reference.case,
            reference.partition,
            reference.gpu_type,
        )
    )


def reference_for(result: BenchmarkResult, candidates: Iterable[Reference] | None = None) -> Reference | None:
    """The most specific reference whose key and scope match the result (newest on a tie)."""
    if candidates is None:
        candidates = Reference.objects.filter(tool=result.tool, metric=result.metric)
    matching = [
        r
        for r in candidates
        if r.tool == result.tool
        and r.metric == result.metric
        and all(
            not want or want == have
            for want, have in (
                (r.model, result.model),
                (r.precision, result.precision),
                (r.gpus, result.gpus),
                (r.case, result.case),
                (r.partition, result.partition),
                (r.gpu_type, result.gpu_type),
            )
        )
    ]
    return max(matching, key=lambda r: (_specificity(r), r.pk or 0), default=None)


def _flag(result: BenchmarkResult) -> None:
    reference = reference_for(result)
    result.reference = reference
    if reference is None or result.value is None:
        return
    if reference.outside(result.value):
        low, high = reference.bounds
        span = f"[{'-' if low is None else f'{low:.4g}'}, {'-' if high is None else f'{high:.4g}'}]"
        result.flagged = True
        result.flag_reason = (
            f"{result.value:.4g} {result.unit} is outside {span} "
            f"(reference {reference.value:.4g}, #{reference.pk})"
        )[:300]


def _check_fraction(name: str, value: float | None, sign: int) -> list[str]:
    if value is None:
        return []
    if not -1 <= value <= 10 or (value * sign < 0):
        return [f"A fraction of the value: {'≤ 0, e.g. -0.1' if sign < 0 else '≥ 0, e.g. 0.1'}."]
    return []


@transaction.atomic
def reference_create(
    *,
    user: User,
    tool: str,
    metric: str,
    value: float,
    lower: float | None,
    upper: float | None,
    unit: str = "",
    name: str = "",
    model: str = "",
    precision: str = "",
    gpus: int | None = None,
    case: str = "",
    partition: str = "",
    gpu_type: str = "",
) -> Reference:
    problems = {}
    if tool not in TOOLS:
        problems["tool"] = [f"Unknown tool; one of: {', '.join(TOOLS)}."]
    if not value > 0:
        problems["value"] = ["Must be greater than 0."]
    for field, fraction, sign in (("lower", lower, -1), ("upper", upper, 1)):
        if message := _check_fraction(field, fraction, sign):
            problems[field] = message
    if problems:
        raise InvalidInput(problems)
    return Reference.objects.create(
        name=name,
        tool=tool,
        metric=metric,
        value=value,
        lower=lower,
        upper=upper,
        unit=unit,
        model=model,
        precision=precision,
        gpus=gpus,
        case=case,
        partition=partition,
        gpu_type=gpu_type,
        created_by=user,
    )


@transaction.atomic
def reference_derive(
    *,
    user: User,
    result_ids: list[int],
    lower: float | None,
    upper: float | None,
    name: str = "",
    partition: str | None = None,
    gpu_type: str | None = None,
) -> Reference:
    """A reference at the median of chosen past runs, which must all measure the same thing.

    Scope: the runs' own partition and GPU type unless given (empty = any)."""
    results = list(BenchmarkResult.objects.filter(pk__in=result_ids, parsed=True, value__isnull=False))
    if not results or len(results) != len(set(result_ids)):
        raise InvalidInput({"derive_from": ["Give ids of parsed results with a value."]})
    keys = {(r.tool, r.metric, r.model, r.precision, r.gpus, r.case, r.unit) for r in results}
    if len(keys) > 1:
        raise InvalidInput(
            {
                "derive_from": [
                    "The results measure different things (tool, metric, model, "
                    "precision, GPUs or case differ)."
                ]
            }
        )
    first = results[0]
    scope = {"partition": partition, "gpu_type": gpu_type}
    for field in scope:
        if scope[field] is None:
            own = {getattr(r, field) for r in results}
            scope[field] = own.pop() if len(own) == 1 else ""
    reference = reference_create(
        user=user,
        tool=first.tool,
        metric=first.metric,
        value=statistics.median(r.value for r in results),
        lower=lower,
        upper=upper,
        unit=first.unit,
        name=name,
        model=first.model,
        precision=first.precision,
        gpus=first.gpus,
        case=first.case,
        **scope,
    )
    reference.origin = Reference.Origin.DERIVED
    reference.derived_from = sorted(r.pk for r in results)
    reference.save(update_fields=["origin", "derived_from"])
    return reference


def result_get_or_404(result_id: int) -> BenchmarkResult:
    result = BenchmarkResult.objects.filter(pk=result_id).first()
    if result is None:
        raise NotFound("No such benchmark result.")
    return result


# The built-in published series.


def published_entries(path: Path = PUBLISHED_FILE) -> list[dict[str, Any]]:
    return json.loads(path.read_text())


def published_load(model: type = PublishedResult, path: Path = PUBLISHED_FILE) -> int:
    """Load the shipped data file (idempotent: rows are keyed by a digest of their entry; entries no
    longer in the file go). `model` lets the data migration pass its historical model."""
    wanted = {}
    for entry in published_entries(path):
        if not isinstance(entry.get("value"), int | float) or not entry.get("source"):
            continue
        key = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()
        wanted[key] = model(
            key=key,
            source=entry["source"],
            section=entry.get("section") or "",
            benchmark=entry.get("benchmark") or "",
            model=entry.get("model") or "",
            framework=entry.get("framework") or "",
            precision=entry.get("precision") or "",
            gpu=entry.get("gpu") or "",
            gpus=entry.get("gpus"),
            nodes=entry.get("nodes"),
            batch_size_per_gpu=entry.get("batch_size_per_gpu"),
            metric=entry.get("metric") or "",
            value=float(entry["value"]),
            unit=entry.get("unit") or "",
            notes=entry.get("notes") or "",
            entry=entry,
        )
    with transaction.atomic():
        model.objects.exclude(key__in=list(wanted)).delete()
        have = set(model.objects.values_list("key", flat=True))
        model.objects.bulk_create([row for key, row in wanted.items() if key not in have])
    return len(wanted)
