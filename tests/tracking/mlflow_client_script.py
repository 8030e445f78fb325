"""Run by tests/tracking/test_mlflow_client_real.py in the real MLflow client's own venv
(scripts/mlflow-client.sh), with MLFLOW_TRACKING_URI and MLFLOW_TRACKING_TOKEN set. Prints one JSON
object of what it saw. `log` does what a user's training script does; `peek` is another user
looking for the first one's runs; `get` reads one run back; `trespass` is a job's token reaching
for another experiment and run of its owner's."""

import json
import os
import sys
import tempfile
from pathlib import Path

import mlflow
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException


def log() -> dict:
    # In a portal job, MLFLOW_EXPERIMENT_NAME is the job's run's: start_run() then resumes that run.
    mlflow.set_experiment(os.environ.get("EXPERIMENT") or os.environ.get("MLFLOW_EXPERIMENT_NAME")
                          or "mnist-real")
    with mlflow.start_run() as run:
        mlflow.log_params({"lr": "0.01", "batch_size": 64})
        for step, (accuracy, loss) in enumerate([(0.8, 0.5), (0.9, 0.3), (0.95, 0.2)]):
            mlflow.log_metrics({"accuracy": accuracy, "loss": loss}, step=step)
        mlflow.log_metric("odd", float("nan"), step=0)
        mlflow.log_metric("odd", float("inf"), step=1)
        mlflow.set_tags({"team": "vision", "data.set": "mnist"})
        notes = Path(tempfile.mkdtemp()) / "notes.txt"
        notes.write_text("trained\n")
        mlflow.log_artifact(str(notes))
        artifacts = [item.path for item in MlflowClient().list_artifacts(run.info.run_id)]
    with mlflow.start_run(run_name="worse"):
        mlflow.log_params({"lr": "0.1"})
        mlflow.log_metrics({"accuracy": 0.99})
    found = mlflow.search_runs(filter_string="metrics.accuracy > 0.9 and params.lr = '0.01'",
                               output_format="list")
    dotted = mlflow.search_runs(filter_string="tags.data.set = 'mnist'", output_format="list")
    history = MlflowClient().get_metric_history(run.info.run_id, "accuracy")
    odd = MlflowClient().get_metric_history(run.info.run_id, "odd")
    got = MlflowClient().get_run(run.info.run_id)
    try:
        mlflow.search_runs(filter_string="metrics.accuracy > 0.9 OR params.lr = '0.01'", output_format="list")
        or_error = None
    except MlflowException as error:
        or_error = error.error_code
    return {"run_id": run.info.run_id, "experiment_id": run.info.experiment_id,
            "artifact_uri": got.info.artifact_uri, "status": got.info.status, "artifacts": artifacts,
            "found": [r.info.run_id for r in found], "dotted": [r.info.run_id for r in dotted],
            "history": [[m.step, m.value] for m in history], "odd": [repr(m.value) for m in odd],
            "params": got.data.params, "tags": got.data.tags, "metrics": got.data.metrics,
            "or_error": or_error}


def peek(run_id: str, experiment_id: str) -> dict:
    client = MlflowClient()
    seen = [r.info.run_id for r in mlflow.search_runs(search_all_experiments=True, output_format="list")]
    seen += [r.info.run_id for r in client.search_runs([experiment_id])]
    errors = []
    for call in (lambda: client.get_run(run_id), lambda: client.get_metric_history(run_id, "accuracy"),
                 lambda: client.get_experiment(experiment_id), lambda: client.log_param(run_id, "x", "1")):
        try:
            call()
            errors.append(None)
        except MlflowException as error:
            errors.append(error.error_code)
    return {"seen": seen, "errors": errors}


def trespass(run_id: str, experiment_id: str) -> dict:
    client = MlflowClient()
    errors = []
    for call in (lambda: client.create_run(experiment_id), lambda: client.create_experiment("elsewhere"),
                 lambda: client.rename_experiment(experiment_id, "renamed"),
                 lambda: client.delete_experiment(experiment_id), lambda: client.log_metric(run_id, "x", 1.0),
                 lambda: client.set_terminated(run_id), lambda: client.delete_run(run_id)):
        try:
            call()
            errors.append(None)
        except MlflowException as error:
            errors.append(error.error_code)
    return {"errors": errors, "read": client.get_experiment(experiment_id).name,
            "run": client.get_run(run_id).info.status}


def get(run_id: str) -> dict:
    run = MlflowClient().get_run(run_id)
    return {"status": run.info.status, "run_name": run.info.run_name, "end_time": run.info.end_time,
            "params": run.data.params, "tags": run.data.tags, "metrics": run.data.metrics}


if __name__ == "__main__":
    if sys.argv[1] == "log":
        result = log()
    elif sys.argv[1] == "get":
        result = get(sys.argv[2])
    elif sys.argv[1] == "trespass":
        result = trespass(sys.argv[2], sys.argv[3])
    else:
        result = peek(sys.argv[2], sys.argv[3])
    print(json.dumps(result, default=str))
