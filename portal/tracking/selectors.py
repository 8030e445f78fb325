"""Reading experiments, runs and metric histories: the caller's own (an admin: anybody's); another
user's object reads as missing (RESOURCE_DOES_NOT_EXIST), never as forbidden."""

import re
from typing import Any

from django.db.models import BooleanField, Case, Exists, F, OuterRef, Q, QuerySet, Subquery, When
from django.db.models.expressions import RawSQL

from portal.core.errors import NotFound
from portal.tracking.models import (
    DatasetInput,
    Experiment,
    ExperimentTag,
    LatestMetric,
    LifecycleStage,
    Metric,
    Param,
    Run,
    Tag,
)
from portal.tracking.search import (
    EXPERIMENT_NUMERIC_ATTRIBUTES,
    EXPERIMENT_STRING_ATTRIBUTES,
    Clause,
    OrderTerm,
    history_token_after,
    history_token_encode,
    page_token_encode,
    page_token_offset,
    parse_filter,
    parse_order_by,
)
from portal.tracking.validation import invalid_value

DEFAULT_EXPERIMENT_ID = 0  # MLflow's "0": each user's own Default experiment
DEFAULT_EXPERIMENT_NAME = "Default"
_VIEW_TYPES = {"ACTIVE_ONLY": 1, "DELETED_ONLY": 2, "ALL": 3, 1: 1, 2: 2, 3: 3, "1": 1, "2": 2, "3": 3}
_NAN = float("nan")
_RUN_ATTRIBUTE_FIELDS = {"run_id": "run_id", "run_name": "run_name", "status": "status",
                         "artifact_uri": "artifact_uri", "user_id": "owner__username",
                         "start_time": "start_time", "end_time": "end_time", "created": "start_time"}
_LOOKUPS = {"=": "exact", ">": "gt", ">=": "gte", "<": "lt", "<=": "lte", "LIKE": "regex",
            "ILIKE": "iregex", "IN": "in"}


def _visible(user: Any) -> Q:
    return Q() if user.is_staff else Q(owner=user)


def experiment_get(*, user: Any, experiment_id: int, write: bool = False) -> Experiment:
    """The experiment (id 0: the user's Default); NotFound for a missing or another user's one. Only
    its owner writes; an admin reads anybody's."""
    experiments = Experiment.objects.filter(Q(owner=user) if write else _visible(user))
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        experiment = Experiment.objects.filter(owner=user, name=DEFAULT_EXPERIMENT_NAME).first()
    else:
        experiment = experiments.filter(pk=experiment_id).first()
    if experiment is None:
        raise NotFound(f"No Experiment with id={experiment_id} exists")
    return experiment


def experiment_by_name(*, user: Any, name: str) -> Experiment:
    experiment = Experiment.objects.filter(owner=user, name=name).prefetch_related("tags").first()
    if experiment is None:
        raise NotFound(f"Could not find experiment with name '{name}'")
    return experiment


def view_type(value: Any, field: str) -> int:
    if value is None or value == "":
        return 1
    if isinstance(value, bool) or not isinstance(value, str | int) or value not in _VIEW_TYPES:
        raise invalid_value(field, value, "Expected ACTIVE_ONLY, DELETED_ONLY or ALL.")
    return _VIEW_TYPES[value]


def _stages(view: int) -> list[str]:
    return {1: [LifecycleStage.ACTIVE], 2: [LifecycleStage.DELETED],
            3: [LifecycleStage.ACTIVE, LifecycleStage.DELETED]}[view]


def _like_regex(pattern: str) -> str:
    """SQL LIKE as an anchored regular expression: % any run, _ any one character."""
    parts = [".*" if char == "%" else "." if char == "_" else re.escape(char) for char in pattern]
    return "^" + "".join(parts) + "$"


def _text_q(field: str, op: str, value: Any) -> Q:
    if op in ("LIKE", "ILIKE"):
        value = _like_regex(value)
    if op == "!=":
        return ~Q(**{field: value})
    if op == "NOT IN":
        return ~Q(**{f"{field}__in": value})
    return Q(**{f"{field}__{_LOOKUPS[op]}": value})


