"""Writes for experiment tracking, with MLflow's rules: names unique per owner, params immutable,
MLflow's limits (portal.tracking.validation), writes only to the caller's own active runs; with a
job's or session's tracking token, only within its scope (portal.tracking.scopes)."""

import math
import time
import uuid
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from portal.core.errors import Conflict, NotFound
from portal.core.paths import UserRoots, path_problem
from portal.tracking import validation as v
from portal.tracking.models import (
    DatasetInput,
    Experiment,
    ExperimentTag,
    LatestMetric,
    LifecycleStage,
    Metric,
    Param,
    Run,
    RunStatus,
    Tag,
)
from portal.tracking.scopes import TrackingGrant
from portal.tracking.selectors import DEFAULT_EXPERIMENT_ID, DEFAULT_EXPERIMENT_NAME, experiment_get, run_get

RUN_NAME_TAG = "mlflow.runName"
USER_TAG = "mlflow.user"


def now_ms() -> int:
    return int(time.time() * 1000)


def _artifact_root(user: Any) -> str:
    home = (user.home_directory or f"/home/{user.username}").rstrip("/")
    return settings.TRACKING_ARTIFACT_ROOT.format(home=home, username=user.username).rstrip("/")


def _artifact_location_check(user: Any, location: str) -> str:
    """A folder of the user's own (home or scratch) as a path or file:// URI: the client writes there
    itself, so it must be somewhere the user owns."""
    path = location.removeprefix("file://")
    home = (user.home_directory or f"/home/{user.username}").rstrip("/")
    roots = UserRoots(home=home, data="",
                      scratch=settings.SCRATCH_DIR.format(home=home, username=user.username).rstrip("/"))
    if problem := path_problem(path.rstrip("/") or "/", roots=roots):
        raise v.invalid_value("artifact_location", location, problem)
    return f"file://{path.rstrip('/')}"


def experiment_create(*, user: Any, name: str, artifact_location: str = "",
                      tags: list[dict[str, Any]] | None = None,
                      grant: TrackingGrant | None = None) -> Experiment:
    if not name:
        raise v.missing("name")
    if grant is not None:
        grant.experiment_check(name)
    if len(name) > v.MAX_EXPERIMENT_NAME_LENGTH:
        raise v.invalid("name", f"Experiment name exceeds the maximum length of "
                                f"{v.MAX_EXPERIMENT_NAME_LENGTH} characters")
    location = _artifact_location_check(user, artifact_location) if artifact_location else ""
    checked = _tags_check(tags or [], "tags", limit=v.MAX_EXPERIMENT_TAG_VAL_LENGTH)
    now = now_ms()
    try:
        with transaction.atomic():
            experiment = Experiment.objects.create(owner=user, name=name, artifact_location=location,
                                                   creation_time=now, last_update_time=now)
            if not location:
                experiment.artifact_location = f"file://{_artifact_root(user)}/{experiment.pk}"
                experiment.save(update_fields=["artifact_location"])
            ExperimentTag.objects.bulk_create([ExperimentTag(experiment=experiment, key=key, value=value)
                                               for key, value in checked.items()])
    except IntegrityError:
        raise Conflict(f"Experiment(name={name}) already exists.", code="already_exists") from None
    return experiment


def experiment_for_write(*, user: Any, experiment_id: int) -> Experiment:
    """The user's own experiment; "0" is their Default experiment, made on first use."""
    if experiment_id == DEFAULT_EXPERIMENT_ID:
        experiment = Experiment.objects.filter(owner=user, name=DEFAULT_EXPERIMENT_NAME).first()
        if experiment is None:
            try:
                experiment = experiment_create(user=user, name=DEFAULT_EXPERIMENT_NAME)
            except Conflict:  # made meanwhile by a concurrent request
                experiment = Experiment.objects.get(owner=user, name=DEFAULT_EXPERIMENT_NAME)
        return experiment
    return experiment_get(user=user, experiment_id=experiment_id, write=True)


def experiment_rename(*, user: Any, experiment_id: int, new_name: str,
                      grant: TrackingGrant | None = None) -> None:
    experiment = experiment_for_write(user=user, experiment_id=experiment_id)
    if grant is not None:
        raise grant.refuse("rename experiments")
    if experiment.lifecycle_stage != LifecycleStage.ACTIVE:
        raise v.invalid("experiment_id", "Cannot rename a non-active experiment.")
    if len(new_name) > v.MAX_EXPERIMENT_NAME_LENGTH:
        raise v.invalid("new_name", f"Experiment name exceeds the maximum length of "
                                    f"{v.MAX_EXPERIMENT_NAME_LENGTH} characters")
    try:
        with transaction.atomic():
            Experiment.objects.filter(pk=experiment.pk).update(name=new_name, last_update_time=now_ms())
    except IntegrityError:
        raise Conflict(f"Experiment(name={new_name}) already exists.", code="already_exists") from None


