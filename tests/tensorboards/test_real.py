"""TensorBoard and training metrics on the real cluster: a PyTorch training job writes events, its
metrics are recorded when it ends; TensorBoard started from that job is served through the portal
to its owner only; stop, idle timeout, an empty folder, and TensorBoards that fail to start. A start
only saves it: the worker it hands over to (or else the poll cycle) runs its sbatch, and a second
Slurm job with its comment and owner is cancelled by the cycle."""

import json
import pwd
import re
import shutil
import subprocess
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.tensorboards.models import TensorBoard, TensorBoardState
from portal.tensorboards.services import tensorboards_sync
from tests.environments.conftest import needs_real_envs
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)
from tests.jobs.test_fencing_real import _plant as plant_slurm_job
from tests.jobs.test_fencing_real import _slurm_jobs as slurm_jobs_with_comment
from tests.poll_helpers import slurm_poll
from tests.servers.factories import NotebookServerFactory
from tests.tensorboards.conftest import TRAINING, slurm_job_gone, sync_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs,
              pytest.mark.usefixtures("polled", "cleanup_jobs", "cleanup_tensorboards")]
READY, ENDED = TensorBoardState.READY, TensorBoardState.ENDED


def _client(username, **fields):
    client = Client()
    client.force_login(UserFactory(username=username, **fields))
    return client


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
    bob, alice = _client("bob"), _client("alice")
    assert bob.get(f"/api/v1/jobs/{job.pk}/metrics/").status_code == 404

    # TensorBoard on that job's log directory, from the API.
    response = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert response.status_code == 201, response.json()
    started = response.json()
    home = pwd.getpwnam("alice").pw_dir
    assert started["logdir"] == f"{home}/logs/jobs/{job.uuid}" and started["slurm_job_id"] == ""
    again = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert again.status_code == 200 and again.json()["id"] == started["id"]  # the active one, reused
    board = sync_until(slurm, started["id"], (READY, ENDED))
    assert board.state == READY, board.reason
    node = slurm.queue().rows
    assert board.host in {row.nodes for row in node if row.job_id == board.slurm_job_id} | {"localhost"}

    prefix = f"/tensorboards/{board.pk}/proxy"
    tags = alice.get(f"{prefix}/data/plugin/scalars/tags")
    assert tags.status_code == 200
    listed = json.loads(b"".join(tags.streaming_content))
    assert set(listed["smoke"]) == {"train/loss", "train/samples_per_sec"}, listed
    scalars = alice.get(f"{prefix}/data/plugin/scalars/scalars?run=smoke&tag=train/loss")
    points = json.loads(b"".join(scalars.streaming_content))
    assert points[-1][1] == 19 and points[-1][2] == pytest.approx(printed, abs=1e-4)
    page = alice.get(f"{prefix}/")
    assert page.status_code == 200 and b"<tb-webapp>" in b"".join(page.streaming_content)

    # Another user: no page, no proxy, no API.
    for url in (f"/tensorboards/{board.pk}/", f"{prefix}/", f"{prefix}/data/plugin/scalars/tags",
                f"/api/v1/tensorboards/{board.pk}/"):
        assert bob.get(url).status_code == 404, url
    assert bob.delete(f"/api/v1/tensorboards/{board.pk}/").status_code == 404
    assert alice.get(f"/tensorboards/{board.pk}/").status_code == 200

    # Stop: scancel as alice; the Slurm job goes.
    stopped = token_client.delete(f"/api/v1/tensorboards/{board.pk}/").json()
    assert stopped["state"] == "ended" and stopped["reason"] == "Stopped by you."
    assert slurm_job_gone(board.slurm_job_id)


def test_a_sessions_tensorboard_opens_its_logs_folder(token_client, user, slurm,
                                                      django_capture_on_commit_callbacks):
    NotebookServerFactory(user=user, name="tbsession")
    with django_capture_on_commit_callbacks(execute=True):  # its worker runs once the request committed
        response = token_client.post("/api/v1/tensorboards/", {"session": "tbsession"}, format="json")
    assert response.status_code == 201, response.json()
    started = response.json()
    assert started["logdir"] == f"{pwd.getpwnam('alice').pw_dir}/logs" and started["session"] == "tbsession"
    assert started["state"] == "queued" and started["slurm_job_id"] == ""  # the request only saved it
    submitted = token_client.get(f"/api/v1/tensorboards/{started['id']}/").json()
    assert submitted["state"] == "queued" and submitted["slurm_job_id"], submitted
    stopped = token_client.delete(f"/api/v1/tensorboards/{started['id']}/").json()
    assert stopped["state"] == "ended" and slurm_job_gone(submitted["slurm_job_id"])


