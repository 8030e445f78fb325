"""Personal API tokens: obtained with LDAP credentials (real slapd), used, listed, revoked."""

import pytest

from portal.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def _obtain(api_client, username, password, **extra):
    return api_client.post("/api/v1/tokens/", {"username": username, "password": password,
                                               **extra}, format="json")


def test_obtain_token_with_ldap_password_then_use_it(api_client):
    response = _obtain(api_client, "alice", "alice-pw", name="laptop")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["name"] == "laptop" and len(body["token"]) > 30
    assert not ApiToken.objects.filter(digest=body["token"]).exists()  # only a digest is stored
    api_client.credentials(HTTP_AUTHORIZATION=f"Token {body['token']}")
    me = api_client.get("/api/v1/me/").json()
    assert me["username"] == "alice" and me["uid_number"] == 10001 and me["is_admin"] is False


@pytest.mark.parametrize(("username", "password", "status", "code"), [
    ("alice", "wrong", 401, "invalid_credentials"),
    ("*", "x", 401, "invalid_credentials"),
    (")(uid=*", "x", 401, "invalid_credentials"),
    ("eve", "eve-pw", 403, "not_a_portal_user"),
])
def test_obtain_refused(api_client, username, password, status, code):
    response = _obtain(api_client, username, password)
    assert response.status_code == status
    assert response.json()["code"] == code and response.json()["detail"]


def test_obtain_with_empty_password_is_a_field_error(api_client):
    response = _obtain(api_client, "alice", "")
    assert response.status_code == 400
    assert response.json()["fields"]["password"]


def test_obtain_with_directory_down_is_503(api_client, settings):
    settings.LDAP_URI = "ldap://127.0.0.1:1"
    settings.LDAP_TIMEOUT_SECONDS = 1
    response = _obtain(api_client, "alice", "alice-pw")
    assert response.status_code == 503 and response.json()["code"] == "directory_unavailable"


def test_lockout_is_429(api_client, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _obtain(api_client, "bob", "wrong")
    assert _obtain(api_client, "bob", "bob-pw").status_code == 429


def test_list_and_revoke(token_client, user):
    tokens = token_client.get("/api/v1/tokens/").json()
    assert [token["name"] for token in tokens] == ["test"]
    assert "token" not in tokens[0]
    assert token_client.delete(f"/api/v1/tokens/{tokens[0]['id']}/").status_code == 204
    assert token_client.get("/api/v1/me/").status_code == 401


def test_cannot_revoke_someone_elses_token(token_client):
    from portal.accounts.services import api_token_create
    from tests.factories import UserFactory

    other, _ = api_token_create(user=UserFactory(username="bob"), name="bob's")
    assert token_client.delete(f"/api/v1/tokens/{other.id}/").status_code == 404
    assert ApiToken.objects.filter(pk=other.pk).exists()


@pytest.mark.parametrize("header", [None, "Token nope", "Token", "Bearer a b"])
def test_me_without_a_valid_token_is_401(api_client, header):
    if header:
        api_client.credentials(HTTP_AUTHORIZATION=header)
    response = api_client.get("/api/v1/me/")
    assert response.status_code == 401 and "detail" in response.json()


def test_profile_page_creates_and_revokes_tokens(client, user):
    client.force_login(user)
    page = client.post("/accounts/profile/", {"name": "notebook"})
    assert b'id="new-token"' in page.content
    token = ApiToken.objects.get(user=user, name="notebook")
    client.post(f"/accounts/profile/tokens/{token.id}/revoke/")
    assert not ApiToken.objects.filter(pk=token.pk).exists()


def test_schema_and_docs(client, user):
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/v1/cluster/" in schema.content
    client.force_login(user)
    assert client.get("/api/docs/").status_code == 200