def experiment_delete(*, user: Any, experiment_id: int, grant: TrackingGrant | None = None) -> None:
    """Marks the experiment and its runs deleted, as MLflow does (the rows stay; the name stays taken)."""
    experiment = experiment_for_write(user=user, experiment_id=experiment_id)
    if grant is not None:
        raise grant.refuse("delete experiments")
    with transaction.atomic():
        Experiment.objects.filter(pk=experiment.pk).update(lifecycle_stage=LifecycleStage.DELETED,
                                                           last_update_time=now_ms())
        Run.objects.filter(experiment=experiment).update(lifecycle_stage=LifecycleStage.DELETED)


def _run_for_write(user: Any, run_id: str, grant: TrackingGrant | None) -> Run:
    """The user's own run; with a tracking token, only one of the token's own runs."""
    run = run_get(user=user, run_id=run_id, write=True)
    if grant is not None:
        grant.run_check(run)
    return run


def _active_run(user: Any, run_id: str, grant: TrackingGrant | None) -> Run:
    run = _run_for_write(user, run_id, grant)
    if run.lifecycle_stage != LifecycleStage.ACTIVE:
        raise v.invalid("run_id", f"The run {run_id} must be in the 'active' state. "
                                  f"Current state is {run.lifecycle_stage}.")
    return run


def run_create(*, user: Any, experiment_id: int, start_time: int | None, run_name: str,
               tags: list[dict[str, Any]], grant: TrackingGrant | None = None) -> Run:
    """A new RUNNING run. Its artifact_uri is a folder under the experiment's location (the owner's
    home): the client writes artifacts there itself. A job's or session's token links the run to it."""
    if grant is not None and experiment_id == DEFAULT_EXPERIMENT_ID:
        grant.experiment_check(DEFAULT_EXPERIMENT_NAME)  # before the Default is made on first use
    experiment = experiment_for_write(user=user, experiment_id=experiment_id)
    if grant is not None:
        grant.experiment_check(experiment.name)
    if experiment.lifecycle_stage != LifecycleStage.ACTIVE:
        raise v.invalid("experiment_id", f"The experiment {experiment.pk} must be in the 'active' state. "
                                         f"Current state is {experiment.lifecycle_stage}.")
    checked = _tags_check(tags, "tags")
    run_name = run_name or checked.get(RUN_NAME_TAG, "") or f"run-{uuid.uuid4().hex[:8]}"
    if len(run_name) > v.MAX_RUN_NAME_LENGTH:
        raise v.invalid("run_name", f"'run_name' exceeds the maximum length of {v.MAX_RUN_NAME_LENGTH} "
                                    "characters")
    checked.update({RUN_NAME_TAG: run_name, USER_TAG: user.username})
    job = grant.job if grant else None
    session = grant.session if grant else None
    if job is not None:
        checked.update({"slurm.job_id": job.slurm_job_id, "slurm.partition": job.partition,
                        "gpuportal.template": job.template})
        checked = {key: value for key, value in checked.items() if value}
    run_id = uuid.uuid4().hex
    with transaction.atomic():
        run = Run.objects.create(run_id=run_id, experiment=experiment, owner=user, run_name=run_name,
                                 start_time=start_time if start_time is not None else now_ms(),
                                 artifact_uri=f"{experiment.artifact_location}/{run_id}/artifacts",
                                 job=job, session=session)
        Tag.objects.bulk_create([Tag(run=run, key=key, value=value) for key, value in checked.items()])
    return run


def run_update(*, user: Any, run_id: str, status: str, end_time: int | None, run_name: str,
               grant: TrackingGrant | None = None) -> Run:
    run = _active_run(user, run_id, grant)
    if status and status not in RunStatus.values:
        raise v.invalid_value("status", status, f"Expected one of {RunStatus.values}.")
    if len(run_name) > v.MAX_RUN_NAME_LENGTH:
        raise v.invalid("run_name", f"'run_name' exceeds the maximum length of {v.MAX_RUN_NAME_LENGTH} "
                                    "characters")
    with transaction.atomic():
        if status:
            run.status = status
        if end_time is not None:
            run.end_time = end_time
        if run_name:
            run.run_name = run_name
            _tags_upsert(run, {RUN_NAME_TAG: run_name})
        run.save(update_fields=["status", "end_time", "run_name"])
    return run


