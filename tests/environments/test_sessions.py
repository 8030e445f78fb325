"""The `environment` option of notebook servers, against the fake hub: validated, stored, and
handed to the hub with its kernel and prefix."""

import pytest

from portal.environments.models import Environment
from portal.sessions.hub import HubServer, JupyterHub
from portal.sessions.models import Session
from portal.sessions.services.hub_sync import servers_sync
from tests.environments.conftest import environment
from tests.sessions.test_api import FakeHub

pytestmark = pytest.mark.django_db
URL = "/api/v1/sessions/"


@pytest.fixture
def hub(monkeypatch, partitions):
    fake = FakeHub()
    monkeypatch.setattr(JupyterHub, "from_settings", classmethod(lambda cls, **_: fake))
    return fake


def test_the_environment_reaches_the_hub_and_the_record(token_client, hub):
    environment()
    response = token_client.post(URL, {"name": "work", "gpus": 1, "environment": "pytorch"}, format="json")
    assert response.status_code == 202, response.json()
    assert response.json()["environment"] == "pytorch"
    [options] = hub.started
    assert options.pop("report_token")  # the session's own (tests/reports)
    assert options.pop("tracking_token")  # its MLflow token (portal.tracking)
    assert options.pop("comment").startswith("gpuportal-session:")  # its key in Slurm (#32)
    assert options == {"partition": "gpu", "gpus": 1, "hours": 8.0, "nodes": 1,
                       "environment": "pytorch", "environment_kernel": "pytorch",
                       "environment_path": "/opt/gpuportal/envs/pytorch"}
    assert Session.objects.get(name="work").environment == "pytorch"


def test_no_environment_sends_none(token_client, hub):
    assert token_client.post(URL, {"name": "work", "environment": ""}, format="json").status_code == 202
    assert "environment" not in hub.started[0]
    assert token_client.get(f"{URL}work/").json()["environment"] == ""


@pytest.mark.parametrize("name", ["nope", "broken", "off", "cuda", "ngc", "PyTorch", "x" * 65])
def test_unknown_hidden_or_kernelless_environments_are_a_400(token_client, hub, name):
    environment()
    environment(name="broken", healthy=False, health_message="exit status 1")
    environment(name="off", enabled=False)
    environment(name="cuda", kind=Environment.Kind.MODULES, path="", kernel="", modules=["cuda/12.4"])
    environment(name="ngc", kind=Environment.Kind.CONTAINER, path="", kernel="")
    response = token_client.post(URL, {"name": "work", "environment": name}, format="json")
    assert response.status_code == 400
    assert "environment" in response.json()["fields"]
    assert hub.started == [] and not Session.objects.exists()


def test_the_start_form_offers_kernel_environments_with_versions(client, user, hub):
    environment()
    environment(name="cuda", title="CUDA modules", kind=Environment.Kind.MODULES, path="", kernel="",
                modules=["cuda/12.4"])
    environment(name="broken", title="Broken one", healthy=False)
    client.force_login(user)
    page = client.get("/servers/").content.decode()
    assert '<option value="pytorch">PyTorch — torch 2.14.1, torchvision 0.29.1</option>' in page
    assert "CUDA modules" not in page and "Broken one" not in page
    response = client.post("/servers/", {"name": "s1", "partition": "gpu", "gpus": "1", "hours": "1",
                                         "nodes": "1", "environment": "pytorch"})
    assert response.status_code == 302
    assert hub.started[0]["environment_kernel"] == "pytorch"
    page = client.get("/servers/").content.decode()
    assert '<span data-environment>pytorch</span>' in page


def test_a_server_started_at_the_hub_keeps_its_environment(user):
    options = {"partition": "gpu", "gpus": 1, "hours": 1, "nodes": 1, "environment": "jax",
               "environment_kernel": "jax", "environment_path": "/opt/gpuportal/envs/jax"}
    odd = {**options, "environment": "Not a name"}
    servers_sync(user=user, hub_servers={
        "direct": HubServer(name="direct", ready=True, pending=None, url="/u/", last_activity=None,
                            user_options=options),
        "odd": HubServer(name="odd", ready=True, pending=None, url="/u/", last_activity=None,
                         user_options=odd)})
    assert Session.objects.get(name="direct").environment == "jax"
    assert Session.objects.get(name="odd").environment == ""
