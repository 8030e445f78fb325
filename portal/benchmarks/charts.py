"""Vega-Lite specs (dicts with their data inline) for the benchmark pages: built here from bounded
queries, rendered by core/chart.html (PNG/SVG from vega-embed's menu, CSV from the same rows).

Every chart has one `data.values` table with the same columns in each row (so its CSV is whole);
layers pick their rows with a filter on `kind`. A reference series is one more layer, labelled with
its source: a site reference as its band, a published figure with its document and section.
"""

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from portal.benchmarks.models import BenchmarkResult, PublishedResult, Reference
from portal.benchmarks.selectors import ResultFilters, result_list

SCHEMA = "https://vega.github.io/schema/vega-lite/v5.json"
# Charts read at most this many of the newest matching results: one bounded query whatever the history.
CHART_ROWS = 2000
HISTORY_POINTS = 500
_PRECISION_WORDS = {"fp16": ("fp16", "mixed", "amp"), "amp": ("fp16", "mixed", "amp"), "fp32": ("fp32",)}


def _base(
    title: str, rows: list[dict[str, Any]], layers: list[dict[str, Any]], **extra: Any
) -> dict[str, Any]:
    return {
        "$schema": SCHEMA,
        "title": title,
        "width": "container",
        "height": 320,
        "data": {"values": rows},
        "layer": layers,
        "config": {"legend": {"orient": "bottom", "labelLimit": 700, "columns": 1}},
        **extra,
    }


def _series_rows(
    filters: ResultFilters, *, user: Any, fields: Iterable[str], limit: int = CHART_ROWS
) -> list[dict[str, Any]]:
    return list(
        result_list(user=user, filters=filters)
        .filter(parsed=True, value__isnull=False)
        .values(*fields)[:limit]
    )


def _published_matching(
    *, model: str, metric: str, precision: str | None, benchmark: str
) -> list[PublishedResult]:
    rows = PublishedResult.objects.defer("entry").filter(metric=metric, benchmark=benchmark)
    if model:
        rows = rows.filter(model__icontains=_model_word(model))
    words = _PRECISION_WORDS.get((precision or "").lower())
    found = list(rows[:500])
    same = [r for r in found if words and any(w in r.precision.lower() for w in words)]
    # The papers state few precisions (ResNet-50: FP16 only); without a match every figure stays,
    # each labelled with its own precision.
    return same or found


def _model_word(model: str) -> str:
    """'resnet50' (tf_cnn_benchmarks' name) matches the papers' 'ResNet-50 V1.5'."""
    lowered = model.lower().replace("_", "").replace("-", "")
    return "ResNet-50" if lowered.startswith("resnet50") else model


def published_label(row: PublishedResult) -> str:
    return f"Published: {row.source}; {row.section} ({row.gpu}, {row.precision or 'precision not stated'})"


