"""A notebook session gets an experiment: the portal starts a real session through the hub on the
local Slurm, and the unmodified MLflow client in one of its kernels (the pytorch environment's
mlflow-skinny) logs a run with nothing configured: the variables the spawner puts in the session's
job (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_TOKEN: the session's own, MLFLOW_EXPERIMENT_NAME) send it
to the portal, as alice's run, linked to the session, in the experiment `session-<name>`."""

import json
import shutil
import uuid
from pathlib import Path

import pytest

from portal.sessions.models import Session
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from portal.tracking.models import Run
from tests.environments.conftest import REAL_ROOT, needs_real_envs
from tests.environments.conftest import environment as registered
from tests.factories import UserFactory
from tests.sessions.test_notebooks_real import Kernel
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_real_envs]

CELL = """
import json, os
os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
import mlflow
with mlflow.start_run(run_name="from-a-kernel") as run:
    mlflow.log_param("lr", 0.01)
    mlflow.log_metrics({"loss": 0.5}, step=1)
print(json.dumps({"run_id": run.info.run_id, "experiment": os.environ["MLFLOW_EXPERIMENT_NAME"],
                  "experiment_id": run.info.experiment_id}))
"""


@pytest.fixture
def artifacts(settings):
    name = f"gpuportal/test-mlruns-{uuid.uuid4().hex[:8]}"
    settings.TRACKING_ARTIFACT_ROOT = f"{{home}}/{name}"
    yield
    shutil.rmtree(Path("/home/alice") / name, ignore_errors=True)


def test_a_run_from_a_sessions_kernel_lands_in_the_sessions_experiment(portal_hub, live_server, artifacts):
    alice = UserFactory(username="alice")
    registered(name="pytorch", title="pytorch", path=f"{REAL_ROOT}/pytorch", kernel="pytorch")
    server = server_start(user=alice, name="tracked", gpus=0, hours=1, environment="pytorch")
    try:
        ready_server(portal_hub, "alice", "tracked", timeout=90)
        hub_token = portal_hub.request("POST", "/users/alice/tokens",
                                       json={"expires_in": 600}).json()["token"]
        kernel = Kernel(f"{portal_hub.url}/user/alice/tracked", hub_token, "tracked.ipynb", "pytorch")
        try:
            seen = json.loads(kernel.run(CELL).strip().splitlines()[-1])
        finally:
            kernel.close()
        run = Run.objects.select_related("experiment", "owner", "session").get(run_id=seen["run_id"])
        assert run.owner == alice and run.session == Session.objects.get(pk=server.pk)
        assert run.job is None and run.status == "FINISHED"
        assert run.experiment.name == seen["experiment"] == "session-tracked"
        assert str(run.experiment.pk) == seen["experiment_id"] and run.experiment.owner == alice
        assert {p.key: p.value for p in run.params.all()} == {"lr": "0.01"}
        assert {m.key: m.value for m in run.latest_metrics.all()} == {"loss": 0.5}
    finally:
        server_stop(server=Session.objects.get(pk=server.pk))
