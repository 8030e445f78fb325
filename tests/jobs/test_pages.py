"""Job pages through Django's test client: composer preview and submit, list, detail, clone, cancel."""

import re

import pytest

from portal.jobs.models import Job, JobState
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def browser_client(client, user):
    client.force_login(user)
    return client


def test_picker_lists_every_template(browser_client):
    page = browser_client.get("/jobs/new/").content.decode()
    assert page.count("data-template=") >= 7 and "ResNet-50" in page


def test_composer_shows_partition_limits_and_previews_the_exact_script(browser_client, partitions):
    page = browser_client.get("/jobs/new/custom/").content.decode()
    assert 'data-max-time="60"' in page and 'data-max-gpus="4"' in page
    uuid = re.search(r'name="uuid" value="([0-9a-f-]+)"', page)[1]
    response = browser_client.post("/jobs/new/custom/", {
        "uuid": uuid, "name": "my run", "partition": "debug", "time_limit": "30", "commands": "echo $(id)",
        "gpus": "1", "nodes": "1", "modules": "", "action": "preview"})
    page = response.content.decode()
    assert "#SBATCH --partition=debug" in page and "#SBATCH --time=0-00:30:00" in page
    assert f"#SBATCH --comment=gpuportal:{uuid}" in page and "#SBATCH --cpus-per-task=8" in page
    assert "bash -euo pipefail -c &#x27;echo $(id)&#x27;" in page
    assert not Job.objects.exists()


def test_composer_errors_are_shown_per_field(browser_client, partitions):
    response = browser_client.post("/jobs/new/custom/", {
        "partition": "debug", "time_limit": "120", "commands": "true", "gpus": "1", "nodes": "1",
        "action": "submit"})
    page = response.content.decode()
    assert 'data-errors="time_limit"' in page and "allows at most 60 minutes" in page
    assert not Job.objects.exists()


def test_list_detail_clone_and_access(browser_client, user, client):
    job = JobFactory(user=user, parameters={"commands": "echo cloned", "gpus": 2, "nodes": 1},
                     state=JobState.FAILED, exit_code=3, name="first")
    other = JobFactory(user=UserFactory(username="bob"))
    listing = browser_client.get("/jobs/?state=FAILED").content.decode()
    assert f'data-job="{job.pk}"' in listing and f'data-job="{other.pk}"' not in listing
    detail = browser_client.get(f"/jobs/{job.pk}/").content.decode()
    assert "#!/bin/bash" in detail and 'id="cancel-button"' not in detail
    assert browser_client.get(f"/jobs/{other.pk}/").status_code == 404
    clone = browser_client.get(f"/jobs/new/custom/?clone={job.pk}").content.decode()
    assert "echo cloned</textarea>" in clone and 'value="first"' in clone
    assert browser_client.get(f"/jobs/new/custom/?clone={other.pk}").content.decode().count("cloned") == 0


def test_cancel_waiting_job_from_the_page(browser_client, user):
    job = JobFactory(user=user, state=JobState.QUEUED_IN_PORTAL, slurm_job_id="")
    browser_client.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED


def test_list_pages_by_keyset(browser_client, user):
    JobFactory.create_batch(55, user=user)
    page = browser_client.get("/jobs/").content.decode()
    assert page.count("data-job=") == 50
    older = re.search(r'href="\?([^"]+)" id="older"', page)[1].replace("&amp;", "&")
    rest = browser_client.get(f"/jobs/?{older}").content.decode()
    assert rest.count("data-job=") == 5 and 'id="older"' not in rest


def test_pages_say_when_states_are_unknown(browser_client, user):
    from portal.cluster.models import PollStatus

    job = JobFactory(user=user, state=JobState.RUNNING)
    status = PollStatus.get()
    status.error = "Unable to contact slurm controller"
    status.save()
    for url in ("/jobs/", f"/jobs/{job.pk}/"):
        page = browser_client.get(url).content.decode()
        assert 'id="slurm-unreachable"' in page and 'data-state="RUNNING"' in page


def test_a_form_uuid_of_another_users_job_is_a_clear_refusal(client, partitions):
    """The compose form's hidden UUID is client input: somebody else's job's UUID is refused."""
    theirs = JobFactory(user=UserFactory(username="bob"))
    client.force_login(UserFactory(username="alice"))
    response = client.post("/jobs/new/custom/", {"action": "submit", "uuid": str(theirs.uuid), "name": "x",
                                                 "commands": "true", "gpus": "0", "nodes": "1",
                                                 "time_limit": "5"})
    assert response.status_code == 409 and b"already used" in response.content