def scaling_chart(
    *, user: Any, filters: ResultFilters, overlay_published: bool = True, references: Iterable[Reference] = ()
) -> dict[str, Any]:
    """Throughput against GPU count: the median per count, the ideal line from the smallest count,
    and the scaling efficiency (throughput / ideal) at each point."""
    results = _series_rows(filters, user=user, fields=("gpus", "value", "unit", "model", "precision"))
    by_gpus: dict[int, list[float]] = defaultdict(list)
    for row in results:
        if row["gpus"]:
            by_gpus[row["gpus"]].append(row["value"])
    label = f"This site: {filters.model or 'any model'}, {filters.precision or 'any precision'}" + (
        f", {filters.gpu_type}" if filters.gpu_type else ""
    )
    rows: list[dict[str, Any]] = []
    if by_gpus:
        smallest = min(by_gpus)
        per_gpu = statistics.median(by_gpus[smallest]) / smallest
        for gpus in sorted(by_gpus):
            measured = statistics.median(by_gpus[gpus])
            ideal = per_gpu * gpus
            rows.append(_scaling_row("measured", label, gpus, measured, ideal, len(by_gpus[gpus])))
            rows.append(_scaling_row("ideal", f"Ideal (linear from {smallest} GPU)", gpus, ideal, ideal, 0))
    if overlay_published:
        for published in _published_matching(
            model=filters.model or "resnet50",
            metric="images_per_sec",
            precision=filters.precision,
            benchmark="training",
        ):
            if published.gpus:
                rows.append(
                    _scaling_row(
                        "published",
                        published_label(published),
                        published.gpus,
                        published.value,
                        None,
                        1,
                        source=published.citation,
                    )
                )
    for reference in references:
        if reference.gpus:
            rows.append(
                _scaling_row(
                    "reference",
                    f"Reference #{reference.pk}: {reference}",
                    reference.gpus,
                    reference.value,
                    None,
                    0,
                    source="site reference",
                )
            )
    x = {"field": "gpus", "type": "quantitative", "title": "GPUs", "axis": {"tickMinStep": 1}}
    y = {"field": "images_per_sec", "type": "quantitative", "title": "images/sec"}
    if any(row["kind"] in ("published", "reference") for row in rows):
        # Published GPU figures and a CPU test bed differ by orders of magnitude: both stay readable.
        y["scale"] = {"type": "log"}
        y["title"] = "images/sec (log scale)"
    color = {"field": "series", "type": "nominal", "title": None}
    tooltip = [{"field": f} for f in ("series", "gpus", "images_per_sec", "efficiency_pct", "runs", "source")]
    layers = [
        {
            "transform": [{"filter": "datum.kind == 'ideal'"}],
            "mark": {"type": "line", "strokeDash": [6, 4], "color": "#888"},
            "encoding": {"x": x, "y": y, "color": color},
        },
        {
            "transform": [{"filter": "datum.kind == 'measured'"}],
            "mark": {"type": "line", "point": True},
            "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip},
        },
        {
            "transform": [{"filter": "datum.kind == 'measured'"}],
            "mark": {"type": "text", "dy": -12, "fontSize": 11},
            "encoding": {"x": x, "y": y, "text": {"field": "efficiency_label"}},
        },
        {
            "transform": [{"filter": "datum.kind == 'published' || datum.kind == 'reference'"}],
            "mark": {"type": "point", "shape": "diamond", "filled": True, "size": 70},
            "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip},
        },
    ]
    return _base(
        "Throughput vs GPUs (dashed: ideal linear scaling; labels: scaling efficiency)", rows, layers
    )


def _scaling_row(
    kind: str, series: str, gpus: int, value: float, ideal: float | None, runs: int, source: str = ""
) -> dict[str, Any]:
    efficiency = round(100 * value / ideal, 1) if ideal else None
    return {
        "kind": kind,
        "series": series,
        "gpus": gpus,
        "images_per_sec": round(value, 2),
        "ideal_images_per_sec": round(ideal, 2) if ideal else None,
        "efficiency_pct": efficiency,
        "efficiency_label": f"{efficiency:g} %" if efficiency is not None and kind == "measured" else "",
        "runs": runs,
        "source": source,
    }


def precision_chart(*, user: Any, filters: ResultFilters) -> dict[str, Any]:
    """Median throughput per precision and GPU count, with the speedup over FP32 at each count."""
    base = ResultFilters(**{**filters.__dict__, "precision": None})
    results = _series_rows(base, user=user, fields=("gpus", "precision", "value"))
    groups: dict[tuple[int, str], list[float]] = defaultdict(list)
    for row in results:
        groups[(row["gpus"] or 0, row["precision"] or "unknown")].append(row["value"])
    medians = {key: statistics.median(values) for key, values in groups.items()}
    rows = []
    for (gpus, precision), value in sorted(medians.items()):
        fp32 = medians.get((gpus, "fp32"))
        speedup = round(value / fp32, 2) if fp32 else None
        rows.append(
            {
                "kind": "measured",
                "gpus": gpus,
                "precision": precision,
                "images_per_sec": round(value, 2),
                "speedup_vs_fp32": speedup,
                "speedup_label": f"x{speedup:g}" if speedup else "",
                "runs": len(groups[(gpus, precision)]),
                "source": "this site",
            }
        )
    x = {"field": "gpus", "type": "ordinal", "title": "GPUs"}
    y = {"field": "images_per_sec", "type": "quantitative", "title": "images/sec"}
    layers = [
        {
            "mark": "bar",
            "encoding": {
                "x": x,
                "y": y,
                "xOffset": {"field": "precision"},
                "color": {"field": "precision", "type": "nominal"},
                "tooltip": [
                    {"field": f} for f in ("gpus", "precision", "images_per_sec", "speedup_vs_fp32", "runs")
                ],
            },
        },
        {
            "mark": {"type": "text", "dy": -6},
            "encoding": {
                "x": x,
                "y": y,
                "xOffset": {"field": "precision"},
                "text": {"field": "speedup_label"},
            },
        },
    ]
    return _base(
        f"AMP/FP16 vs FP32: {filters.model or 'any model'} (labels: speedup over FP32)", rows, layers
    )


