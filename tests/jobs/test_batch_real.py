"""A batch of smoke jobs against the real local Slurm: one request, one task, each job in Slurm once."""

import pytest

from portal.jobs.models import Job, JobState

pytestmark = [pytest.mark.integration, pytest.mark.django_db,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def test_a_batch_of_five_reaches_slurm_once_each(token_client, slurm, django_capture_on_commit_callbacks):
    body = [{"template": "custom", "name": f"batch-{index}",
             "parameters": {"commands": f"echo batch {index}", "gpus": 0, "partition": "debug",
                            "time_limit": 5}} for index in range(5)]
    body.insert(2, {"template": "custom", "parameters": {"gpus": 99}})  # refused, the rest go on
    with django_capture_on_commit_callbacks(execute=True):  # Celery is eager: the one task runs here
        response = token_client.post("/api/v1/jobs/", body, format="json", headers={"Idempotency-Key": "b5"})
    assert response.status_code == 200, response.json()
    results = response.json()["results"]
    assert [r["status"] for r in results] == [201, 201, 400, 201, 201, 201]
    jobs = Job.objects.filter(pk__in=[r["job"]["id"] for r in results if "job" in r])
    assert {job.state for job in jobs} == {JobState.PENDING} and {job.submit_attempts for job in jobs} == {1}

    with django_capture_on_commit_callbacks(execute=True):
        replay = token_client.post("/api/v1/jobs/", body, format="json", headers={"Idempotency-Key": "b5"})
    assert [r.get("job", {}).get("id") for r in replay.json()["results"]] == [r.get("job", {}).get("id")
                                                                              for r in results]

    comments = [row.comment for row in slurm.queue(finished=True).rows]
    for job in jobs:
        assert comments.count(job.slurm_comment) == 1, job.slurm_comment