def test_a_second_slurm_job_with_a_boards_comment_is_cancelled_by_the_cycle(token_client, slurm):
    response = token_client.post("/api/v1/tensorboards/", {"logdir": pwd.getpwnam("alice").pw_dir},
                                 format="json")
    board = TensorBoard.objects.get(pk=response.json()["id"])
    slurm_poll(slurm=slurm)  # no worker ran (as with the broker down): the cycle sends it
    board.refresh_from_db()
    assert board.slurm_job_id, board.reason
    planted = plant_slurm_job("alice", board.slurm_comment)
    try:
        assert set(slurm_jobs_with_comment(board.slurm_comment)) == {board.slurm_job_id, planted}
        slurm_poll(slurm=slurm)
        assert slurm_job_gone(planted)
        board.refresh_from_db()
        assert board.state != ENDED, board.reason
        tracked = subprocess.run(["squeue", "-h", "-j", board.slurm_job_id, "-o", "%T"], capture_output=True,
                                 text=True, check=False).stdout.strip()
        assert tracked in ("PENDING", "CONFIGURING", "RUNNING"), tracked  # the board's own job lives on
    finally:
        subprocess.run(["scancel", planted], check=False)


def test_an_empty_folder_opens_and_an_idle_tensorboard_is_stopped(token_client, slurm, settings,
                                                                   django_capture_on_commit_callbacks):
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"tb-empty-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    shutil.chown(folder, account.pw_uid, account.pw_gid)
    try:
        with django_capture_on_commit_callbacks(execute=True):  # through its worker
            response = token_client.post("/api/v1/tensorboards/", {"logdir": str(folder)}, format="json")
        assert response.status_code == 201, response.json()
        assert TensorBoard.objects.get(pk=response.json()["id"]).slurm_job_id  # the worker submitted it
        board = sync_until(slurm, response.json()["id"], (READY, ENDED))
        assert board.state == READY, board.reason
        alice = _client("alice")
        runs = alice.get(f"/tensorboards/{board.pk}/proxy/data/runs")
        assert b"".join(runs.streaming_content) == b"[]"  # TensorBoard's page says "No dashboards are active"

        # Idle: nobody used it for longer than the setting.
        settings.TENSORBOARD_IDLE_MINUTES = 0.5
        TensorBoard.objects.filter(pk=board.pk).update(last_access=timezone.now() - timedelta(minutes=1))
        tensorboards_sync(slurm=slurm)
        board.refresh_from_db()
        assert board.state == ENDED and board.reason == "Stopped after 0.5 minutes without use."
        assert slurm_job_gone(board.slurm_job_id)
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize(("command", "expected"), [
    ("/nonexistent/tensorboard", "No such file or directory"),
    ("{venv}/bin/tensorboard --no_such_flag", "unrecognized arguments: --no_such_flag"),
])
def test_a_tensorboard_that_fails_to_start_shows_why_from_its_log(token_client, slurm, settings, command,
                                                                 expected):
    settings.TENSORBOARD_COMMAND = command.format(venv=str(Path(settings.TENSORBOARD_COMMAND).parents[1]))
    response = token_client.post("/api/v1/tensorboards/", {"logdir": pwd.getpwnam("alice").pw_dir},
                                 format="json")
    assert response.status_code == 201, response.json()
    board = sync_until(slurm, response.json()["id"], (READY, ENDED), timeout=60)
    assert board.state == ENDED and board.reason.startswith("TensorBoard ended before it was ready")
    assert expected in board.reason, board.reason
    page = _client("alice").get(f"/tensorboards/{board.pk}/").content.decode()
    assert expected in page


def test_a_tensorboard_that_never_reports_a_port_is_ended_in_bounded_time(token_client, slurm, settings):
    settings.TENSORBOARD_COMMAND = "/bin/bash -c 'echo listening soon >&2; sleep 120'"
    settings.TENSORBOARD_START_TIMEOUT_SECONDS = 3
    response = token_client.post("/api/v1/tensorboards/", {"logdir": pwd.getpwnam("alice").pw_dir},
                                 format="json")
    board = sync_until(slurm, response.json()["id"], (READY, ENDED), timeout=60)
    assert board.state == ENDED, board.reason
    assert board.reason.startswith("TensorBoard did not report its port within 3 s")
    assert "listening soon" in board.reason  # its log's tail
    assert slurm_job_gone(board.slurm_job_id)
