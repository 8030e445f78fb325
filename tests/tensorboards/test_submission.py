"""TensorBoards through the engine, with a stand-in Slurm: the request saves and hands over, a worker
submits, the poll cycle retries, adopts by comment and owner, and cancels second Slurm jobs."""

import pwd
from datetime import timedelta

import pytest

from portal.core.slurm_work import db_now
from portal.poll.cycle import queue_follow
from portal.tensorboards.models import TensorBoard, TensorBoardState
from portal.tensorboards.services import tensorboard_submit, tensorboards_sync
from slurm.errors import SlurmRejected
from slurm.parsing import QueuedJob
from tests.containers.test_pulls import FakeSlurm

pytestmark = pytest.mark.django_db


@pytest.fixture
def slurm(monkeypatch):
    fake = FakeSlurm()
    monkeypatch.setattr("portal.tensorboards.services.Slurm.from_settings", lambda: fake)
    monkeypatch.setattr("portal.tensorboards.services.job_output_dir_ensure", lambda **kwargs: None)
    return fake


def _queued(board, job_id, user="alice", state="PENDING"):
    return QueuedJob(job_id=job_id, partition="gpu", state=state, user=user, reason="Priority", node_count=1,
                     cpus=1, tres_per_node="", nodes="", start_time=None, end_time=None,
                     time_limit=timedelta(hours=8), comment=board.slurm_comment, name="tensorboard")


def _start(client):
    logdir = f"{pwd.getpwnam('alice').pw_dir}/logs"
    response = client.post("/api/v1/tensorboards/", {"logdir": logdir}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["state"] == "queued" and body["slurm_job_id"] == ""  # saved only: Slurm was not asked
    return TensorBoard.objects.get(pk=body["id"])


def test_the_start_hands_the_sbatch_to_a_worker(token_client, slurm, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        board = _start(token_client)
    board.refresh_from_db()
    assert slurm.submitted == [("alice", board.slurm_comment)]
    assert (board.slurm_job_id, board.reason, board.next_attempt_at) == ("4242", "Submitted to Slurm.", None)


def test_a_board_no_worker_sent_is_sent_by_the_cycle_and_a_second_job_is_cancelled(token_client, slurm):
    board = _start(token_client)  # on_commit never ran: as if the broker were down
    tensorboards_sync(slurm=slurm)  # its log-reading sync leaves a board not in Slurm yet alone
    board.refresh_from_db()
    assert board.state == TensorBoardState.QUEUED
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
    tensorboard_submit(board_id=board.pk, slurm=slurm)  # a worker that comes late does nothing
    assert slurm.submitted == []
    # A timed-out sbatch that did get through: the cycle cancels that job of an ended board.
    queue_follow(queue=[_queued(board, "950")], queried_at=db_now(), slurm=slurm)
    assert slurm.cancelled == [("950", "alice")]


def test_a_refused_sbatch_ends_the_board_with_slurms_words(token_client, slurm):
    board = _start(token_client)
    slurm.submit_error = SlurmRejected("sbatch: error: invalid partition specified: nope")
    tensorboard_submit(board_id=board.pk, slurm=slurm)
    board.refresh_from_db()
    assert board.state == TensorBoardState.ENDED and "invalid partition" in board.reason
