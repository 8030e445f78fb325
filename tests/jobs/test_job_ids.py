"""A job's three ids (its number, its Slurm job id, its Portal ID) through the one lookup: the API's
`?by=`, the jobs list's search box, and the job page naming all three."""

from datetime import timedelta

import pytest
from django.utils import timezone

from portal.jobs.selectors import JobKey, job_find
from portal.sweeps.models import Sweep
from tests.factories import JobFactory, UserFactory

pytestmark = pytest.mark.django_db


def _sweep_job(user, slurm_job_id: str):
    job = JobFactory(user=user, state="RUNNING", slurm_job_id=slurm_job_id, template="pytorch-train")
    Sweep.objects.create(user=user, job=job, name="s", template="pytorch-train", method="list",
                         space=[{"lr": 0.1}, {"lr": 0.2}], tasks=[{"lr": 0.1}, {"lr": 0.2}], concurrency=1,
                         objective="loss", direction="min")
    return job


def test_by_slurm_finds_the_callers_job(token_client, user):
    job = JobFactory(user=user, slurm_job_id="496")
    body = token_client.get("/api/v1/jobs/496/?by=slurm").json()
    assert (body["id"], body["slurm_job_id"]) == (job.pk, "496")


def test_by_uuid_finds_the_job_in_any_spelling(token_client, user):
    job = JobFactory(user=user)
    assert token_client.get(f"/api/v1/jobs/{job.uuid}/?by=uuid").json()["id"] == job.pk
    assert token_client.get(f"/api/v1/jobs/{job.uuid.hex.upper()}/?by=uuid").json()["id"] == job.pk


def test_by_id_is_the_default_and_as_before(token_client, user):
    job = JobFactory(user=user, slurm_job_id="123456")
    assert token_client.get(f"/api/v1/jobs/{job.pk}/").json()["id"] == job.pk
    assert token_client.get(f"/api/v1/jobs/{job.pk}/?by=id").json()["id"] == job.pk
    assert token_client.get("/api/v1/jobs/123456/").status_code == 404  # a Slurm id is not a number


def test_a_sweep_task_finds_the_sweeps_job(token_client, user):
    array = _sweep_job(user, "700")
    JobFactory(user=user, slurm_job_id="701")  # no array: it has no tasks
    assert token_client.get("/api/v1/jobs/700_1/?by=slurm").json()["id"] == array.pk
    assert token_client.get("/api/v1/jobs/700/?by=slurm").json()["id"] == array.pk
    assert token_client.get("/api/v1/jobs/701_0/?by=slurm").status_code == 404


def test_a_reused_slurm_id_finds_the_newest_job(token_client, user):
    JobFactory(user=user, slurm_job_id="42", submitted_at=timezone.now() - timedelta(days=30))
    newest = JobFactory(user=user, slurm_job_id="42")
    assert token_client.get("/api/v1/jobs/42/?by=slurm").json()["id"] == newest.pk


def test_another_users_job_is_a_404_as_an_unknown_one(token_client):
    bobs = JobFactory(user=UserFactory(username="bob"), slurm_job_id="555")
    for path in ("/api/v1/jobs/555/?by=slurm", f"/api/v1/jobs/{bobs.uuid}/?by=uuid",
                 f"/api/v1/jobs/{bobs.pk}/", "/api/v1/jobs/556/?by=slurm",
                 "/api/v1/jobs/0b5e7c1e-8f3a-4d2b-9c61-2f0e4a7d9b13/?by=uuid"):
        response = token_client.get(path)
        assert response.status_code == 404, path
        assert response.json() == {"detail": "No such job.", "code": "not_found", "fields": {}}


def test_an_admin_finds_anybodys_job_by_its_slurm_id(api_client):
    bobs = JobFactory(user=UserFactory(username="bob"), slurm_job_id="557")
    api_client.force_authenticate(UserFactory(username="ada", is_staff=True))
    assert api_client.get("/api/v1/jobs/557/?by=slurm").json()["id"] == bobs.pk


