"""GET /api/v1/environments/: what users may pick, and everything (with health) for admins."""

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.environments.models import Environment
from tests.environments.conftest import environment

pytestmark = pytest.mark.django_db
URL = "/api/v1/environments/"


@pytest.fixture
def registered(db):
    environment()
    environment(name="jax", title="JAX", path="/opt/gpuportal/envs/jax", kernel="jax",
                frameworks={"jax": "0.10.2"}, description="JAX + Flax")
    environment(name="broken", title="Broken", path="/opt/gpuportal/envs/broken", kernel="broken",
                healthy=False, health_message="exit status 1: No module named 'torch'")
    environment(name="off", title="Switched off", path="/opt/gpuportal/envs/off", kernel="off",
                enabled=False)
    environment(name="ngc", title="Container", kind=Environment.Kind.CONTAINER, path="", kernel="")


def _client(user):
    _, key = api_token_create(user=user, name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_users_see_only_usable_environments_with_their_versions(token_client, registered):
    response = token_client.get(URL)
    assert response.status_code == 200
    body = response.json()
    assert [e["name"] for e in body] == ["jax", "pytorch"]
    pytorch = body[1]
    assert pytorch == {
        "name": "pytorch", "title": "PyTorch", "kind": "python",
        "frameworks": {"torch": "2.14.1", "torchvision": "0.29.1"}, "description": "",
        "kernel": "pytorch", "healthy": True, "health_message": "", "enabled": True, "checked_at": None,
    }


def test_admins_see_every_environment_and_why_it_is_broken(admin, registered):
    body = {e["name"]: e for e in _client(admin).get(URL).json()}
    assert set(body) == {"broken", "jax", "ngc", "off", "pytorch"}
    assert body["broken"]["healthy"] is False
    assert "No module named 'torch'" in body["broken"]["health_message"]
    assert body["off"]["enabled"] is False


def test_anonymous_is_refused(api_client, registered):
    assert api_client.get(URL).status_code == 401


def test_new_job_page_lists_environments(client, user, registered):
    client.force_login(user)
    page = client.get("/jobs/new/").content.decode()
    assert 'data-environment="pytorch"' in page and "torch 2.14.1, torchvision 0.29.1" in page
    assert 'data-environment="broken"' not in page
    compose = client.get("/jobs/new/custom/").content.decode()
    assert '<option value="pytorch" >PyTorch — torch 2.14.1, torchvision 0.29.1</option>' in compose
    assert 'value="broken"' not in compose


def test_admins_see_broken_environments_on_the_new_job_page(client, admin, registered):
    client.force_login(admin)
    page = client.get("/jobs/new/").content.decode()
    assert 'data-environment="broken"' in page and "No module named" in page


def test_admin_page_shows_versions_read_only(client, admin, registered):
    client.force_login(admin)
    pk = Environment.objects.get(name="pytorch").pk
    page = client.get(f"/admin/environments/environment/{pk}/change/").content.decode()
    assert 'name="frameworks"' not in page and 'name="healthy"' not in page  # read-only
    assert 'name="enabled"' in page
    assert "torch 2.14.1" in client.get("/admin/environments/environment/").content.decode()
