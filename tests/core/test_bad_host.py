"""A request Django refuses before any view (handler400): a Host header it does not serve, an empty
one included. The API answers in its own JSON error format, as everywhere under /api/ (the API fuzz
sends such a request); a page keeps Django's own answer."""

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("host", ["", "evil.example"])
def test_a_host_the_portal_does_not_serve_is_a_json_400_under_api(host):
    response = Client().post("/api/v1/reports/", {"event": "queued"}, content_type="application/json",
                             HTTP_HOST=host)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Bad request.", "code": "bad_request", "fields": {}}
    page = Client().get("/jobs/", HTTP_HOST=host)
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
