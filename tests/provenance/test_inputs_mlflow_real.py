"""The provenance record as an MLflow dataset input of the job's run (issue 36), through the portal's
MLflow-compatible API (runs/log-inputs, get-run's `inputs`), read by the unmodified MLflow client
(its own venv, as in tests/tracking/test_mlflow_client_real.py); and the client's own log_inputs."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from portal.accounts.services import api_token_create
from portal.provenance import services
from portal.provenance.models import Provenance
from portal.provenance.services import DATASET_NAME, provenance_capture
from portal.tracking.job_runs import job_runs_create
from slurm.user_files import JobOutput
from tests.factories import JobFactory, UserFactory

VENV = Path(os.environ.get("MLFLOW_CLIENT_VENV", "/var/lib/gpuportal/mlflow-client-venv"))
pytestmark = [pytest.mark.integration]

CLIENT = """
import json, sys
from mlflow import MlflowClient
from mlflow.entities import Dataset, DatasetInput, InputTag
client = MlflowClient()
run_id = sys.argv[1]
client.log_inputs(run_id, [DatasetInput(Dataset(name="mnist", digest="d1", source_type="local",
                                                source='{"uri": "/home/alice/mnist"}', profile='{"rows": 3}'),
                                        tags=[InputTag(key="mlflow.data.context", value="training")])])
inputs = client.get_run(run_id).inputs.dataset_inputs
print(json.dumps([{"name": i.dataset.name, "digest": i.dataset.digest, "source_type": i.dataset.source_type,
                   "source": i.dataset.source, "profile": i.dataset.profile,
                   "tags": {t.key: t.value for t in i.tags}} for i in inputs]))
"""


def test_the_real_client_reads_the_record_as_a_dataset_input(transactional_db, live_server, monkeypatch):
    alice = UserFactory(username="alice")
    job = JobFactory(user=alice)
    [run] = job_runs_create(jobs=[job])
    digest = "sha256:" + "c" * 64
    Provenance.objects.create(job=job, template="custom", script="#!/bin/bash\n", image_digest=digest)
    document = json.dumps({"code": [{"path": "/p", "commit": "c1", "remote": "", "diff": ""}],
                           "inputs": [{"path": "d.bin", "kind": "file", "sha256": "s1"}], "gpu": {}}).encode()
    monkeypatch.setattr(services, "job_output_read",
                        lambda **kwargs: JobOutput(exists=True, size=len(document), data=document))
    provenance_capture(job=job)
    _, key = api_token_create(user=alice, name="mlflow")
    assert (VENV / "bin/python").exists(), f"no MLflow client at {VENV}: run scripts/install.sh --dev"
    done = subprocess.run(["/usr/sbin/runuser", "-u", "alice", "--", str(VENV / "bin/python"), "-c", CLIENT,
                           run.run_id], capture_output=True, text=True, timeout=180, cwd="/tmp",
                          env={"PATH": "/usr/bin:/bin", "HOME": "/home/alice",
                               "MLFLOW_TRACKING_URI": live_server.url, "MLFLOW_TRACKING_TOKEN": key,
                               "MLFLOW_DISABLE_TELEMETRY": "true",
                               "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"})
    assert done.returncode == 0, done.stderr[-4000:]
    inputs = {item["name"]: item for item in json.loads(done.stdout.strip().splitlines()[-1])}
    record = inputs[DATASET_NAME]
    assert record["source_type"] == "http" and record["tags"] == {"mlflow.data.context": "provenance"}
    assert json.loads(record["source"])["url"].endswith(f"/api/v1/jobs/{job.pk}/provenance/")
    profile = json.loads(record["profile"])
    assert profile["gpuportal.provenance.git_commit"] == "c1"
    assert profile["gpuportal.provenance.image_digest"] == digest and len(record["digest"]) == 32
    assert inputs["mnist"] == {"name": "mnist", "digest": "d1", "source_type": "local",
                               "source": '{"uri": "/home/alice/mnist"}', "profile": '{"rows": 3}',
                               "tags": {"mlflow.data.context": "training"}}
