"""The unmodified MLflow client (mlflow-skinny, pinned, in its own venv: scripts/mlflow-client.sh,
which install.sh --dev runs) against the live portal: what a user's training script calls, run as
that user so its artifacts land in their home as theirs."""

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from portal.accounts.services import api_token_create
from portal.tokens.tracking import tracking_token
from portal.tracking import api, services
from portal.tracking.job_runs import job_experiment_name
from portal.tracking.models import Run
from tests.factories import JobFactory, UserFactory

VENV = Path(os.environ.get("MLFLOW_CLIENT_VENV", "/var/lib/gpuportal/mlflow-client-venv"))
CLIENT = VENV / "bin" / "python"
SCRIPT = Path(__file__).with_name("mlflow_client_script.py")
# What the client may call for these calls (issue #21): nothing else, nothing NOT_IMPLEMENTED.
EXPECTED_PATHS = {f"/api/2.0/mlflow/{path}" for path in (
    "experiments/get", "experiments/get-by-name", "runs/get", "metrics/get-history", "experiments/create",
    "experiments/delete", "experiments/search", "runs/create", "runs/update", "runs/delete", "runs/search",
    "runs/log-batch", "runs/log-metric", "runs/log-parameter", "runs/set-tag", "runs/delete-tag",
    "logged-models/search")}


@pytest.fixture
def called(monkeypatch):
    """(path, status) of every tracking API answer, errors included."""
    paths: list[tuple[str, int]] = []
    finalize = api.MlflowApi.finalize_response

    def recorded(self, request, response, *args, **kwargs):
        paths.append((request.path, response.status_code))
        return finalize(self, request, response, *args, **kwargs)

    monkeypatch.setattr(api.MlflowApi, "finalize_response", recorded)
    return paths


@pytest.fixture
def artifact_root(settings):
    """A folder of this test's own in alice's home, removed afterwards."""
    name = f"gpuportal/test-mlruns-{uuid.uuid4().hex[:8]}"
    settings.TRACKING_ARTIFACT_ROOT = f"{{home}}/{name}"
    yield Path("/home/alice") / name
    shutil.rmtree(Path("/home/alice") / name, ignore_errors=True)


def _client(live_server, token: str, *args: str, user: str, **env: str) -> dict:
    environment = {"PATH": "/usr/bin:/bin", "HOME": f"/home/{user}", "MLFLOW_TRACKING_URI": live_server.url,
                   "MLFLOW_TRACKING_TOKEN": token, "MLFLOW_DISABLE_TELEMETRY": "true",
                   "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", **env}
    assert CLIENT.exists(), f"no MLflow client at {CLIENT}: run scripts/install.sh --dev"
    done = subprocess.run(["/usr/sbin/runuser", "-u", user, "--", str(CLIENT), str(SCRIPT), *args],
                          env=environment, capture_output=True, text=True, timeout=180, cwd="/tmp")
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_real_mlflow_client_logs_searches_and_reads_back(transactional_db, live_server, called,
                                                             artifact_root):
    _, alice_key = api_token_create(user=UserFactory(username="alice"), name="mlflow")
    _, bob_key = api_token_create(user=UserFactory(username="bob"), name="mlflow")

    seen = _client(live_server, alice_key, "log", user="alice")
    assert seen["found"] == [seen["run_id"]] and seen["dotted"] == [seen["run_id"]]
    assert seen["history"] == [[0, 0.8], [1, 0.9], [2, 0.95]]
    assert seen["odd"] == ["nan", "1.7976931348623157e+308"]
    assert seen["params"] == {"lr": "0.01", "batch_size": "64"}
    assert seen["tags"]["team"] == "vision" and seen["tags"]["mlflow.user"] == "alice"
    assert seen["metrics"]["accuracy"] == 0.95 and seen["status"] == "FINISHED"
    assert seen["or_error"] == "INVALID_PARAMETER_VALUE"
    # The artifact is in alice's home, written by alice, and the client lists it.
    assert seen["artifact_uri"] == f"file://{artifact_root}/{seen['experiment_id']}/{seen['run_id']}/artifacts"
    notes = artifact_root / seen["experiment_id"] / seen["run_id"] / "artifacts" / "notes.txt"
    assert notes.read_text() == "trained\n" and notes.owner() == "alice"
    assert seen["artifacts"] == ["notes.txt"]

    peeked = _client(live_server, bob_key, "peek", seen["run_id"], seen["experiment_id"], user="bob")
    assert peeked["seen"] == []
    assert peeked["errors"] == ["RESOURCE_DOES_NOT_EXIST"] * 4

    paths = {path for path, _ in called}
    assert paths <= EXPECTED_PATHS, paths - EXPECTED_PATHS
    assert {"/api/2.0/mlflow/runs/log-batch", "/api/2.0/mlflow/metrics/get-history",
            "/api/2.0/mlflow/runs/search", "/api/2.0/mlflow/experiments/get-by-name"} <= paths
    # The only errors: set_experiment's lookup of a new name, the OR filter, and bob's four attempts.
    assert sorted(status for _, status in called if status != 200) == [400, 404, 404, 404, 404, 404]


def test_a_jobs_tracking_token_logs_as_its_owner_into_the_jobs_run(transactional_db, live_server,
                                                                   artifact_root):
    """What a Slurm job's injected MLFLOW_TRACKING_TOKEN does (portal.tracking.tokens)."""
    job = JobFactory(user=UserFactory(username="alice"), state="RUNNING", slurm_job_id="424242")
    seen = _client(live_server, tracking_token("job", job.pk), "log", user="alice",
                   EXPERIMENT=job_experiment_name(job))  # its own: made by the client, on first use
    assert seen["found"] == [seen["run_id"]]
    assert seen["tags"]["slurm.job_id"] == "424242" and seen["tags"]["mlflow.user"] == "alice"
    assert Run.objects.get(run_id=seen["run_id"]).job == job


def test_a_jobs_tracking_token_is_refused_on_another_experiment(transactional_db, live_server):
    """#33: what the real client raises when a job's token reaches beyond its own experiment and runs:
    PERMISSION_DENIED for each write; reading goes on."""
    job = JobFactory(user=UserFactory(username="alice"), state="RUNNING", ended_at=None)
    thesis = services.experiment_create(user=job.user, name="thesis")
    run = services.run_create(user=job.user, experiment_id=thesis.pk, start_time=None, run_name="", tags=[])
    seen = _client(live_server, tracking_token("job", job.pk), "trespass", run.run_id, str(thesis.pk),
                   user="alice")
    assert seen["errors"] == ["PERMISSION_DENIED"] * 7
    assert (seen["read"], seen["run"]) == ("thesis", "RUNNING")
    thesis.refresh_from_db()
    assert (thesis.name, thesis.lifecycle_stage, thesis.runs.count()) == ("thesis", "active", 1)
