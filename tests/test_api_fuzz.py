"""schemathesis against /api/schema/, with a bounded budget: no server error for any generated
request (valid and invalid ones), and every status the API answers is one the schema documents."""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import content_type_conformance, negative_data_rejection, status_code_conformance
from schemathesis.core import NOT_SET

from portal.accounts.services import api_token_create
from tests.factories import JobFactory, UserFactory

EXAMPLES = 25  # per operation and mode: the CI budget
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


@pytest.fixture
def api_schema(live_server, transactional_db, partitions, settings, monkeypatch):
    """The schema as the running portal serves it (a real server thread over the test database)."""
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # sessions answer 503: no hub here
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    monkeypatch.setattr("portal.jobs.tasks.job_submit_first.delay", lambda job_id: None)  # no sbatch
    return schemathesis.openapi.from_url(f"{live_server.url}/api/schema/")


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_api(api_schema, live_server, mode):
    user = UserFactory(username="alice")
    JobFactory(user=user)
    cases = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: schemathesis.Case) -> None:
            nonlocal cases
            cases += 1
            _, key = api_token_create(user=user, name="fuzz")  # a case may revoke the last one
            negative_body = (mode == GenerationMode.NEGATIVE and case.body is not NOT_SET
                             and case.media_type == "application/json")
            case.call_and_validate(base_url=live_server.url, headers={"Authorization": f"Token {key}"},
                                   checks=BODY_CHECKS if negative_body else CHECKS)

        try:
            run()
        except Unsatisfiable:
            assert mode == GenerationMode.NEGATIVE  # nothing to make invalid: no parameters, no body
    print(f"\nschemathesis {mode.value}: {cases} cases, 0 server errors")