def _run_clause_q(clause: Clause) -> Q:
    if clause.kind == "attribute":
        field = _RUN_ATTRIBUTE_FIELDS[clause.key]
        value = int(clause.value) if isinstance(clause.value, float) else clause.value
        return _text_q(field, clause.op, value)
    if clause.kind == "metric":
        # A NaN metric matches no comparison (PostgreSQL would order it above every number).
        rows = LatestMetric.objects.filter(_text_q("value", clause.op, clause.value)).exclude(value=_NAN)
    else:
        model = Param if clause.kind == "param" else Tag
        rows = model.objects.filter(_text_q("value", clause.op, clause.value))
    return Q(Exists(rows.filter(run=OuterRef("pk"), key=clause.key)))


def _run_order(terms: list[OrderTerm]) -> tuple[dict[str, Any], list[Any]]:
    """Annotations and order expressions; then MLflow's own tie-breakers (start_time DESC, run_id)."""
    annotations: dict[str, Any] = {}
    order: list[Any] = []
    for number, term in enumerate(terms):
        if term.kind == "attribute":
            expression = F(_RUN_ATTRIBUTE_FIELDS[term.key])
        else:
            model = {"metric": LatestMetric, "param": Param, "tag": Tag}[term.kind]
            name = f"order_{number}"
            annotations[name] = Subquery(model.objects.filter(run=OuterRef("pk"), key=term.key)
                                         .values("value")[:1])
            expression = F(name)
            if term.kind == "metric":  # MLflow's order: numbers, then NaN, then runs without the metric
                annotations[f"{name}_rank"] = Case(When(**{name: _NAN}, then=1),
                                                   When(**{f"{name}__isnull": True}, then=2), default=0)
                order.append(F(f"{name}_rank").asc())
        order.append(expression.asc(nulls_last=True) if term.ascending else expression.desc(nulls_last=True))
    return annotations, [*order, F("start_time").desc(), F("run_id").asc()]


def _page(rows: QuerySet, *, max_results: int, page_token: str | None) -> tuple[list[Any], str | None]:
    offset = page_token_offset(page_token)
    page = list(rows[offset:offset + max_results + 1])
    next_token = page_token_encode(offset + max_results) if len(page) > max_results else None
    return page[:max_results], next_token


def runs_search(*, user: Any, experiment_ids: list[int], filter_string: str, view: int,
                order_by: list[str], max_results: int,
                page_token: str | None) -> tuple[list[Run], str | None]:
    """The runs of these experiments the user may read, filtered and ordered as MLflow does."""
    clauses = parse_filter(filter_string)
    annotations, order = _run_order(parse_order_by(order_by))
    mine = Q(experiment__in=Experiment.objects.filter(owner=user, name=DEFAULT_EXPERIMENT_NAME)) \
        if DEFAULT_EXPERIMENT_ID in experiment_ids else Q(pk__in=[])
    runs = Run.objects.filter(_visible(user), mine | Q(experiment_id__in=experiment_ids),
                              lifecycle_stage__in=_stages(view))
    for clause in clauses:
        runs = runs.filter(_run_clause_q(clause))
    runs = runs.annotate(**annotations).order_by(*order).select_related("owner")
    page, next_token = _page(runs, max_results=max_results, page_token=page_token)
    return runs_with_data(page), next_token


