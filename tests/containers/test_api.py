"""Catalog, registry keys and pulls through the API, without Slurm: keys encrypted at rest and
never shown back, hostile input a 400 naming the field, images offered as environments to their
owner only, a job template's preview showing the exact container command."""

import json
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from portal.accounts.services import api_token_create
from portal.containers.models import Image, Pull, RegistryCredential
from portal.containers.secrets import scrub, secret_decrypt
from portal.containers.services import image_create, image_environment_sync
from portal.core.errors import InvalidInput
from portal.environments.models import Environment
from portal.jobs.services.prepare import job_prepare
from tests.factories import UserFactory
from tests.hostile_corpus import CORPUS

pytestmark = pytest.mark.django_db
KEY = "nvapi-" + "k" * 40


@pytest.fixture(autouse=True)
def key_file(tmp_path: Path, settings):
    path = tmp_path / "containers.key"
    path.write_bytes(Fernet.generate_key())
    path.chmod(0o600)
    settings.CONTAINERS_KEY_FILE = str(path)
    return path


def _post(client, path: str, body: object):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_a_key_is_stored_encrypted_and_never_shown_back(token_client, user):
    response = _post(
        token_client,
        "/api/v1/registry-keys/",
        {"registry": "127.0.0.1:5000", "username": "$oauthtoken", "key": KEY},
    )
    assert response.status_code == 201
    assert KEY not in response.content.decode() and "key" not in response.json()
    stored = RegistryCredential.objects.get(user=user)
    assert KEY.encode() not in bytes(stored.secret) and secret_decrypt(stored.secret) == KEY
    listed = token_client.get("/api/v1/registry-keys/")
    assert listed.json() == [
        {
            "id": stored.pk,
            "registry": "127.0.0.1:5000",
            "username": "$oauthtoken",
            "updated": listed.json()[0]["updated"],
        }
    ]
    # Replacing keeps one row; deleting it is the owner's alone.
    _post(
        token_client, "/api/v1/registry-keys/", {"registry": "127.0.0.1:5000", "username": "u", "key": "k2"}
    )
    assert RegistryCredential.objects.filter(user=user).count() == 1
    assert token_client.delete(f"/api/v1/registry-keys/{stored.pk}/").status_code == 204
    assert token_client.delete(f"/api/v1/registry-keys/{stored.pk}/").status_code == 404


def test_without_the_key_file_keys_are_refused_clearly(token_client, settings, tmp_path):
    settings.CONTAINERS_KEY_FILE = str(tmp_path / "missing.key")
    response = _post(
        token_client, "/api/v1/registry-keys/", {"registry": "nvcr.io", "username": "u", "key": KEY}
    )
    assert response.status_code == 503 and response.json()["code"] == "key_file_unavailable"


@pytest.mark.parametrize("field", ["registry", "username", "key"])
@pytest.mark.parametrize("value", CORPUS, ids=repr)
def test_hostile_key_fields_are_a_400_naming_the_field(token_client, field, value):
    body = {"registry": "nvcr.io", "username": "$oauthtoken", "key": KEY, field: value}
    response = _post(token_client, "/api/v1/registry-keys/", body)
    if response.status_code == 201:  # a fine value (a plain word, or a number taken as its text)
        assert isinstance(value, str | int | float) and not isinstance(value, bool)
        return
    assert response.status_code == 400, (value, response.content[:200])
    assert field in response.json()["fields"]
    assert KEY not in response.content.decode()


def test_images_list_and_pull_refusals(token_client, user, settings):
    local = image_create(name="local", runtime="charliecloud", reference="/opt/gpuportal/images/local")
    remote = image_create(
        name="remote", runtime="podman", reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm"
    )
    names = [i["name"] for i in token_client.get("/api/v1/images/").json()]
    assert names == ["local", "remote"]
    response = token_client.post(f"/api/v1/images/{local.pk}/pull/")
    assert response.status_code == 400 and "image" in response.json()["fields"]
    assert token_client.post("/api/v1/images/999999/pull/").status_code == 404
    settings.CONTAINERS_RUNTIMES = {
        **settings.CONTAINERS_RUNTIMES,
        "podman": {**settings.CONTAINERS_RUNTIMES["podman"], "enabled": False},
    }
    response = token_client.post(f"/api/v1/images/{remote.pk}/pull/")
    assert response.status_code == 400 and "not enabled" in response.json()["fields"]["image"][0]
    assert not Pull.objects.exists()


@pytest.mark.parametrize(
    "reference,runtime,field",
    [
        ("/etc/passwd", "charliecloud", "reference"),
        ("/opt/gpuportal/images/../x", "charliecloud", "reference"),
        ("nvcr.io/nvidia/pytorch", "podman", "reference"),
        ("a:1;id", "podman", "reference"),
        ("/opt/gpuportal/images/x.sif", "podman", "reference"),
        ("nvcr.io/a:1", "docker", "runtime"),
        ("nvcr.io/a:1", "apptainer", "runtime"),  # not enabled on this bed
    ],
)
def test_bad_catalog_entries_are_refused_naming_the_field(reference, runtime, field):
    with pytest.raises(InvalidInput) as error:
        image_create(name="x", runtime=runtime, reference=reference)
    assert field in error.value.fields