def run_delete(*, user: Any, run_id: str, grant: TrackingGrant | None = None) -> None:
    run = _run_for_write(user, run_id, grant)
    Run.objects.filter(pk=run.pk).update(lifecycle_stage=LifecycleStage.DELETED)


def _tags_check(tags: list[dict[str, Any]], field: str, limit: int = v.MAX_TAG_VAL_LENGTH) -> dict[str, str]:
    checked: dict[str, str] = {}
    for i, tag in enumerate(tags):
        key = v.key_check(f"{field}[{i}].key", tag.get("key"), "Tag key")
        checked[key] = v.text_check(f"{field}[{i}].value", tag.get("value"), "Tag value", limit)
    return checked


def _tags_upsert(run: Run, tags: dict[str, str]) -> None:
    Tag.objects.bulk_create([Tag(run=run, key=key, value=value) for key, value in tags.items()],
                            update_conflicts=True, unique_fields=["run", "key"], update_fields=["value"])
    if RUN_NAME_TAG in tags and tags[RUN_NAME_TAG] != run.run_name:
        Run.objects.filter(pk=run.pk).update(run_name=tags[RUN_NAME_TAG][:v.MAX_RUN_NAME_LENGTH])


@dataclass(frozen=True)
class Point:
    key: str
    value: float
    timestamp: int
    step: int


def _metrics_check(metrics: list[dict[str, Any]]) -> list[Point]:
    checked = []
    for i, metric in enumerate(metrics):
        key = v.key_check(f"metrics[{i}].key", metric.get("key"), "Metric name")
        checked.append(Point(
            key=key, value=v.metric_value(f"metrics[{i}].value", metric.get("value")),
            timestamp=v.int64(f"metrics[{i}].timestamp", metric.get("timestamp"), required=True,
                              minimum=0) or 0,
            step=v.int64(f"metrics[{i}].step", metric.get("step"), default=0) or 0))
    return checked


def _params_check(params: list[dict[str, Any]]) -> dict[str, str]:
    checked: dict[str, str] = {}
    duplicates = []
    for i, param in enumerate(params):
        key = v.key_check(f"params[{i}].key", param.get("key"), "Param key")
        if key in checked:
            duplicates.append(key)
        checked[key] = v.text_check(f"params[{i}].value", param.get("value"), "Param value",
                                    v.MAX_PARAM_VAL_LENGTH)
    if duplicates:
        raise v.invalid("params", f"Duplicate parameter keys have been submitted: {duplicates}. Please "
                                  "ensure the request contains only one param value per param key.")
    return checked


def _batch_limits(metrics: int, params: int, tags: int) -> None:
    for field, what, limit, count in (
            ("metrics", "metrics", v.MAX_METRICS_PER_BATCH, metrics),
            ("params", "params", v.MAX_PARAMS_TAGS_PER_BATCH, params),
            ("tags", "tags", v.MAX_PARAMS_TAGS_PER_BATCH, tags),
            ("metrics", "metrics, params, and tags", v.MAX_ENTITIES_PER_BATCH, metrics + params + tags)):
        if count > limit:
            raise v.invalid(field, f"A batch logging request can contain at most {limit} {what}. Got "
                                   f"{count} {what}. Please split up {what} across multiple requests and "
                                   "try again.")


def log_batch(*, user: Any, run_id: str, metrics: list[dict[str, Any]], params: list[dict[str, Any]],
              tags: list[dict[str, Any]], grant: TrackingGrant | None = None) -> None:
    """MLflow's log-batch: everything checked before anything is written, then one transaction."""
    _batch_limits(len(metrics), len(params), len(tags))
    points = _metrics_check(metrics)
    checked_params = _params_check(params)
    checked_tags = _tags_check(tags, "tags")
    run = _active_run(user, run_id, grant)
    with transaction.atomic():
        if checked_params:
            _params_insert(run, checked_params)
        if checked_tags:
            _tags_upsert(run, checked_tags)
        if points:
            _points_insert(run, points)
            _latest_update(run, points)


# MLflow's own bounds on a logged dataset's fields (mlflow/utils/validation.py).
DATASET_LIMITS = {"name": 500, "digest": 36, "source_type": 36, "source": 65535, "schema": 1048575,
                  "profile": 16384}
MAX_DATASETS_PER_BATCH = 1000