def _with_rules(
    rows: list[dict[str, Any]], layers: list[dict[str, Any]], rules: list[tuple[str, float]], field: str
) -> None:
    """Overlay reference values as horizontal rules, each labelled with where it comes from (a site
    reference, a published document); a row per rule with the table's own columns keeps the CSV whole."""
    if not rules:
        return
    columns = list(rows[0]) if rows else ["kind", field]
    for row in rows:
        row.setdefault("reference", None)
    rows.extend(
        {**dict.fromkeys(columns), "kind": "reference", field: value, "reference": label}
        for label, value in rules
    )
    layers[0].setdefault("transform", []).append({"filter": "datum.kind != 'reference'"})
    layers.append(
        {
            "transform": [{"filter": "datum.kind == 'reference'"}],
            "mark": {"type": "rule", "strokeDash": [4, 3], "size": 2},
            "encoding": {
                "y": {"field": field, "type": "quantitative"},
                "color": {"field": "reference", "type": "nominal", "title": None},
                "tooltip": [{"field": "reference"}, {"field": field}],
            },
        }
    )


def _site_rules(references: Iterable[Reference], metric: str) -> list[tuple[str, float]]:
    return [(f"Reference #{r.pk}: {r}", r.value) for r in references if r.metric == metric]


def storage_chart(
    *,
    user: Any,
    filters: ResultFilters,
    measure: str = "bw_mib_s",
    references: Iterable[Reference] = (),
    overlay_published: bool = False,
) -> dict[str, Any]:
    """fio bandwidth (or IOPS) by block size and pattern: the median over the matching runs."""
    base = ResultFilters(**{**filters.__dict__, "tool": "fio"})
    results = (
        result_list(user=user, filters=base)
        .filter(parsed=True, value__isnull=False)
        .values("case", "value", "data")[: CHART_ROWS // 4]
    )
    groups: dict[tuple[str, str], list[tuple[float, float | None]]] = defaultdict(list)
    for row in results:
        words = row["case"].split()
        pattern, block = [*words, "", ""][:2]
        iops = _fio_iops(row["data"], pattern, block)
        groups[(pattern, block)].append((row["value"], iops))
    rows = []
    for (pattern, block), values in sorted(groups.items()):
        iops = [i for _, i in values if i is not None]
        rows.append(
            {
                "kind": "measured",
                "pattern": pattern,
                "block_size": block,
                "bw_mib_s": round(statistics.median(v for v, _ in values), 2),
                "iops": round(statistics.median(iops), 1) if iops else None,
                "runs": len(values),
            }
        )
    title = "MiB/s" if measure == "bw_mib_s" else "IOPS"
    layers = [
        {
            "mark": "bar",
            "encoding": {
                "x": {"field": "block_size", "type": "nominal", "title": "block size"},
                "xOffset": {"field": "pattern"},
                "color": {"field": "pattern", "type": "nominal"},
                "y": {"field": measure, "type": "quantitative", "title": title},
                "tooltip": [{"field": f} for f in ("pattern", "block_size", "bw_mib_s", "iops", "runs")],
            },
        }
    ]
    if measure == "bw_mib_s":
        rules = _site_rules(references, "bw_mib_s")
        if overlay_published:
            # The papers give fio read bandwidth in MB/s (10^6 bytes); the chart is in MiB/s.
            for row in PublishedResult.objects.defer("entry").filter(benchmark="fio", metric="read_MBps"):
                mib = row.value * 1e6 / 2**20
                # What tells the two apart first: the legend cuts long labels (the tooltip has it all).
                label = f"Published: fio read {row.value:g} MB/s, {row.notes} ({row.citation})"
                rules.append((label, round(mib, 1)))
        _with_rules(rows, layers, rules, "bw_mib_s")
    return _base(f"Storage (fio): {title} by block size and pattern", rows, layers)


def _fio_iops(data: dict[str, Any], pattern: str, block: str) -> float | None:
    for job in (data or {}).get("jobs") or []:
        if job.get("rw") == pattern and str(job.get("bs")) == block:
            side = job.get("read") if "read" in pattern else job.get("write")
            return (side or {}).get("iops")
    return None


def nccl_chart(*, results: Iterable[BenchmarkResult], references: Iterable[Reference] = ()) -> dict[str, Any]:
    """Bus bandwidth against message size, one line per chosen nccl-tests run (out-of-place)."""
    rows = []
    for result in results:
        for row in (result.data or {}).get("rows") or []:
            if row.get("size_bytes") and row.get("oop_busbw_gbps") is not None:
                rows.append(
                    {
                        "kind": "measured",
                        "series": f"#{result.pk} {result.case} {result.gpus or '?'} GPUs",
                        "size_bytes": row["size_bytes"],
                        "busbw_gbps": row["oop_busbw_gbps"],
                        "algbw_gbps": row.get("oop_algbw_gbps"),
                    }
                )
    layers = [
        {
            "mark": {"type": "line", "point": True},
            "encoding": {
                "x": {
                    "field": "size_bytes",
                    "type": "quantitative",
                    "scale": {"type": "log", "base": 2},
                    "title": "message size (bytes)",
                },
                "y": {"field": "busbw_gbps", "type": "quantitative", "title": "bus bandwidth (GB/s)"},
                "color": {"field": "series", "type": "nominal", "title": None},
                "tooltip": [{"field": f} for f in ("series", "size_bytes", "busbw_gbps", "algbw_gbps")],
            },
        }
    ]
    _with_rules(rows, layers, _site_rules(references, "busbw_gbps"), "busbw_gbps")
    return _base("NCCL bus bandwidth vs message size", rows, layers)


_P2P_PUBLISHED = re.compile(r"^unidir_p2p_enabled_bw_GBps\[(\d+)->(\d+)\]$")


def p2p_chart(*, result: BenchmarkResult | None, overlay_published: bool = True) -> dict[str, Any]:
    """The unidirectional P2P-enabled bandwidth matrix as a heat map; beside it, the published matrix
    of the same test (a DGX-class node in the architecture guide), labelled with its document."""
    rows = []
    if result is not None:
        series = f"This site: result #{result.pk} ({result.gpu_type or 'GPU type unknown'})"
        matrix = (result.data or {}).get("p2p_enabled_unidirectional_gbps") or []
        rows = [
            {"kind": "measured", "series": series, "from_gpu": i, "to_gpu": j, "gbps": value, "source": ""}
            for i, line in enumerate(matrix)
            for j, value in enumerate(line or [])
        ]
    if overlay_published:
        for row in PublishedResult.objects.defer("entry").filter(
            metric__startswith="unidir_p2p_enabled_bw_GBps["
        ):
            if match := _P2P_PUBLISHED.match(row.metric):
                rows.append(
                    {
                        "kind": "published",
                        "series": f"Published: {row.gpu or 'GPUs'}",
                        "from_gpu": int(match[1]),
                        "to_gpu": int(match[2]),
                        "gbps": row.value,
                        "source": row.citation,
                    }
                )
    cell = {
        "x": {"field": "to_gpu", "type": "ordinal", "title": "to GPU"},
        "y": {"field": "from_gpu", "type": "ordinal", "title": "from GPU"},
    }
    layers = [
        {
            "mark": "rect",
            "encoding": {
                **cell,
                "color": {"field": "gbps", "type": "quantitative", "title": "GB/s", "scale": {"type": "log"}},
                "tooltip": [{"field": f} for f in ("series", "from_gpu", "to_gpu", "gbps", "source")],
            },
        },
        {
            "mark": {"type": "text", "fontSize": 10},
            "encoding": {**cell, "text": {"field": "gbps", "format": ".1f"}},
        },
    ]
    sources = sorted({row["source"] for row in rows if row["source"]})
    return {
        "$schema": SCHEMA,
        "title": {
            "text": "GPU peer-to-peer bandwidth, unidirectional, P2P enabled (GB/s)",
            "subtitle": [f"Published: {source}" for source in sources],
        },
        "data": {"values": rows},
        "facet": {
            "column": {"field": "series", "type": "nominal", "title": None, "header": {"labelLimit": 300}}
        },
        "spec": {"width": 260, "height": 260, "layer": layers},
    }


def history_chart(
    *, user: Any, filters: ResultFilters, references: Iterable[Reference] = ()
) -> dict[str, Any]:
    """A figure over time for one series, each run a point (flagged ones in red), with the
    reference value and its band as an overlay labelled with the reference."""
    # Points over time: the newest HISTORY_POINTS runs are what a person can tell apart.
    results = _series_rows(
        filters,
        user=user,
        fields=("id", "run_at", "value", "unit", "flagged", "gpus", "case"),
        limit=HISTORY_POINTS,
    )
    rows = [
        {
            "kind": "measured",
            "series": "runs",
            "id": r["id"],
            "run_at": r["run_at"].isoformat(),
            "value": r["value"],
            "unit": r["unit"],
            "flagged": r["flagged"],
            "gpus": r["gpus"],
            "case": r["case"],
            "low": None,
            "high": None,
        }
        for r in results
    ]
    for reference in references:
        low, high = reference.bounds
        for row in results[:1] + results[-1:]:
            rows.append(
                {
                    "kind": "reference",
                    "series": f"Reference #{reference.pk}: {reference}",
                    "id": None,
                    "run_at": row["run_at"].isoformat(),
                    "value": reference.value,
                    "unit": reference.unit,
                    "flagged": False,
                    "gpus": reference.gpus,
                    "case": reference.case,
                    "low": low,
                    "high": high,
                }
            )
    x = {"field": "run_at", "type": "temporal", "title": "run"}
    y = {"field": "value", "type": "quantitative", "title": results[0]["unit"] if results else "value"}
    layers = [
        {
            "transform": [{"filter": "datum.kind == 'reference'"}],
            "mark": {"type": "area", "opacity": 0.15},
            "encoding": {
                "x": x,
                "y": {"field": "low", "type": "quantitative"},
                "y2": {"field": "high"},
                "color": {"field": "series", "type": "nominal", "title": None},
            },
        },
        {
            "transform": [{"filter": "datum.kind == 'reference'"}],
            "mark": {"type": "line", "strokeDash": [4, 3]},
            "encoding": {"x": x, "y": y, "color": {"field": "series", "type": "nominal", "title": None}},
        },
        {
            "transform": [{"filter": "datum.kind == 'measured'"}],
            "mark": {"type": "point", "filled": True},
            "encoding": {
                "x": x,
                "y": y,
                "color": {"condition": {"test": "datum.flagged", "value": "#c0392b"}, "value": "#2c6fbb"},
                "tooltip": [
                    {"field": f} for f in ("id", "run_at", "value", "unit", "gpus", "case", "flagged")
                ],
            },
        },
    ]
    return _base("History (red: outside its reference)", rows, layers)


# Inference (the inference-benchmark template and trtexec): one run's rows, from its result's data.

_PERCENTILES = (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99"))


def inference_rows(result: BenchmarkResult) -> list[dict[str, Any]]:
    """The run's measured rows (every precision and batch size), whichever of its results is given."""
    data = result.data or {}
    if result.tool == "trtexec":
        latency = data.get("latency_ms") or {}
        rows = [{"precision": data.get("precision") or "?", "batch_size": data.get("batch_size"),
                 "engine": "tensorrt", "images_per_sec": data.get("images_per_sec"),
                 "p50_ms": latency.get("median"), "p90_ms": latency.get("p90"), "p99_ms": latency.get("p99")}]
    else:
        rows = data.get("rows") or []
    return [row for row in rows if row.get("images_per_sec") is not None and row.get("batch_size")]


def inference_published(result: BenchmarkResult) -> list[PublishedResult]:
    """Published TensorRT inference figures for the result's model and GPU: none unless both match
    (a ResNet-50 figure says nothing of another network, a V100's nothing of another GPU)."""
    model = _model_word(result.model or "")
    types = [t.strip().lower() for t in (result.gpu_type or "").split(",") if t.strip()]
    if model != "ResNet-50" or not types:
        return []
    rows = PublishedResult.objects.defer("entry").filter(benchmark="inference", model=model)
    return [row for row in rows if any(t in row.gpu.lower() for t in types)]


def _inference_base(title: str, rows: list[dict[str, Any]], layers: list[dict[str, Any]]) -> dict[str, Any]:
    """The marks stay out of the accessibility tree (an empty layer's container has no name for axe):
    the drawing is one named image, and the page's tables say what it shows."""
    spec = _base(title, rows, layers)
    spec["config"]["mark"] = {"aria": False}
    return spec


def inference_throughput_chart(result: BenchmarkResult) -> dict[str, Any]:
    """Throughput against batch size, one line per precision; published throughputs for the same
    model and GPU as diamonds."""
    rows = [
        {"kind": "measured", "series": row["precision"], "batch_size": row["batch_size"],
         "images_per_sec": row["images_per_sec"], "source": "this run"}
        for row in inference_rows(result)
    ]
    rows += [
        {"kind": "published", "series": published_label(p), "batch_size": p.batch_size_per_gpu,
         "images_per_sec": p.value, "source": p.citation}
        for p in inference_published(result)
        if p.metric == "images_per_sec" and p.batch_size_per_gpu
    ]
    x = {"field": "batch_size", "type": "quantitative", "title": "batch size",
         "scale": {"type": "log", "base": 2}}
    y = {"field": "images_per_sec", "type": "quantitative", "title": "images/s"}
    color = {"field": "series", "type": "nominal", "title": None}
    tooltip = [{"field": f} for f in ("series", "batch_size", "images_per_sec", "source")]
    layers = [
        {"transform": [{"filter": "datum.kind == 'measured'"}], "mark": {"type": "line", "point": True},
         "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip}},
        {"transform": [{"filter": "datum.kind == 'published'"}],
         "mark": {"type": "point", "shape": "diamond", "filled": True, "size": 80},
         "encoding": {"x": x, "y": y, "color": color, "tooltip": tooltip}},
    ]
    return _inference_base("Throughput vs batch size, one line per precision", rows, layers)


def inference_latency_chart(result: BenchmarkResult) -> dict[str, Any]:
    """Latency percentiles against throughput (each point a batch size, labelled): the largest batch
    under a latency target is the last point below it. A published latency for the same model and
    GPU is a labelled rule."""
    rows = [
        {"kind": "measured", "series": f"{row['precision']} {label}", "precision": row["precision"],
         "percentile": label, "batch_size": row["batch_size"], "images_per_sec": row["images_per_sec"],
         "latency_ms": row[key], "label": f"b{row['batch_size']}"}
        for row in inference_rows(result)
        for key, label in _PERCENTILES
        if row.get(key) is not None
    ]
    x = {"field": "images_per_sec", "type": "quantitative", "title": "images/s"}
    y = {"field": "latency_ms", "type": "quantitative", "title": "latency (ms)"}
    layers: list[dict[str, Any]] = [
        {"mark": {"type": "line", "point": True},
         "encoding": {"x": x, "y": y, "color": {"field": "precision", "type": "nominal"},
                      "strokeDash": {"field": "percentile", "type": "nominal"},
                      "detail": {"field": "series"},
                      "tooltip": [{"field": f} for f in ("precision", "percentile", "batch_size",
                                                         "images_per_sec", "latency_ms")]}},
        {"transform": [{"filter": "datum.percentile == 'p99'"}], "mark": {"type": "text", "dy": -9},
         "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
    ]
    rules = [(f"{published_label(p)}: ~{p.value:g} ms ({p.notes})"[:300], p.value)
             for p in inference_published(result) if p.metric == "latency_ms_approx"]
    _with_rules(rows, layers, rules, "latency_ms")
    title = "Latency percentiles vs throughput (labels: batch size on the p99 line)"
    return _inference_base(title, rows, layers)


_SPEEDUPS = {
    "int8_over_fp32_speedup_min_batch_lt_64": "batch < 64, low end",
    "int8_over_fp32_speedup_max_batch_lt_64": "batch < 64, high end",
    "int8_over_fp32_speedup_batch_gt_64": "batch > 64",
}


def inference_speedups(result: BenchmarkResult, over: str = "int8") -> list[dict[str, Any]]:
    """`over`'s throughput divided by FP32's, per batch size both ran."""
    rows = inference_rows(result)
    fp32 = {r["batch_size"]: r["images_per_sec"] for r in rows if r["precision"] == "fp32"}
    return [
        {"kind": "measured", "batch_size": b, "speedup": round(r["images_per_sec"] / fp32[b], 2),
         "label": f"x{r['images_per_sec'] / fp32[b]:.2f}"}
        for r in rows
        if r["precision"] == over and (b := r["batch_size"]) in fp32 and fp32[b]
    ]


def inference_speedup_chart(result: BenchmarkResult) -> dict[str, Any]:
    """INT8's speed-up over FP32 at each batch size; the published TensorRT speed-ups for the same
    model and GPU as labelled rules."""
    rows = inference_speedups(result)
    x = {"field": "batch_size", "type": "ordinal", "title": "batch size"}
    y = {"field": "speedup", "type": "quantitative", "title": "INT8 images/s ÷ FP32 images/s"}
    layers: list[dict[str, Any]] = [
        {"mark": "bar",
         "encoding": {"x": x, "y": y, "tooltip": [{"field": "batch_size"}, {"field": "speedup"}]}},
        {"mark": {"type": "text", "dy": -6}, "encoding": {"x": x, "y": y, "text": {"field": "label"}}},
    ]
    rules = [(f"Published: x{p.value:g} at {_SPEEDUPS[p.metric]} ({p.gpu}, {p.framework}; {p.citation})",
              p.value) for p in inference_published(result) if p.metric in _SPEEDUPS]
    _with_rules(rows, layers, rules, "speedup")
    return _inference_base("INT8 speed-up over FP32 per batch size (1 = as fast)", rows, layers)


def inference_accuracy(result: BenchmarkResult) -> list[dict[str, Any]]:
    """Top-1/top-5 of each precision against FP32 as the run printed them, then the published
    figures for the same model and GPU (percent)."""
    rows = []
    for precision, figures in ((result.data or {}).get("accuracy") or {}).items():
        rows.append({
            "source": "this run", "precision": precision, "images": figures.get("images"),
            "fp32_top1": figures.get("fp32_top1_pct"), "top1": figures.get("top1_pct"),
            "top1_diff": figures.get("top1_diff_points"), "fp32_top5": figures.get("fp32_top5_pct"),
            "top5": figures.get("top5_pct"), "top5_diff": figures.get("top5_diff_points")})
    published = {(p.precision, p.metric): p for p in inference_published(result)}
    if ("INT8", "top1_pct") in published and ("FP32", "top1_pct") in published:
        cite = published[("INT8", "top1_pct")]
        value = lambda precision, metric: getattr(published.get((precision, metric)), "value", None)  # noqa: E731
        rows.append({
            "source": f"Published: {cite.citation} ({cite.gpu}, {cite.framework})", "precision": "int8",
            "images": None, "fp32_top1": value("FP32", "top1_pct"), "top1": value("INT8", "top1_pct"),
            # The paper prints FP32 minus INT8; the table's difference is INT8 minus FP32.
            "top1_diff": -d if (d := value("FP32 minus INT8", "top1_diff_pct")) is not None else None,
            "fp32_top5": value("FP32", "top5_pct"), "top5": value("INT8", "top5_pct"),
            "top5_diff": -d if (d := value("FP32 minus INT8", "top5_diff_pct")) is not None else None})
    return rows