def _pulled_copy(owner) -> Image:
    source = image_create(
        name="py", runtime="charliecloud", reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm"
    )
    copy = Image.objects.create(
        owner=owner,
        source=source,
        name="py",
        runtime="charliecloud",
        reference=source.reference,
        local="/home/alice/gpuportal/images/py",
    )
    image_environment_sync(image=copy)
    return copy


def test_a_pulled_image_is_an_environment_of_its_owner_only(token_client, user):
    copy = _pulled_copy(user)
    assert copy.environment.name == "py-alice" and copy.environment.healthy
    assert "py-alice" in [e["name"] for e in token_client.get("/api/v1/environments/").json()]
    bob = UserFactory(username="bob")
    _, key = api_token_create(user=bob, name="t")
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert "py-alice" not in [e["name"] for e in token_client.get("/api/v1/environments/").json()]
    assert copy.pk not in [i["id"] for i in token_client.get("/api/v1/images/").json()]
    with pytest.raises(InvalidInput) as error:
        job_prepare(
            user=bob, template="custom", parameters={"commands": "id", "gpus": 0, "environment": "py-alice"}
        )
    assert "environment" in error.value.fields["parameters"]


def test_a_job_in_a_container_shows_the_exact_command_in_its_script(user, partitions):
    _pulled_copy(user)
    draft = job_prepare(
        user=user,
        template="custom",
        parameters={"commands": "python3 -V", "gpus": 1, "environment": "py-alice"},
    )
    run = (
        "RUN=(/usr/bin/ch-run --bind=/home/alice:/home/alice --bind=/data:/data "
        f"--cd={draft.output_dir}/job-{draft.uuid} /home/alice/gpuportal/images/py --)"
    )
    assert run in draft.script
    assert "\"${RUN[@]}\" bash -euo pipefail -c 'python3 -V'" in draft.script


def test_the_profile_page_has_the_key_form_and_the_catalog_page_lists_images(client, user):
    image_create(name="remote", runtime="podman", reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm")
    client.force_login(user)
    page = client.get("/accounts/profile/").content.decode()
    assert 'action="/containers/keys/"' in page and 'type="password"' in page
    client.post("/containers/keys/", {"registry": "127.0.0.1:5000", "username": "$oauthtoken", "key": KEY})
    page = client.get("/accounts/profile/").content.decode()
    assert "127.0.0.1:5000" in page and KEY not in page
    catalog = client.get("/containers/").content.decode()
    assert "gpuportal/python:3.11-bookworm" in catalog and "Pull" in catalog


def test_scrub_hides_keys_and_their_base64():
    assert (
        scrub("key nvapi-x, auth JG9hdXRodG9rZW46bnZhcGkteA==", ["nvapi-x", "$oauthtoken:nvapi-x"])
        == "key ****, auth ****"
    )


def test_a_pull_uses_only_the_pulling_users_own_key(token_client, user, monkeypatch,
                                                   django_capture_on_commit_callbacks):
    """alice's key goes into her pull job's environment only; bob's pull of the same image gets none.
    The worker the request hands the pull to submits it (after the request's commit)."""
    submitted = []

    def submit(self, *, script, user, comment, secrets=None):
        submitted.append((user, dict(secrets or {}), script))
        return str(100 + len(submitted))

    monkeypatch.setattr("slurm.adapter.Slurm.submit", submit)
    monkeypatch.setattr("portal.containers.pulls.job_output_dir_ensure", lambda **kw: None)
    image = image_create(
        name="remote", runtime="podman", reference="127.0.0.1:5000/gpuportal/python:3.11-bookworm"
    )
    _post(
        token_client,
        "/api/v1/registry-keys/",
        {"registry": "127.0.0.1:5000", "username": "$oauthtoken", "key": KEY},
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = token_client.post(f"/api/v1/images/{image.pk}/pull/")
    assert response.status_code == 202 and response.json()["slurm_job_id"] == ""  # saved, not yet sent
    assert Pull.objects.get(pk=response.json()["id"]).slurm_job_id == "101"
    bob = UserFactory(username="bob")
    _, key = api_token_create(user=bob, name="t")
    token_client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    with django_capture_on_commit_callbacks(execute=True):
        assert token_client.post(f"/api/v1/images/{image.pk}/pull/").status_code == 202
    (alice_user, alice_secrets, alice_script), (bob_user, bob_secrets, bob_script) = submitted
    assert alice_user == "alice" and alice_secrets["GPUPORTAL_REGISTRY_PASSWORD"] == KEY
    assert bob_user == "bob" and bob_secrets == {}
    assert KEY not in alice_script and KEY not in bob_script
    assert "#SBATCH --output=/home/alice/gpuportal/jobs/job-" in alice_script


def test_an_image_named_like_an_existing_environment_gets_a_name_of_its_own():
    Environment.objects.create(name="local", title="A Python environment", kind="python", healthy=True)
    image = image_create(name="local", runtime="charliecloud", reference="/opt/gpuportal/images/local")
    assert image.environment.name == f"local-image{image.pk}"
    image_environment_sync(image=image)  # again: keeps its name
    image.refresh_from_db()
    assert image.environment.name == f"local-image{image.pk}"