def runs_with_data(runs: list[Run]) -> list[Run]:
    """Each run's latest metrics, params, tags and dataset inputs (`data_metrics`, `data_params`,
    `data_tags`, `data_inputs`: what portal.tracking.protos.run_json writes) as plain rows: one query
    each for a whole page, and no model instance per row (prefetching a page of 100 runs built ~1,500
    of them: most of a search's time)."""
    by_pk = {run.pk: run for run in runs}
    for run in runs:
        run.data_metrics, run.data_params, run.data_tags, run.data_inputs = [], [], [], []
    for run_pk, *metric in (LatestMetric.objects.filter(run__in=by_pk).order_by("pk")
                            .values_list("run_id", "key", "value", "timestamp", "step")):
        by_pk[run_pk].data_metrics.append(tuple(metric))
    for model, attribute in ((Param, "data_params"), (Tag, "data_tags")):
        rows = model.objects.filter(run__in=by_pk).order_by("pk").values_list("run_id", "key", "value")
        for run_pk, key, value in rows:
            getattr(by_pk[run_pk], attribute).append((key, value))
    fields = ("name", "digest", "source_type", "source", "schema", "profile")
    for run_pk, *values, tags in (DatasetInput.objects.filter(run__in=by_pk).order_by("pk")
                                  .values_list("run_id", *fields, "tags")):
        by_pk[run_pk].data_inputs.append((dict(zip(fields, values, strict=True)), tags))
    return runs


def experiments_search(*, user: Any, filter_string: str, view: int, order_by: list[str], max_results: int,
                       page_token: str | None) -> tuple[list[Experiment], str | None]:
    clauses = parse_filter(filter_string, kinds=("attribute", "tag"),
                           string_attributes=EXPERIMENT_STRING_ATTRIBUTES,
                           numeric_attributes=EXPERIMENT_NUMERIC_ATTRIBUTES)
    terms = parse_order_by(order_by, kinds=("attribute",),
                           attributes=("name", "experiment_id", *EXPERIMENT_NUMERIC_ATTRIBUTES))
    experiments = Experiment.objects.filter(_visible(user), lifecycle_stage__in=_stages(view))
    for clause in clauses:
        if clause.kind == "attribute":
            value = int(clause.value) if isinstance(clause.value, float) else clause.value
            experiments = experiments.filter(_text_q(clause.key, clause.op, value))
        else:
            tags = ExperimentTag.objects.filter(_text_q("value", clause.op, clause.value))
            experiments = experiments.filter(Exists(tags.filter(experiment=OuterRef("pk"), key=clause.key)))
    order = [F("pk" if term.key == "experiment_id" else term.key).asc() if term.ascending
             else F("pk" if term.key == "experiment_id" else term.key).desc() for term in terms]
    experiments = experiments.order_by(*order, "-last_update_time", "-pk").prefetch_related("tags")
    return _page(experiments, max_results=max_results, page_token=page_token)


def run_get(*, user: Any, run_id: str, write: bool = False) -> Run:
    """The run; NotFound for a missing or another user's run. Only its owner writes; an admin reads."""
    runs = Run.objects.filter(Q(owner=user) if write else _visible(user))
    run = runs.filter(run_id=run_id).select_related("owner", "experiment").first()
    if run is None:
        raise NotFound(f"Run with id={run_id} not found")
    return run


def run_with_data(*, user: Any, run_id: str) -> Run:
    run = run_get(user=user, run_id=run_id)
    return runs_with_data([run])[0]


def metric_history(*, user: Any, run_id: str, key: str, max_results: int,
                   page_token: str | None) -> tuple[list[tuple[int, int, float, int]], str | None]:
    """The logged points of one metric of one run, in step then timestamp order, as (step,
    timestamp, value, id) rows (no model instances: a page may hold 25,000): a page of `max_results`,
    and a token for the next page if there is one."""
    run = run_get(user=user, run_id=run_id)
    points = Metric.objects.filter(run=run, key=key)
    if (after := history_token_after(page_token)) is not None:
        # A row comparison, so the page starts where the index range does.
        points = points.alias(after=RawSQL('("step", "timestamp", "id") > (%s, %s, %s)', after,
                                           output_field=BooleanField())).filter(after=True)
    page = list(points.order_by("step", "timestamp", "pk")
                .values_list("step", "timestamp", "value", "pk")[:max_results + 1])
    if len(page) <= max_results:
        return page, None
    step, timestamp, _, pk = page[max_results - 1]
    return page[:max_results], history_token_encode(step, timestamp, pk)
