"""The job composer goes by the same policy: the group's walltime and partitions, GPUs per node."""

import pytest

from portal.jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("parameters", "field", "message"), [
    ({"time_limit": 25 * 60}, "time_limit", "Your group allows at most 1440 minutes per job."),
    ({"gpus": 5}, "gpus", "at most 4 GPU(s) per node"),
    ({"partition": "debug", "time_limit": 90}, "time_limit", "'debug' allows at most 60 minutes"),
])
def test_jobs_over_the_policy_are_refused_naming_the_field(cluster_policy, token_client, parameters, field,
                                                           message):
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": "true", **parameters}}, format="json")
    assert response.status_code == 400, response.json()
    assert message in " ".join(response.json()["fields"]["parameters"][field])
    assert not Job.objects.exists()


def test_a_group_without_the_partition_may_not_submit_there(cluster_policy, token_client, settings):
    settings.POLICY_GROUPS = {"portal-users": {"partitions": ["gpu"]}}
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": "true", "partition": "debug", "time_limit": 5}}, format="json")
    assert response.json()["fields"]["parameters"]["partition"] == [
        "Your group may not use partition debug; choose one of: gpu."]
