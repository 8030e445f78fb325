"""TensorBoards (web apps of type `tensorboard`) through the engine, with a stand-in Slurm: the request
saves and hands over, a worker submits (the secret's hash and the report token in sbatch's environment
only), the poll cycle retries, adopts by comment and owner, and cancels second Slurm jobs."""

import hashlib
import pwd
from datetime import timedelta

import pytest

from portal.lifecycle.work import db_now
from portal.poll.cycle import queue_follow
from portal.tokens.report import report_token
from portal.webapps.models import App, AppState
from portal.webapps.services import app_submit, apps_follow
from slurm.errors import SlurmRejected
from slurm.parsing import QueuedJob
from tests.containers.test_pulls import FakeSlurm

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("app_types")]


class AppSlurm(FakeSlurm):
    """The stand-in, also keeping each sbatch's script and environment."""

    def submit(self, *, script, user, comment, secrets=None, environment=None):
        self.scripts = [*getattr(self, "scripts", []), (script, environment)]
        return super().submit(script=script, user=user, comment=comment, secrets=secrets)


@pytest.fixture
def slurm(monkeypatch):
    fake = AppSlurm()
    monkeypatch.setattr("portal.webapps.services.Slurm.from_settings", lambda: fake)
    monkeypatch.setattr("portal.webapps.services.job_output_dir_ensure", lambda **kwargs: None)
    return fake


def _queued(board, job_id, user="alice", state="PENDING"):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user=user, reason="Priority", node_count=1,
                     cpus=1, tres_per_node="", nodes="", start_time=None, end_time=None,
                     time_limit=timedelta(hours=8), comment=board.slurm_comment, name="app-tensorboard")


def _start(client):
    logdir = f"{pwd.getpwnam('alice').pw_dir}/logs"
    response = client.post("/api/v1/tensorboards/", {"logdir": logdir}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "queued" and body["slurm_job_id"] == ""  # saved only: Slurm was not asked
    return App.objects.get(pk=body["id"])


def test_the_start_hands_the_sbatch_to_a_worker(token_client, slurm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        board = _start(token_client)
    board.refresh_from_db()
    assert slurm.submitted == [("alice", board.slurm_comment)]
    assert (board.slurm_job_id, board.reason, board.next_attempt_at) == ("4242", "Submitted to Slurm.", None)
    [(script, environment)] = slurm.scripts
    digest = hashlib.sha256(board.secret.encode()).hexdigest()
    assert environment["GPUPORTAL_APP_SECRET_SHA256"] == digest
    assert environment["GPUPORTAL_REPORT_TOKEN"] == report_token("app", board.pk)
    for secret in (board.secret, digest, environment["GPUPORTAL_REPORT_TOKEN"], "GPUPORTAL_APP_SECRET"):
        assert secret not in script


def test_a_board_no_worker_sent_is_sent_by_the_cycle_and_a_second_job_is_cancelled(token_client, slurm):
    board = _start(token_client)  # on_commit never ran: as if the broker were down
    apps_follow(slurm=slurm)  # following leaves an app not in Slurm yet alone
    board.refresh_from_db()
    assert board.state == AppState.QUEUED
    queue_follow(queue=[], queried_at=db_now(), slurm=slurm)
    board.refresh_from_db()
    assert board.slurm_job_id == "4242" and slurm.sacct[-1]["users"] == ["alice"]
    queue = [_queued(board, "4242"), _queued(board, "4243"), _queued(board, "4244", user="bob")]
    queue_follow(queue=queue, queried_at=db_now(), slurm=slurm)
    assert slurm.cancelled == [("4243", "alice")]  # bob's job with the same comment is not hers


def test_a_due_board_adopts_its_job_from_the_queue(token_client, slurm):
    board = _start(token_client)
    queue_follow(queue=[_queued(board, "900"), _queued(board, "901")], queried_at=db_now(), slurm=slurm)
    board.refresh_from_db()
    assert board.slurm_job_id == "900" and slurm.submitted == [] and slurm.cancelled == [("901", "alice")]


def test_a_board_stopped_before_slurm_answered_leaves_no_job_behind(token_client, slurm):
    board = _start(token_client)
    assert token_client.delete(f"/api/v1/tensorboards/{board.pk}/").json()["state"] == "ended"
    app_submit(app_id=board.pk, slurm=slurm)  # a worker that comes late does nothing
    assert slurm.submitted == []
    # A timed-out sbatch that did get through: the cycle cancels that job of an ended board.
    queue_follow(queue=[_queued(board, "950")], queried_at=db_now(), slurm=slurm)
    assert slurm.cancelled == [("950", "alice")]


def test_a_refused_sbatch_ends_the_board_with_slurms_words(token_client, slurm):
    board = _start(token_client)
    slurm.submit_error = SlurmRejected("sbatch: error: invalid partition specified: nope")
    app_submit(app_id=board.pk, slurm=slurm)
    board.refresh_from_db()
    assert board.state == AppState.ENDED and "invalid partition" in board.reason
