"""TensorBoard and training metrics on the real cluster: a PyTorch training job writes events and its
metrics are recorded when it ends; TensorBoard (a web app) started from that job or a session is a
Slurm job of its owner: a start only saves it, the worker it hands over to (or else the poll cycle)
runs its sbatch, a stop scancels it, and a second Slurm job with its comment and owner is cancelled by
the cycle. Serving it (the runner's "ready", the apps gateway) is tested end to end elsewhere."""

import pwd
import re
import subprocess

import pytest
from django.test import Client

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.webapps.models import App, AppState
from tests.environments.conftest import needs_real_envs
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)
from tests.jobs.test_fencing_real import _plant as plant_slurm_job
from tests.jobs.test_fencing_real import _slurm_jobs as slurm_jobs_with_comment
from tests.poll_helpers import slurm_poll
from tests.sessions.factories import SessionFactory
from tests.slurm_waits import wait_until_gone
from tests.tensorboards.conftest import TRAINING

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs,
              pytest.mark.usefixtures("polled", "cleanup_jobs", "cleanup_apps", "app_types")]


def test_training_metrics_recorded_and_tensorboard_from_the_job(token_client, slurm, pytorch_env,
                                                                 django_capture_on_commit_callbacks):
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "name": "tb train",
                                                   "parameters": TRAINING}, format="json")
    assert response.status_code == 201, response.json()
    with django_capture_on_commit_callbacks(execute=True):  # jobs_ended is sent after the cycle commits
        job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=180)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{stdout}\n{stderr}"
    printed = float(re.search(r"loss (\d+\.\d+)", stdout)[1])

    # Recorded from the job's own events when it ended (its exit hook, then jobs_ended).
    body = token_client.get(f"/api/v1/jobs/{job.pk}/metrics/").json()
    series = {item["tag"]: item for item in body["series"]}
    assert set(series) == {"train/loss", "train/samples_per_sec"}, body
    loss = series["train/loss"]
    assert loss["run"] == "smoke" and loss["steps"] == list(range(20))
    assert loss["final_step"] == 19 and loss["final_value"] == pytest.approx(printed, abs=1e-4)
    assert series["train/samples_per_sec"]["final_value"] > 0
    bob = Client()
    bob.force_login(UserFactory(username="bob"))
    assert bob.get(f"/api/v1/jobs/{job.pk}/metrics/").status_code == 404

    # TensorBoard on that job's log directory, from the API: saved, then its worker's sbatch.
    with django_capture_on_commit_callbacks(execute=True):
        response = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert response.status_code == 201, response.json()
    started = response.json()
    home = pwd.getpwnam("alice").pw_dir
    assert started["logdir"] == f"{home}/logs/jobs/{job.uuid}" and started["slurm_job_id"] == ""
    again = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert again.status_code == 200 and again.json()["id"] == started["id"]  # the active one, reused
    board = App.objects.get(pk=started["id"])
    assert board.slurm_job_id, board.reason
    for url in (f"/apps/{board.pk}/", f"/api/v1/tensorboards/{board.pk}/"):
        assert bob.get(url).status_code == 404, url
    assert bob.delete(f"/api/v1/tensorboards/{board.pk}/").status_code == 404

    # Stop: scancel as alice; the Slurm job goes.
    stopped = token_client.delete(f"/api/v1/tensorboards/{board.pk}/").json()
    assert stopped["state"] == "ended" and stopped["reason"] == "Stopped by you."
    wait_until_gone([board.slurm_job_id], "the stopped board's job")


def test_a_sessions_tensorboard_opens_its_logs_folder(token_client, user, slurm,
                                                      django_capture_on_commit_callbacks):
    SessionFactory(user=user, name="tbsession")
    with django_capture_on_commit_callbacks(execute=True):  # its worker runs once the request committed
        response = token_client.post("/api/v1/tensorboards/", {"session": "tbsession"}, format="json")
    assert response.status_code == 201, response.json()
    started = response.json()
    assert started["logdir"] == f"{pwd.getpwnam('alice').pw_dir}/logs" and started["session"] == "tbsession"
    assert started["state"] == "queued" and started["slurm_job_id"] == ""  # the request only saved it
    submitted = token_client.get(f"/api/v1/tensorboards/{started['id']}/").json()
    assert submitted["state"] == "queued" and submitted["slurm_job_id"], submitted
    squeued = subprocess.run(["squeue", "-h", "-j", submitted["slurm_job_id"], "-o", "%u %j %k"],
                             capture_output=True, text=True, check=False).stdout.split()
    assert squeued[:2] == ["alice", "app-tensorboard"], squeued
    stopped = token_client.delete(f"/api/v1/tensorboards/{started['id']}/").json()
    assert stopped["state"] == "ended"
    wait_until_gone([submitted["slurm_job_id"]], "the stopped board's job")


def test_a_second_slurm_job_with_a_boards_comment_is_cancelled_by_the_cycle(token_client, slurm):
    response = token_client.post("/api/v1/tensorboards/", {"logdir": pwd.getpwnam("alice").pw_dir},
                                 format="json")
    board = App.objects.get(pk=response.json()["id"])
    slurm_poll(slurm=slurm)  # no worker ran (as with the broker down): the cycle sends it
    board.refresh_from_db()
    assert board.slurm_job_id, board.reason
    planted = plant_slurm_job("alice", board.slurm_comment)
    try:
        assert set(slurm_jobs_with_comment(board.slurm_comment)) == {board.slurm_job_id, planted}
        slurm_poll(slurm=slurm)
        wait_until_gone([planted], "the planted job")
        board.refresh_from_db()
        assert board.state != AppState.ENDED, board.reason
        tracked = subprocess.run(["squeue", "-h", "-j", board.slurm_job_id, "-o", "%T"], capture_output=True,
                                 text=True, check=False).stdout.strip()
        assert tracked in ("PENDING", "CONFIGURING", "RUNNING"), tracked  # the board's own job lives on
    finally:
        subprocess.run(["scancel", planted], check=False)