@pytest.mark.parametrize(("path", "field", "message"), [
    ("/api/v1/jobs/496_[1-3]/?by=slurm", "job_id", "Slurm job id"),
    ("/api/v1/jobs/4_9_6/?by=slurm", "job_id", "Slurm job id"),
    ("/api/v1/jobs/abc/?by=slurm", "job_id", "Slurm job id"),
    ("/api/v1/jobs/1234567890123456789/?by=slurm", "job_id", "Slurm job id"),
    ("/api/v1/jobs/496/?by=uuid", "job_id", "Portal ID"),
    ("/api/v1/jobs/496/?by=squeue", "by", "not a valid choice"),
])
def test_a_malformed_id_is_a_400_naming_the_field(token_client, path, field, message):
    response = token_client.get(path)
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["code"] == "invalid" and list(body["fields"]) == [field]
    assert message in body["fields"][field][0]


@pytest.mark.parametrize("path", ["/api/v1/jobs/abc/", "/api/v1/jobs/496_1/?by=id",
                                  "/api/v1/jobs/12345678901234567890/"])
def test_a_path_that_is_no_job_number_is_a_404_as_before(token_client, path):
    assert token_client.get(path).json()["code"] == "not_found"


def test_the_selector_raises_naming_job_id(user):
    from portal.core.errors import InvalidInput

    with pytest.raises(InvalidInput) as refused:
        job_find(user=user, key="x", by=JobKey.SLURM)
    assert "job_id" in refused.value.fields
    assert job_find(user=user, key="9", by=JobKey.SLURM) is None


def test_the_schema_documents_by_and_the_400(client):
    schema = client.get("/api/schema/?format=json").json()
    operation = schema["paths"]["/api/v1/jobs/{job_id}/"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["by"]["schema"]["enum"] == ["id", "slurm", "uuid"]
    assert parameters["job_id"]["in"] == "path" and parameters["job_id"]["schema"]["type"] == "string"
    assert {"200", "400", "404"} <= set(operation["responses"])


@pytest.fixture
def browser_client(client, user):
    client.force_login(user)
    return client


def test_the_search_box_finds_a_job_by_any_id(browser_client, user):
    job = JobFactory(user=user, slurm_job_id="9496")
    array = _sweep_job(user, "9500")
    other = JobFactory(user=user, slurm_job_id="9497")
    bobs = JobFactory(user=UserFactory(username="bob"), slurm_job_id="9498")

    def listed(q: str) -> set[int]:
        page = browser_client.get("/jobs/", {"q": q}).content.decode()
        return {j.pk for j in (job, array, other, bobs) if f'data-job="{j.pk}"' in page}

    assert listed("9496") == {job.pk}
    assert listed(str(job.uuid)) == {job.pk}
    assert listed(str(job.pk)) == {job.pk}
    assert listed("9500_1") == {array.pk}
    assert listed("9498") == set()  # bob's
    page = browser_client.get("/jobs/", {"q": "not an id"}).content.decode()
    assert "No job has the id" in page and 'value="not an id"' in page


def test_a_number_that_is_a_job_number_and_a_slurm_id_lists_both(browser_client, user):
    first = JobFactory(user=user)
    second = JobFactory(user=user, slurm_job_id=str(first.pk))
    page = browser_client.get("/jobs/", {"q": str(first.pk)}).content.decode()
    assert f'data-job="{first.pk}"' in page and f'data-job="{second.pk}"' in page


def test_the_job_page_names_its_three_ids_in_one_place(browser_client, user):
    job = JobFactory(user=user, slurm_job_id="496")
    page = browser_client.get(f"/jobs/{job.pk}/").content.decode()
    ids = page[page.index('id="job-ids"'):page.index("</dl>")]
    assert f'<dd id="job-number">{job.pk}</dd>' in ids
    assert '<code id="slurm-id">496</code>' in ids and f'<code id="portal-id">{job.uuid}</code>' in ids
    assert "job array" not in ids
    array = _sweep_job(user, "800")
    ids = browser_client.get(f"/jobs/{array.pk}/").content.decode()
    assert "a job array: its tasks are <code>800_0</code>" in ids


def test_the_sweep_header_says_job_and_slurm_job(browser_client, user):
    array = _sweep_job(user, "801")
    page = browser_client.get(f"/sweeps/{array.sweep.pk}/").content.decode()
    assert f"job {array.pk}</a>,\n  Slurm job <code id=\"array-id\">801</code>" in page
