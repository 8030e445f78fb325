"""schemathesis on POST /api/v1/reports/ with real report tokens (tests/test_api_fuzz.py sends a user's
token, which this operation refuses with 401): no server error, every status documented."""

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from portal.tokens.report import report_token
from tests.factories import JobFactory
from tests.sessions.factories import SessionFactory
from tests.test_api_fuzz import CHECKS, api_server  # noqa: F401 - a fixture

EXAMPLES = 50


@pytest.fixture
def api_schema(api_server, monkeypatch):  # noqa: F811 - the imported fixture
    # No sacct: what an `exited` report queues is tests/reports/test_api.py's business.
    monkeypatch.setattr("portal.reports.services.report_settle_dispatch", lambda **kwargs: None)
    schema = schemathesis.openapi.from_url(f"{api_server.url}/api/schema/")
    return schema.include(path_regex="^/api/v1/reports/")


@pytest.mark.parametrize("kind", ["job", "session"])
@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_reports_api(api_schema, api_server, mode, kind):  # noqa: F811
    target = JobFactory(state="PENDING") if kind == "job" else SessionFactory(job_id="5")
    headers = {"Authorization": f"Report {report_token(kind, target.pk)}"}
    statuses = []
    [operation] = [result.ok() for result in api_schema.get_all_operations()]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case: schemathesis.Case) -> None:
        statuses.append(case.call_and_validate(base_url=api_server.url, headers=headers,
                                               checks=CHECKS).status_code)

    run()
    assert statuses and max(statuses) < 500
    assert (202 in statuses) if mode == GenerationMode.POSITIVE else (400 in statuses)
    print(f"\nschemathesis {mode.value} {kind}: {len(statuses)} cases, statuses {sorted(set(statuses))}")
