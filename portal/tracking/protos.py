"""The portal's tracking rows as MLflow's protobuf JSON (mlflow/protos/service.proto): field names in
snake_case, int64 as numbers (as MLflow's message_to_json writes them), unset fields left out, and a
NaN double as the string "NaN" (protobuf's JSON form, which the client parses back to NaN)."""

import math
from typing import Any

from portal.tracking.models import Experiment, Run


def double(value: float) -> float | str:
    return "NaN" if math.isnan(value) else value


def experiment_json(experiment: Experiment) -> dict[str, Any]:
    body: dict[str, Any] = {
        "experiment_id": str(experiment.pk), "name": experiment.name,
        "artifact_location": experiment.artifact_location,
        "lifecycle_stage": experiment.lifecycle_stage,
        "last_update_time": experiment.last_update_time, "creation_time": experiment.creation_time,
    }
    tags = [{"key": tag.key, "value": tag.value} for tag in experiment.tags.all()]
    if tags:
        body["tags"] = tags
    return body


def run_info_json(run: Run) -> dict[str, Any]:
    info: dict[str, Any] = {
        "run_id": run.run_id, "run_uuid": run.run_id, "run_name": run.run_name,
        "experiment_id": str(run.experiment_id), "user_id": run.owner.username, "status": run.status,
        "start_time": run.start_time, "artifact_uri": run.artifact_uri,
        "lifecycle_stage": run.lifecycle_stage,
    }
    if run.end_time is not None:
        info["end_time"] = run.end_time
    return info


def run_json(run: Run) -> dict[str, Any]:
    """A run with its data: the latest value of each metric, its params and tags, and its dataset
    inputs (read as rows by portal.tracking.selectors.runs_with_data)."""
    data: dict[str, Any] = {}
    metrics = [{"key": key, "value": double(value), "timestamp": timestamp, "step": step}
               for key, value, timestamp, step in run.data_metrics]
    params = [{"key": key, "value": value} for key, value in run.data_params]
    tags = [{"key": key, "value": value} for key, value in run.data_tags]
    for name, items in (("metrics", metrics), ("params", params), ("tags", tags)):
        if items:
            data[name] = items
    inputs = [{"tags": tags, "dataset": {key: value for key, value in dataset.items() if value}}
              for dataset, tags in run.data_inputs]
    return {"info": run_info_json(run), "data": data, "inputs": {"dataset_inputs": inputs} if inputs else {}}
