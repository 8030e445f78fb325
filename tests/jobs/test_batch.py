"""Batch submission (a JSON list to POST /api/v1/jobs/) without a cluster: per-item answers, limits,
hostile items, idempotency of the whole request, one task per batch."""

import pytest

from portal.jobs.models import Job, JobState
from tests.factories import UserFactory
from tests.jobs.test_api import _client_for

pytestmark = pytest.mark.django_db

CUSTOM = {"template": "custom", "parameters": {"commands": "echo hi", "partition": "debug", "time_limit": 5}}


@pytest.fixture
def sent(monkeypatch):
    """The ids each dispatched task carries (nothing reaches sbatch)."""
    tasks: list[tuple[int, ...]] = []
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda *ids: tasks.append(ids))
    return tasks


def _post(client, body, capture, **headers):
    with capture(execute=True):
        return client.post("/api/v1/jobs/", body, format="json", headers=headers)


def test_each_item_is_answered_in_order_and_valid_ones_go_in_one_task(
        token_client, partitions, sent, django_capture_on_commit_callbacks):
    body = [CUSTOM, {"template": "nope"}, {**CUSTOM, "name": "second"},
            {"template": "custom", "parameters": {"gpus": 9}}, {"template": ["custom"]}]
    response = _post(token_client, body, django_capture_on_commit_callbacks)
    assert response.status_code == 200, response.json()
    answer = response.json()
    assert [(r["index"], r["status"]) for r in answer["results"]] == [
        (0, 201), (1, 400), (2, 201), (3, 400), (4, 400)]
    assert (answer["submitted"], answer["refused"]) == (2, 3)
    first, unknown, second, too_many, not_text = answer["results"]
    assert first["job"]["state"] == "QUEUED_IN_PORTAL" and second["job"]["name"] == "second"
    assert "Unknown template" in unknown["errors"]["fields"]["template"][0]
    assert "at most 8" in too_many["errors"]["fields"]["parameters"]["gpus"][0]
    assert not_text["errors"]["code"] == "invalid" and "template" in not_text["errors"]["fields"]
    assert "job" not in unknown and "errors" not in first
    assert sent == [(first["job"]["id"], second["job"]["id"])]
    assert Job.objects.count() == 2


@pytest.mark.parametrize(("body", "where"), [
    ([], None), ([CUSTOM] * 101, None), ([CUSTOM, "custom"], "1"), ([CUSTOM, None, [CUSTOM]], "1"),
])
def test_a_bad_list_is_a_400_naming_items_and_submits_nothing(token_client, partitions, sent, body, where,
                                                               django_capture_on_commit_callbacks):
    response = _post(token_client, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400
    fields = response.json()["fields"]["items"]
    assert (where in fields) if where else "1 to 100 jobs" in fields[0]
    assert Job.objects.count() == 0 and sent == []


def test_a_list_where_no_item_has_a_jobs_shape_is_a_400_naming_each(token_client, partitions, sent,
                                                                     django_capture_on_commit_callbacks):
    # What the schema's fuzz sends as invalid data: every item breaks the request schema.
    body = [{"template": -1.9, "notify_email": -88}, {"template": 99.0, "name": ""}]
    response = _post(token_client, body, django_capture_on_commit_callbacks)
    assert response.status_code == 400
    fields = response.json()["fields"]["items"]
    assert set(fields) == {"0", "1"} and "Not a valid string." in fields["0"]["template"]
    assert Job.objects.count() == 0 and sent == []


def test_hostile_items_are_refused_one_by_one_never_a_5xx(token_client, partitions, sent,
                                                          django_capture_on_commit_callbacks):
    deep: dict = {}
    for _ in range(25):  # the parser refuses more than 32 levels for the whole body
        deep = {"x": deep}
    body = [{"template": "custom", "parameters": deep},
            {"template": "custom", "name": "x" * 10_000},
            {"template": "custom", "parameters": {"commands": "echo\n#SBATCH --gres=gpu:4"}},
            {"template": "custom", "parameters": [1, 2]},
            {"template": "custom", "notify_email": "maybe", "account": "x" * 100},
            {"template": "\x00custom"}, {}, CUSTOM]
    response = _post(token_client, body, django_capture_on_commit_callbacks)
    assert response.status_code == 200, response.json()
    statuses = [r["status"] for r in response.json()["results"]]
    assert statuses == [400] * 7 + [201]
    assert Job.objects.count() == 1


def test_a_replay_answers_the_same_and_creates_nothing_another_body_is_409(
        token_client, partitions, sent, django_capture_on_commit_callbacks):
    body = [CUSTOM, {"template": "nope"}, {**CUSTOM, "name": "two"}]
    first = _post(token_client, body, django_capture_on_commit_callbacks, **{"Idempotency-Key": "batch-1"})
    again = _post(token_client, body, django_capture_on_commit_callbacks, **{"Idempotency-Key": "batch-1"})
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json()
    assert Job.objects.count() == 2 and len(sent) == 1
    key = {"Idempotency-Key": "batch-1"}
    other = _post(token_client, [CUSTOM], django_capture_on_commit_callbacks, **key)
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
    # Another key is another request.
    fresh = _post(token_client, body, django_capture_on_commit_callbacks, **{"Idempotency-Key": "batch-2"})
    assert fresh.status_code == 200 and Job.objects.count() == 4


def test_a_replay_shows_the_jobs_as_they_are_now(token_client, partitions, sent,
                                                 django_capture_on_commit_callbacks):
    first = _post(token_client, [CUSTOM], django_capture_on_commit_callbacks, **{"Idempotency-Key": "k"})
    job_id = first.json()["results"][0]["job"]["id"]
    Job.objects.filter(pk=job_id).update(state=JobState.PENDING, slurm_job_id="42")
    again = _post(token_client, [CUSTOM], django_capture_on_commit_callbacks, **{"Idempotency-Key": "k"})
    assert again.json()["results"][0]["job"]["slurm_job_id"] == "42"


def test_with_the_broker_down_the_batch_is_saved_for_the_poll_cycle(
        token_client, partitions, monkeypatch, django_capture_on_commit_callbacks):
    def down(*ids):
        raise ConnectionError("redis is down")
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", down)
    response = _post(token_client, [CUSTOM, CUSTOM], django_capture_on_commit_callbacks)
    assert [r["status"] for r in response.json()["results"]] == [201, 201]
    assert all("Background workers are unreachable" in job.reason for job in Job.objects.all())
    assert set(Job.objects.values_list("state", flat=True)) == {JobState.QUEUED_IN_PORTAL}


def test_another_users_key_is_their_own(token_client, partitions, sent, user,
                                        django_capture_on_commit_callbacks):
    bob = _client_for(UserFactory(username="bob"))
    for client in (token_client, bob):
        response = _post(client, [CUSTOM], django_capture_on_commit_callbacks, **{"Idempotency-Key": "same"})
        assert response.json()["results"][0]["status"] == 201
    assert Job.objects.count() == 2
