"""Must show (#21): a sweep of 8 pytorch-train tasks over lr x batch-size on the real cluster is ONE
Slurm job array (accounting lists only its <id>_<task> rows), its 8 runs reach the sweep page, the
best run is marked, and the parallel-coordinates chart renders (headless Chromium screenshot in
test-artifacts/)."""

from pathlib import Path

import pytest
from django.test import Client

from portal.jobs.models import TERMINAL_STATES, Job, JobState
from portal.sweeps.models import Sweep
from slurm.parsing import array_tasks
from tests.environments.conftest import bundled_script, needs_real_envs, pytorch_env  # noqa: F401
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 - fixtures of the real-job tests
from tests.tracking.test_mlflow_in_job_real import portal_for_jobs  # noqa: F401 - a fixture

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True),
              needs_real_envs, pytest.mark.usefixtures("polled", "cleanup_jobs", "portal_for_jobs")]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.mark.usefixtures("pytorch_env", "bundled_script")
def test_a_sweep_of_8_tasks_is_one_array_job_and_8_runs(page, live_server, token_client, slurm, user):
    ARTIFACTS.mkdir(exist_ok=True)
    response = token_client.post("/api/v1/sweeps/", {
        "template": "pytorch-train", "name": "lr x batch",
        "parameters": {"args": "--epochs 1 --train-limit 300 --log-every 5", "gpus": 1, "time_limit": 10},
        "method": "grid", "space": {"lr": [0.002, 0.02], "batch-size": [16, 32, 64, 128]},
        "concurrency": 4, "objective": "accuracy/test", "direction": "max"}, format="json")
    assert response.status_code == 201, response.json()
    sweep = Sweep.objects.get(pk=response.json()["sweep"]["id"])
    assert Job.objects.count() == 1  # one job for the eight tasks

    job = poll_until(slurm, sweep.job_id, TERMINAL_STATES, timeout=420)
    log = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, log[-3000:]
    # Slurm's own record: one array job, its eight tasks, nothing else submitted.
    rows = slurm.accounting(job_ids=[job.slurm_job_id]).rows
    tasks = [array_tasks(row.job_id) for row in rows]
    assert all(tasks) and {parts[0] for parts in tasks} == {job.slurm_job_id}
    assert sorted(task for parts in tasks for task in parts[1]) == list(range(8))
    assert all(row.base_state == "COMPLETED" for row in rows)
    assert "--array=0-7%4" in job.script

    body = token_client.get(f"/api/v1/sweeps/{sweep.pk}/").json()
    assert body["progress"]["done"] == 8, body["progress"]
    runs = [task for task in body["tasks"] if task["run_id"]]
    assert len(runs) == 8 and all("accuracy/test" in task["metrics"] for task in runs)
    best = max(runs, key=lambda task: task["metrics"]["accuracy/test"])
    assert body["best"]["index"] == best["index"] and [t["best"] for t in body["tasks"]].count(True) == 1

    client = Client()
    client.force_login(user)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value,
                               "url": live_server.url}])
    page.set_viewport_size({"width": 1200, "height": 1400})
    page.goto(f"{live_server.url}/sweeps/{sweep.pk}/")
    assert page.locator("#runs tr[data-task]").count() == 8
    assert page.locator("#best-row").get_attribute("data-task") == str(best["index"])
    page.locator("figure[data-chart='sweep-parallel-spec'][data-rendered=true]").wait_for(timeout=30_000)
    page.locator("figure[data-chart='sweep-scatter-spec'][data-rendered=true]").wait_for(timeout=30_000)
    assert page.locator("#sweep-parallel svg, #sweep-parallel canvas").count() >= 1
    page.screenshot(path=str(ARTIFACTS / "sweep-page.png"), full_page=True)
    chart = page.locator("figure[data-chart='sweep-parallel-spec']")
    chart.screenshot(path=str(ARTIFACTS / "sweep-parallel.png"))
