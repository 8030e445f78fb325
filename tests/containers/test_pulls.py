"""Pulls through the engine, with a stand-in Slurm and log: the request only saves, a worker submits,
and the poll cycle moves the pull to its end (its log read there) with nobody calling GET."""

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from unittest import mock

import pytest
from django.utils import timezone

from portal.containers.models import Pull
from portal.containers.pulls import DONE_MARKER, EXIT_MARKER, pull_submit
from portal.containers.services import image_create
from portal.lifecycle.work import db_now
from portal.poll.cycle import queue_follow
from slurm.errors import SlurmTimedOut
from slurm.parsing import AccountedJob, Parsed, QueuedJob
from slurm.user_files import JobOutput

pytestmark = pytest.mark.django_db
REFERENCE = "127.0.0.1:5000/gpuportal/python:3.11-bookworm"


@dataclass
class FakeSlurm:
    """sbatch, scancel and sacct as the cycle and the worker call them."""

    accounting_rows: list = field(default_factory=list)
    submit_error: Exception | None = None
    sacct: list = field(default_factory=list)
    submitted: list = field(default_factory=list)
    cancelled: list = field(default_factory=list)

    def accounting(self, **kwargs):
        self.sacct.append(kwargs)
        return Parsed(rows=self.accounting_rows)

    def submit(self, *, script, user, comment, secrets=None):
        if self.submit_error:
            raise self.submit_error
        self.submitted.append((user, comment))
        return "4242"

    def cancel(self, *, job_id, user):
        self.cancelled.append((job_id, user))


@pytest.fixture
def logs(monkeypatch):
    """The pull job's stdout and stderr, as the job-files helper would read them (by pull UUID)."""
    files = {"stdout": "", "stderr": ""}

    def read(*, user, job_uuid, stream, offset, limit, runner=None):
        data = files[stream].encode()
        return JobOutput(exists=bool(data), size=len(data), data=data[offset:offset + limit])

    monkeypatch.setattr("portal.containers.pulls.job_output_read", read)
    monkeypatch.setattr("portal.containers.pulls.job_output_dir_ensure", lambda **kwargs: None)
    return files


@pytest.fixture
def image(db):
    return image_create(name="py", runtime="charliecloud", reference=REFERENCE)


def _queued(pull, state, user="alice", job_id=None):
    return QueuedJob(job_id=job_id or pull.slurm_job_id, partition="gpu", state=state, user=user, reason="",
                     node_count=1, cpus=1, tres_per_node="", nodes="vm", start_time=None, end_time=None,
                     time_limit=timedelta(minutes=30), comment=pull.slurm_comment, name="pull-py")


def _accounted(pull, state, job_id=None, comment=True):
    when = datetime(2026, 11, 23, 9, tzinfo=UTC)
    return AccountedJob(job_id=job_id or pull.slurm_job_id, state=state, exit_code=0, exit_signal=0,
                        submit_time=when, start_time=when, end_time=when, elapsed_seconds=5, nodes="vm",
                        gpus=0, reason="", comment=pull.slurm_comment if comment else "",
                        submit_line=f"sbatch --parsable --comment={pull.slurm_comment}", partition="gpu",
                        user="alice")


def _cycle(slurm, queue):
    # A due pull goes to its own task (inline here), which asks for the adapter the settings name.
    with mock.patch("portal.containers.pulls.Slurm.from_settings", return_value=slurm):
        return queue_follow(queue=queue, queried_at=db_now(), slurm=slurm)


def _started(client, image) -> Pull:
    response = client.post(f"/api/v1/images/{image.pk}/pull/")
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["state"] == "pending" and body["slurm_job_id"] == ""  # saved only: Slurm was not asked
    return Pull.objects.get(pk=body["id"])


def test_the_cycle_takes_a_pull_from_submitted_to_succeeded_without_a_get(token_client, user, image, logs):
    slurm = FakeSlurm()
    pull = _started(token_client, image)
    # No worker ran (the broker was down): the cycle finds no Slurm job with its comment, sends it.
    _cycle(slurm, queue=[])
    pull.refresh_from_db()
    assert slurm.submitted == [("alice", pull.slurm_comment)] and pull.slurm_job_id == "4242"
    assert slurm.sacct[-1]["users"] == ["alice"]  # the lookup by comment and owner
    logs["stdout"] = "gpuportal-pull: pulling ...\n"
    logs["stderr"] = "copying layer 1/3\n"
    _cycle(slurm, queue=[_queued(pull, "RUNNING")])
    pull.refresh_from_db()
    assert pull.state == Pull.State.RUNNING and "copying layer 1/3" in pull.log_tail
    logs["stdout"] += f"{DONE_MARKER} /home/alice/gpuportal/images/py\n{EXIT_MARKER}0\n"
    slurm.accounting_rows = [_accounted(pull, "COMPLETED")]
    report = _cycle(slurm, queue=[_queued(pull, "COMPLETED")])  # finished: sacct has the final word
    assert report.sacct_calls == 1 and slurm.sacct[-1] == {"job_ids": ["4242"]}
    pull.refresh_from_db()
    assert pull.state == Pull.State.SUCCEEDED and pull.result.owner == user
    assert pull.result.environment.name == "py-alice"
    body = token_client.get(f"/api/v1/pulls/{pull.pk}/").json()  # the GET reads what the cycle wrote
    assert body["state"] == "succeeded" and body["result"] == pull.result_id


