"""The shared table (tests/policy/cases.py): the form, the REST API and the hub's spawner, reading the
policy file the portal published, refuse each case with the same field and message."""

import html

import pytest

from portal.sessions.hub import JupyterHub
from portal.sessions.models import Session
from spawners.options import OptionError
from tests.policy.cases import OVER_LIMITS
from tests.sessions.test_api import FakeHub
from tests.spawners.test_options import make_spawner

pytestmark = pytest.mark.django_db
IDS = [f"{field}:{options}" for options, field, _ in OVER_LIMITS]


@pytest.fixture
def hub(monkeypatch):
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


@pytest.mark.parametrize(("options", "field", "message"), OVER_LIMITS, ids=IDS)
def test_the_rest_api_refuses(cluster_policy, token_client, hub, options, field, message):
    response = token_client.post("/api/v1/sessions/", {"name": "over", **options}, format="json")
    assert response.status_code == 400
    assert response.json()["fields"] == {field: [message]}
    assert hub.started == [] and not Session.objects.exists()


@pytest.mark.parametrize(("options", "field", "message"), OVER_LIMITS, ids=IDS)
def test_the_form_refuses(cluster_policy, client, user, hub, options, field, message):
    client.force_login(user)
    response = client.post("/servers/", {"name": "over", **options})
    assert response.status_code == 400
    assert html.escape(message) in response.content.decode()
    assert hub.started == [] and not Session.objects.exists()


@pytest.mark.parametrize(("options", "field", "message"), OVER_LIMITS, ids=IDS)
def test_the_hubs_spawner_refuses(cluster_policy, options, field, message):
    spawner = make_spawner(policy_file=cluster_policy)
    with pytest.raises(OptionError) as refusal:
        spawner.apply_options(options)
    assert str(refusal.value) == message


def test_within_the_limits_all_three_agree_on_the_size(cluster_policy, token_client, hub):
    spawner = make_spawner(policy_file=cluster_policy)
    options = spawner.apply_options({"profile": "one-gpu", "hours": 2})
    response = token_client.post("/api/v1/sessions/", {"name": "ok", "profile": "one-gpu", "hours": 2},
                                 format="json")
    assert response.status_code == 202, response.json()
    [sent] = hub.started
    assert sent.pop("report_token")  # the session's own (tests/reports); the spawner keeps it apart
    assert sent.pop("tracking_token")  # and its MLflow token (portal.tracking), kept apart as well
    assert sent.pop("comment").startswith("gpuportal-session:")  # its key: its job's comment, apart too
    assert [sent] == [spawner.user_options] == [
        {"partition": "gpu", "gpus": 1, "hours": 2.0, "nodes": 1, "profile": "one-gpu"}]
    assert (options.cpus, options.mem_gb) == (8, 48)