def log_inputs(*, user: Any, run_id: str, datasets: list[dict[str, Any]],
               grant: TrackingGrant | None = None) -> None:
    """MLflow's log-inputs: each dataset's description and its input's tags, checked, then kept
    once per run, name and digest (logging it again replaces its tags)."""
    if len(datasets) > MAX_DATASETS_PER_BATCH:
        raise v.invalid("datasets", f"At most {MAX_DATASETS_PER_BATCH} datasets per request.")
    checked = [_dataset_check(item, f"datasets[{i}]") for i, item in enumerate(datasets)]
    dataset_inputs_record(run=_active_run(user, run_id, grant), inputs=checked)


def _dataset_check(item: dict[str, Any], field: str) -> dict[str, Any]:
    dataset = item.get("dataset")
    if not isinstance(dataset, dict):
        raise v.missing(f"{field}.dataset")
    values = {}
    for key, limit in DATASET_LIMITS.items():
        required = key in ("name", "digest", "source_type", "source")
        values[key] = v.string(dataset, key, required=required, limit=limit)
    tags = item.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(tag, dict) for tag in tags):
        raise v.invalid_value(f"{field}.tags", tags, "Expected a list of objects.")
    values["tags"] = [{"key": key, "value": value}
                      for key, value in _tags_check(tags, f"{field}.tags").items()]
    return values


def dataset_inputs_record(*, run: Run, inputs: list[dict[str, Any]]) -> None:
    """Checked dataset inputs (log_inputs), or the portal's own (a job's provenance), on a run."""
    DatasetInput.objects.bulk_create([DatasetInput(run=run, **item) for item in inputs],
                                     update_conflicts=True, unique_fields=["run", "name", "digest"],
                                     update_fields=["source_type", "source", "schema", "profile", "tags"])


def metrics_record(*, run: Run, points: list[Point]) -> None:
    """Points the portal itself adds to a run (portal.tracking.job_runs), already checked."""
    with transaction.atomic():
        _points_insert(run, points)
        _latest_update(run, points)


def _params_insert(run: Run, params: dict[str, str]) -> None:
    for key, old in Param.objects.filter(run=run, key__in=list(params)).values_list("key", "value"):
        if old != params[key]:
            raise v.invalid("params", f"Changing param values is not allowed. Param with key='{key}' was "
                                      f"already logged with value='{old}' for run ID='{run.run_id}'. "
                                      f"Attempted logging new value '{params[key]}'.")
    Param.objects.bulk_create([Param(run=run, key=key, value=value) for key, value in params.items()],
                              ignore_conflicts=True)


def _points_insert(run: Run, points: list[Point]) -> None:
    """One statement with four array parameters: a 1,000-point batch costs one round trip and no
    model instances."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Metric._meta.db_table} (run_id, key, value, "timestamp", step)
                SELECT %s, k, val, ts, st FROM unnest(%s::varchar[], %s::float8[], %s::bigint[], %s::bigint[])
                    AS batch(k, val, ts, st)""",  # noqa: S608 (a table name, not input)
            [run.pk, [p.key for p in points], [p.value for p in points], [p.timestamp for p in points],
             [p.step for p in points]])


def _order(point: Point) -> tuple[int, int, float]:
    # MLflow's latest: the greatest (step, timestamp, value); NaN counts as the greatest value, as
    # PostgreSQL orders it.
    return point.step, point.timestamp, math.inf if math.isnan(point.value) else point.value


def _latest_update(run: Run, points: list[Point]) -> None:
    """One statement: each key's newest point of the batch replaces the stored latest if greater."""
    newest: dict[str, Point] = {}
    for point in points:
        if point.key not in newest or _order(point) > _order(newest[point.key]):
            newest[point.key] = point
    table = LatestMetric._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {table} (run_id, key, value, "timestamp", step)
                SELECT %s, k, val, ts, st FROM unnest(%s::varchar[], %s::float8[], %s::bigint[], %s::bigint[])
                    AS batch(k, val, ts, st)
                ON CONFLICT (run_id, key) DO UPDATE
                SET value = EXCLUDED.value, "timestamp" = EXCLUDED."timestamp", step = EXCLUDED.step
                WHERE (EXCLUDED.step, EXCLUDED."timestamp", EXCLUDED.value)
                    > ({table}.step, {table}."timestamp", {table}.value)""",  # noqa: S608 (names, not input)
            [run.pk, [p.key for p in newest.values()], [p.value for p in newest.values()],
             [p.timestamp for p in newest.values()], [p.step for p in newest.values()]])


def tag_delete(*, user: Any, run_id: str, key: str, grant: TrackingGrant | None = None) -> None:
    run = _active_run(user, run_id, grant)
    deleted, _ = Tag.objects.filter(run=run, key=key).delete()
    if not deleted:
        raise NotFound(f"No tag with name: {key} in run with id {run_id}")
