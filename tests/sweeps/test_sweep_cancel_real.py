"""Cancel the rest of a sweep on the real cluster: one scancel of the array stops the running task
and the waiting ones never start; the array's job ends CANCELLED and the page counts them."""

import time

import pytest

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.sweeps.models import Sweep
from slurm.parsing import array_tasks
from tests.environments.conftest import bundled_script, needs_real_envs, pytorch_env  # noqa: F401
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 - fixtures of the real-job tests
from tests.poll_helpers import slurm_poll
from tests.tracking.test_mlflow_in_job_real import portal_for_jobs  # noqa: F401 - a fixture

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True), needs_real_envs,
              pytest.mark.usefixtures("polled", "cleanup_jobs", "portal_for_jobs", "pytorch_env",
                                      "bundled_script")]


def test_cancel_the_rest(token_client, slurm):
    response = token_client.post("/api/v1/sweeps/", {
        "template": "pytorch-train", "parameters": {"args": "--epochs 50", "gpus": 1, "time_limit": 10},
        "method": "list", "space": [{"seed": seed} for seed in range(5)], "concurrency": 1,
        "objective": "loss/train", "direction": "min"}, format="json")
    assert response.status_code == 201, response.json()
    sweep = Sweep.objects.get(pk=response.json()["sweep"]["id"])
    deadline = time.monotonic() + 90
    while "running" not in token_client.get(f"/api/v1/sweeps/{sweep.pk}/").json()["progress"] or \
            not token_client.get(f"/api/v1/sweeps/{sweep.pk}/").json()["progress"]["running"]:
        assert time.monotonic() < deadline, "no task started"
        slurm_poll(slurm=slurm)
        time.sleep(0.5)

    cancelled = token_client.post(f"/api/v1/sweeps/{sweep.pk}/cancel/")
    assert cancelled.status_code == 200, cancelled.json()
    job = poll_until(slurm, sweep.job_id, TERMINAL_STATES, timeout=90)
    assert job.state == JobState.CANCELLED and job.cancel_requested_at is not None
    rows = slurm.accounting(job_ids=[job.slurm_job_id]).rows
    # The array's tasks, or its own record while slurmdbd has not split the ones never started.
    assert {(array_tasks(row.job_id) or (row.job_id,))[0] for row in rows} == {job.slurm_job_id}
    assert all(row.base_state == "CANCELLED" for row in rows), [(r.job_id, r.state) for r in rows]
    progress = token_client.get(f"/api/v1/sweeps/{sweep.pk}/").json()["progress"]
    assert progress["cancelled"] == 5 and progress["pending"] == progress["running"] == 0, progress
    assert token_client.post(f"/api/v1/sweeps/{sweep.pk}/cancel/").status_code == 200  # again: as it was
