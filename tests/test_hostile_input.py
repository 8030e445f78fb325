"""The hostile-input corpus against every field of the API and the forms: a 400 that names the
field, or a value that lands in the script quoted. Never a 5xx, never an HTML error from the API."""

import json
import shlex

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.jobs.job_templates import catalog
from portal.jobs.models import Job
from portal.tokens.report import report_token
from tests.factories import JobFactory, UserFactory
from tests.hostile_corpus import CORPUS, PATHS, STRINGS, WRONG_TYPES, nested
from tests.sessions.factories import SessionFactory, SlurmJobFactory

# A form post is percent-encoded UTF-8: a lone surrogate cannot be sent, only over JSON.
FORM_STRINGS = [value for value in STRINGS if value != "\ud800"]

pytestmark = pytest.mark.django_db

JOB_FIELDS = ["commands", "gpus", "nodes", "partition", "time_limit", "environment", "modules"]
SESSION_FIELDS = ["name", "partition", "gpus", "hours", "nodes", "environment"]
VALID_JOB = {"commands": "echo hi", "gpus": 0, "time_limit": 5}


@pytest.fixture(autouse=True)
def _cluster(settings, monkeypatch, partitions):
    """Partitions from the real poll; no sbatch (the corpus asserts on the stored script), no hub."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)


def _post(client, path, body, **headers):
    return client.post(path, json.dumps(body), content_type="application/json", **headers)


def _json_error(response, *field_path):
    assert response.status_code < 500, response.content[:300]
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    if response.status_code == 400:
        fields = body["fields"]
        for key in field_path:
            if key in fields:
                fields = fields[key]
        assert fields, body
    return body


def _quoted(value: str, script: str) -> bool:
    return shlex.quote(value) in script or all(shlex.quote(word) in script for word in value.split())


@pytest.mark.parametrize("field", JOB_FIELDS)
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_job_parameters(token_client, field, value):
    body = {"template": "custom", "parameters": {**VALID_JOB, field: value}}
    response = _post(token_client, "/api/v1/jobs/", body)
    result = _json_error(response, "parameters", field)
    if response.status_code == 400:
        assert field in result["fields"].get("parameters", {}), result
    else:
        assert response.status_code == 201, result
        script = Job.objects.get(pk=result["id"]).script
        stored = result["parameters"][field]
        if isinstance(stored, str) and stored:
            assert _quoted(stored, script), (field, stored)
        assert script.count("#SBATCH") == script.split("\n\n", 1)[0].count("#SBATCH")  # header only


@pytest.mark.parametrize("field", ["template", "name", "parameters"])
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_job_top_level_fields(token_client, field, value):
    body = {"template": "custom", "parameters": VALID_JOB, field: value}
    response = _post(token_client, "/api/v1/jobs/", body)
    result = _json_error(response)
    if response.status_code == 400:
        assert field in result["fields"] or "parameters" in result["fields"], result
    else:
        assert response.status_code == 201
        assert Job.objects.get(pk=result["id"]).script.splitlines()[1].startswith("#SBATCH --job-name=")


@pytest.mark.parametrize("field", SESSION_FIELDS)
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_session_options(token_client, field, value):
    response = _post(token_client, "/api/v1/sessions/", {"name": "s1", field: value})
    # A valid request is accepted at once (202; the hub is asked in the background); anything else
    # must be refused naming the field.
    result = _json_error(response)
    if response.status_code != 202:
        assert response.status_code == 400 and field in result["fields"], result


def _wrong_types(schema: dict) -> list:
    return WRONG_TYPES["string" if "enum" in schema else schema["type"]]


@pytest.mark.parametrize("slug", sorted(catalog().templates))
def test_template_parameters_take_exactly_their_schemas_type(token_client, slug):
    """Every parameter of every template, against values of every other JSON type."""
    for name, schema in catalog().templates[slug].json_schema()["properties"].items():
        for value in _wrong_types(schema):
            response = _post(token_client, "/api/v1/jobs/", {"template": slug, "parameters": {name: value}})
            assert response.status_code == 400, (slug, name, value, response.content[:200])
            assert name in response.json()["fields"]["parameters"], (slug, name, value)
    assert not Job.objects.exists()


@pytest.mark.parametrize(("slug", "field"), [("storage-benchmark", "directory"),
                                             ("pytorch-train", "entrypoint"),
                                             ("pytorch-multinode", "entrypoint")])
@pytest.mark.parametrize("value", PATHS, ids=repr)
def test_path_parameters_stay_in_the_users_folders(token_client, slug, field, value):
    response = _post(token_client, "/api/v1/jobs/", {"template": slug, "parameters": {field: value}})
    assert response.status_code == 400, response.content[:200]
    assert field in response.json()["fields"]["parameters"]


SESSION_TYPES = {"name": "string", "profile": "string", "partition": "string", "gpus": "integer",
                 "hours": "number", "nodes": "integer", "environment": "string",
                 "queue_timeout_minutes": "integer"}
JOB_TYPES = {"template": "string", "name": "string", "notify_email": "boolean"}


@pytest.mark.parametrize("field", sorted(SESSION_TYPES))
def test_session_options_take_exactly_their_types(token_client, field):
    for value in WRONG_TYPES[SESSION_TYPES[field]]:
        response = _post(token_client, "/api/v1/sessions/", {"name": "s1", field: value})
        assert response.status_code == 400 and field in response.json()["fields"], (field, value)


@pytest.mark.parametrize("field", sorted(JOB_TYPES))
def test_job_fields_take_exactly_their_types(token_client, field):
    for value in WRONG_TYPES[JOB_TYPES[field]]:
        response = _post(token_client, "/api/v1/jobs/", {"template": "custom", "parameters": VALID_JOB,
                                                         field: value})
        assert response.status_code == 400 and field in response.json()["fields"], (field, value)


@pytest.mark.parametrize("kind", ["job", "session"])
def test_extend_bodies_take_exactly_their_types(token_client, user, kind):
    if kind == "job":
        path = f"/api/v1/jobs/{JobFactory(user=user, state='RUNNING', slurm_job_id='4242').pk}/extend/"
    else:
        SlurmJobFactory(job_id="5151", state="RUNNING")
        path = f"/api/v1/sessions/{SessionFactory(user=user, name='nb', job_id='5151').name}/extend/"
    for field, kind_of in (("minutes", "integer"), ("hours", "number")):
        for value in WRONG_TYPES[kind_of]:
            response = _post(token_client, path, {field: value})
            assert response.status_code == 400 and field in response.json()["fields"], (field, value)


@pytest.mark.parametrize("field", ["partition", "gpus", "hours", "nodes", "environment"])
def test_session_preset_values_take_exactly_their_types(token_client, field):
    for value in WRONG_TYPES[SESSION_TYPES[field]]:
        response = _post(token_client, "/api/v1/presets/", {"kind": "session", "name": "p",
                                                            "values": {field: value}})
        assert response.status_code == 400 and f"values.{field}" in response.json()["fields"], (field, value)


# The other typed bodies: (method, path, the rest of a valid body, field, its schema type, admin?).
OTHER_BODIES = [
    ("PUT", "/api/v1/notifications/", {}, "email_on_job_end", "boolean", False),
    ("POST", "/api/v1/tensorboards/", {}, "logdir", "string", False),
    ("POST", "/api/v1/tensorboards/", {}, "job", "integer", False),
    ("POST", "/api/v1/tensorboards/", {}, "session", "string", False),
    ("POST", "/api/v1/presets/", {"kind": "session", "values": {}}, "name", "string", False),
    ("POST", "/api/v1/presets/", {"kind": "job", "name": "p", "values": {}}, "template", "string", False),
    ("POST", "/api/v1/registry-keys/", {"username": "u", "key": "k"}, "registry", "string", False),
    ("POST", "/api/v1/registry-keys/", {"registry": "nvcr.io", "key": "k"}, "username", "string", False),
    ("POST", "/api/v1/tokens/", {"password": "x"}, "username", "string", False),
    ("POST", "/api/v1/references/", {"tool": "fio", "metric": "m"}, "value", "number", True),
    ("POST", "/api/v1/references/", {"tool": "fio", "metric": "m", "value": 1.0}, "gpus", "integer", True),
    ("POST", "/api/v1/benchmarks/import/", {"tool": "fio"}, "text", "string", True),
]


@pytest.mark.parametrize(("method", "path", "rest", "field", "kind", "admin"), OTHER_BODIES,
                         ids=[f"{path}{field}" for _, path, _, field, _, _ in OTHER_BODIES])
def test_other_bodies_take_exactly_their_types(token_client, method, path, rest, field, kind, admin):
    client = token_client
    if admin:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION="Token " + api_token_create(
            user=UserFactory(username="ada", is_staff=True), name="t")[1])
    for value in WRONG_TYPES[kind]:
        response = client.generic(method, path, json.dumps({**rest, field: value}),
                                  content_type="application/json")
        assert response.status_code == 400 and field in response.json()["fields"], (field, value,
                                                                                      response.content[:200])


@pytest.mark.parametrize("field", ["event", "node", "exit_code"])
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_report_fields(field, value):
    """What a job reports about itself (POST /api/v1/reports/, with its own report token)."""
    job = JobFactory(state="PENDING", node_list="")
    body = {"event": {"event": value}, "node": {"event": "started", "node": value},
            "exit_code": {"event": "exited", "exit_code": value}}[field]
    client = APIClient()
    response = _post(client, "/api/v1/reports/", body,
                     HTTP_AUTHORIZATION=f"Report {report_token('job', job.pk)}")
    result = _json_error(response)
    if response.status_code != 202:
        assert response.status_code == 400 and field in result["fields"], result


@pytest.mark.parametrize("body", [nested(100_000), nested(33), "{" * 50_000,
                                  '{"event": "ready"' + " " * (2 << 20) + "}", b"\xff\xfe{}", "[]", "null",
                                  '"text"', "1e999999", "NaN"])
def test_report_bodies(body):
    client = APIClient()
    response = client.post("/api/v1/reports/", body, content_type="application/json",
                           HTTP_AUTHORIZATION=f"Report {report_token('job', JobFactory().pk)}")
    assert response.status_code in (400, 413), (response.status_code, response.content[:200])
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize(("query", "field"), [
    ("state=RUNNING'--", "state"), ("submitted_after=2026-02-30", "submitted_after"),
    ("submitted_after=99999-01-01", "submitted_after"), ("page_size=10000000000000000000", None),
    ("cursor=%00%ff", None), ("template=" + "x" * 5000, "template"), ("user=%0a", None),
])
def test_job_list_queries(token_client, query, field):
    response = token_client.get(f"/api/v1/jobs/?{query}")
    result = _json_error(response)
    if response.status_code == 400 and field:
        assert field in result["fields"]


@pytest.mark.parametrize(("query", "field"), [("until=0001-01-01T00:00:00Z", "until"),
                                              ("until=0001-01-01T00:00:00Z&period=month", "until"),
                                              ("since=9999-12-31T23:59:59Z", "since")])
def test_usage_queries_at_the_ends_of_time(token_client, query, field):
    response = token_client.get(f"/api/v1/usage/?{query}")
    assert response.status_code == 400 and field in _json_error(response)["fields"], response.content[:200]


@pytest.mark.parametrize("offset", ["-1", "1e9", "99999999999999999999999", "x", "%00"])
def test_log_offsets(token_client, user, offset):
    job = JobFactory(user=user)
    response = token_client.get(f"/api/v1/jobs/{job.pk}/log/?offset={offset}")
    assert response.status_code in (200, 400, 409), response.content[:200]
    if response.status_code == 400:
        assert "offset" in response.json()["fields"]


@pytest.mark.parametrize("path", ["/api/v1/jobs/99999999999999999999/", "/api/v1/jobs/-1/",
                                  "/api/v1/jobs/1e3/", "/api/v1/sessions/%00/", "/api/v1/nope/",
                                  "/api/v1/sessions/" + "a" * 300 + "/"])
def test_odd_paths_are_json_404s(token_client, path):
    response = token_client.get(path)
    assert response.status_code == 404 and response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("body", [nested(100_000), nested(33), "{" * 50_000,
                                  '{"template": "x"' + " " * (2 << 20) + "}", b"\xff\xfe{}", "[]", "null",
                                  '"text"', "1e999999", "NaN"])
def test_bodies(token_client, body):
    for path in ("/api/v1/jobs/", "/api/v1/sessions/", "/api/v1/tokens/"):
        response = token_client.post(path, body, content_type="application/json")
        assert response.status_code in (400, 413), (path, response.status_code, response.content[:200])
        assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("path", ["/api/v1/jobs/", "/api/v1/sessions/", "/api/v1/tokens/",
                                  "/api/v1/references/"])
def test_too_many_form_fields_is_a_400(token_client, path):
    body = "&".join(f"f{n}=1" for n in range(1500))  # past DATA_UPLOAD_MAX_NUMBER_FIELDS (1000)
    response = token_client.post(path, body, content_type="application/x-www-form-urlencoded")
    assert response.status_code in (400, 403), (path, response.status_code, response.content[:200])
    assert response["Content-Type"].startswith("application/json")


@pytest.mark.parametrize("key", ["", " ", "a" * 256, "x\ny", "é"])
def test_bad_idempotency_keys_name_the_header(token_client, key):
    response = _post(token_client, "/api/v1/jobs/", {"template": "custom", "parameters": VALID_JOB},
                     HTTP_IDEMPOTENCY_KEY=key)
    assert response.status_code == 400 and "Idempotency-Key" in response.json()["fields"]


@pytest.mark.parametrize("value", [*FORM_STRINGS, "10000000000000000000", "1e308", "nan"], ids=repr)
def test_compose_form(client, user, value):
    client.force_login(user)
    for field in JOB_FIELDS:
        form = {"name": "x", "action": "preview", "commands": "echo hi", "gpus": "0", "nodes": "1",
                "time_limit": "5", field: value}
        response = client.post("/jobs/new/custom/", form)
        assert response.status_code in (200, 400), (field, value, response.status_code)


@pytest.mark.parametrize("value", [*FORM_STRINGS, "10000000000000000000", "1e308", "nan", "-1"], ids=repr)
def test_server_form(client, user, value):
    client.force_login(user)
    for field in SESSION_FIELDS:
        form = {"name": "s1", "partition": "gpu", "gpus": "1", "hours": "1", "nodes": "1", field: value}
        response = client.post("/servers/", form)
        assert response.status_code in (200, 302, 400), (field, value, response.status_code)


def test_a_job_owner_without_a_unix_account_is_a_clear_400(token_client):
    ghost = UserFactory(username="ghost")
    _, key = api_token_create(user=ghost, name="t")
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    response = _post(token_client, "/api/v1/jobs/", {"template": "custom", "parameters": VALID_JOB})
    assert response.status_code == 400 and "Unix account" in str(response.json()["fields"])
    JobFactory(user=ghost)
    job = Job.objects.filter(user=ghost).first()
    response = token_client.get(f"/api/v1/jobs/{job.pk}/log/")
    assert response.status_code == 400 and "Unix account" in str(response.json()["fields"])


def test_every_template_refuses_an_overflowing_time_limit(token_client):
    for slug in catalog().templates:
        for minutes in (10**19, 2**63):
            response = _post(token_client, "/api/v1/jobs/", {"template": slug,
                                                              "parameters": {"time_limit": minutes}})
            assert response.status_code == 400, (slug, response.content[:200])
            assert "time_limit" in response.json()["fields"]["parameters"]

