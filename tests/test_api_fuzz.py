"""schemathesis against /api/schema/, with a bounded budget: no server error for any generated
request (valid and invalid ones), and every status the API answers is one the schema documents."""

from types import SimpleNamespace

import pytest
import schemathesis
from django.contrib.staticfiles.handlers import StaticFilesHandler
from django.core.servers.basehttp import ThreadedWSGIServer
from django.db import DEFAULT_DB_ALIAS, connections
from django.test.testcases import LiveServerThread
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, negative_data_rejection, status_code_conformance
from schemathesis.core import NOT_SET

from portal.accounts.services import api_token_create
from tests.factories import JobFactory, UserFactory

EXAMPLES = 25  # per operation and mode: the CI budget
# A tus upload's chunk (PATCH /api/v1/files/uploads/{id}/) is bytes, as any octet stream.
schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")
# No hub runs here, on purpose: starting or stopping a session answers the documented 503
# ("hub_unavailable"), which is the one 5xx allowed, and only there.
HUB_PATHS = ("/api/v1/sessions/",)


@schemathesis.check
def no_server_error(ctx: schemathesis.CheckContext, response: schemathesis.Response,
                    case: schemathesis.Case) -> bool | None:
    if response.status_code >= 500:
        body = response.json() if response.headers.get("content-type", [""])[0].startswith(
            "application/json") else {}
        hub_down = (response.status_code == 503 and body.get("code") == "hub_unavailable"
                    and case.path.startswith(HUB_PATHS))
        if not hub_down:
            raise AssertionError(f"server error {response.status_code}: {response.text[:300]}")
    return None


CHECKS = [no_server_error, status_code_conformance, content_type_conformance]
# A JSON body invalid by the schema (a value of another type included: a list for a string, true or
# text for a number, text for a boolean) must be refused. Queries and form bodies are text.
BODY_CHECKS = [*CHECKS, negative_data_rejection]


class _KeptConnectionServer(ThreadedWSGIServer):
    def _close_connections(self) -> None:
        """Left open after each request, as a portal worker keeps its own (CONN_MAX_AGE): Django
        still closes it at a request's end once it is unusable or older than that."""


class _KeptConnectionThread(LiveServerThread):
    server_class = _KeptConnectionServer


@pytest.fixture
def api_server(transactional_db):
    """The portal over the test database in a server thread, like pytest-django's live_server, but
    with one database connection that its request threads share (the cases come one at a time)
    rather than a new one per request: that connect was half of each case's time."""
    connection = connections.create_connection(DEFAULT_DB_ALIAS)
    connection.inc_thread_sharing()
    server = _KeptConnectionThread("localhost", StaticFilesHandler, {DEFAULT_DB_ALIAS: connection})
    server.daemon = True
    server.start()
    server.is_ready.wait()
    if server.error:
        raise server.error
    yield SimpleNamespace(url=f"http://localhost:{server.port}")
    server.terminate()  # its thread closes the connection
    connection.dec_thread_sharing()


@pytest.fixture
def api_schema(api_server, partitions, settings, monkeypatch):
    """The schema as the running portal serves it (a real server thread over the test database)."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # sessions answer 503: no hub here
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)  # no sbatch
    return schemathesis.openapi.from_url(f"{api_server.url}/api/schema/")


def _nothing_to_negate(operation: schemathesis.APIOperation) -> bool:
    """No body, no query, and every other parameter (path, the auth header and cookie) takes any
    string: every request it can make is a valid one, so negative mode has no case to send.
    Hypothesis would give up on it only after ~460 tries (Unsatisfiable), half a second an
    operation; a third of the operations are like that."""
    if len(operation.body) or len(operation.query):
        return False
    parameters = [*operation.path_parameters, *operation.headers, *operation.cookies]
    return all(parameter.definition.get("schema") == {"type": "string"} for parameter in parameters)


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api(api_schema, api_server, mode):
    user = UserFactory(username="alice")
    JobFactory(user=user)
    cases = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()
        if mode == GenerationMode.NEGATIVE and _nothing_to_negate(operation):
            continue

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case) -> None:
            nonlocal cases
            cases += 1
            _, key = api_token_create(user=user, name="fuzz")  # a case may revoke the last one
            negative_body = (mode == GenerationMode.NEGATIVE and case.body is not NOT_SET
                             and case.media_type == "application/json")
            case.call_and_validate(base_url=api_server.url, headers={"Authorization": f"Token {key}"},
                                   checks=BODY_CHECKS if negative_body else CHECKS)

        try:
            run()
        except Unsatisfiable:
            assert mode == GenerationMode.NEGATIVE  # nothing to make invalid that _nothing_to_negate saw
    print(f"\nschemathesis {mode.value}: {cases} cases, 0 server errors")