def test_a_failed_pull_gets_its_logs_readable_error_from_the_cycle(token_client, user, image, logs):
    slurm = FakeSlurm()
    pull = _started(token_client, image)
    pull_submit(pull_id=pull.pk, slurm=slurm)  # the worker's first attempt
    pull.refresh_from_db()
    logs["stdout"] = f"gpuportal-pull: pulling ...\n{EXIT_MARKER}1\n"
    logs["stderr"] = "ch-image[1]: error: authentication failed: 401 Unauthorized\n"
    slurm.accounting_rows = [_accounted(pull, "FAILED")]
    _cycle(slurm, queue=[])  # gone from the queue
    pull.refresh_from_db()
    assert pull.state == Pull.State.FAILED
    assert pull.error.startswith("The registry refused the login") and "401" in pull.error
    assert token_client.get(f"/api/v1/pulls/{pull.pk}/").json()["state"] == "failed"


def test_a_job_that_ended_without_a_word_fails_the_pull_with_slurms_state(token_client, user, image, logs):
    slurm = FakeSlurm()
    pull = _started(token_client, image)
    pull_submit(pull_id=pull.pk, slurm=slurm)
    pull.refresh_from_db()
    _cycle(slurm, queue=[_queued(pull, "RUNNING")])
    slurm.accounting_rows = [_accounted(pull, "TIMEOUT")]
    _cycle(slurm, queue=[])
    pull.refresh_from_db()
    assert pull.state == Pull.State.FAILED and pull.error.startswith("The pull job ended TIMEOUT")


def test_a_due_pull_slurm_already_has_is_adopted_not_sent_again(token_client, user, image, logs):
    slurm = FakeSlurm()
    pull = _started(token_client, image)
    # Accounting keeps no comments here: the sbatch line carries it.
    slurm.accounting_rows = [_accounted(pull, "RUNNING", job_id="555", comment=False)]
    _cycle(slurm, queue=[])
    pull.refresh_from_db()
    assert pull.slurm_job_id == "555" and slurm.submitted == []
    # Found in the queue: the oldest of hers with its comment is adopted, a second one cancelled.
    second = image_create(name="py2", runtime="podman", reference=REFERENCE)
    other = Pull.objects.create(user=user, image=second)
    queue = [_queued(other, "PENDING", job_id="600"), _queued(other, "PENDING", job_id="601"),
             _queued(other, "PENDING", job_id="602", user="bob")]  # bob's is bob's business
    _cycle(slurm, queue=queue)
    other.refresh_from_db()
    assert other.slurm_job_id == "600" and slurm.cancelled == [("601", "alice")] and slurm.submitted == []


def test_a_timed_out_sbatch_is_fenced_until_a_lookup_a_cycle_later(token_client, user, image, logs, settings):
    settings.SLURM_POLL_SECONDS = 60
    slurm = FakeSlurm(submit_error=SlurmTimedOut("sbatch did not answer within 20 s"))
    pull = _started(token_client, image)
    pull_submit(pull_id=pull.pk, slurm=slurm)
    pull.refresh_from_db()
    assert pull.submit_uncertain_at is not None and "looking for the job" in pull.reason
    Pull.objects.filter(pk=pull.pk).update(next_attempt_at=timezone.now() - timedelta(seconds=1))  # due
    slurm.submit_error = None
    _cycle(slurm, queue=[])
    assert slurm.submitted == []  # Slurm may still register the first one: not sent again yet
    Pull.objects.filter(pk=pull.pk).update(submit_uncertain_at=db_now() - timedelta(seconds=61))
    _cycle(slurm, queue=[])
    pull.refresh_from_db()
    assert slurm.submitted == [("alice", pull.slurm_comment)] and pull.slurm_job_id == "4242"


def test_with_the_broker_down_the_pull_is_saved_and_says_so(token_client, user, image, monkeypatch,
                                                           django_capture_on_commit_callbacks):
    def down(*args, **kwargs):
        raise ConnectionError("redis down")

    monkeypatch.setattr("portal.containers.tasks.pull_submit_first.delay", down)
    with django_capture_on_commit_callbacks(execute=True):
        pull = _started(token_client, image)
    pull.refresh_from_db()
    assert pull.state == Pull.State.PENDING and "workers are unreachable" in pull.reason


def test_a_second_pull_of_the_same_image_is_a_409_even_before_slurm_has_the_first(token_client, image):
    assert token_client.post(f"/api/v1/images/{image.pk}/pull/").status_code == 202
    response = token_client.post(f"/api/v1/images/{image.pk}/pull/")
    assert response.status_code == 409 and response.json()["code"] == "pull_running"
