"""schemathesis on the benchmarks, references and usage operations only, as a user and as an admin
(tests/test_api_fuzz.py runs every operation as a user): no server error, every status documented."""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from portal.accounts.services import api_token_create
from tests.benchmarks.factories import ResultFactory
from tests.factories import UserFactory
from tests.test_api_fuzz import CHECKS, api_server  # noqa: F401 - a fixture

EXAMPLES = 25
PATHS = r"^/api/v1/(benchmarks|references|usage)/"


@pytest.fixture
def api_schema(api_server):  # noqa: F811 - the imported fixture
    return schemathesis.openapi.from_url(f"{api_server.url}/api/schema/").include(path_regex=PATHS)


@pytest.mark.parametrize("username", ["alice", "ada"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_benchmark_api(api_schema, api_server, mode, username):  # noqa: F811
    user = UserFactory(username=username, is_staff=username == "ada")
    ResultFactory(user=user)
    cases = 0
    for result in api_schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def run(case: schemathesis.Case) -> None:
            nonlocal cases
            cases += 1
            _, key = api_token_create(user=user, name="fuzz")
            case.call_and_validate(
                base_url=api_server.url, headers={"Authorization": f"Token {key}"}, checks=CHECKS
            )

        try:
            run()
        except Unsatisfiable:
            assert mode == GenerationMode.NEGATIVE
    assert cases > 0
