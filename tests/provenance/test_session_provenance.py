"""A session's provenance (issue 36): written when it is stored (its environment and the lock's hash,
the image's digest, the resources), shown on its card and read at GET /api/v1/sessions/{name}/provenance/,
its owner only."""

import hashlib

import pytest

from portal.environments.models import Environment
from portal.provenance.models import Provenance, SessionProvenance
from portal.sessions.services import start
from tests.factories import UserFactory
from tests.sessions.factories import SessionFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def environment(tmp_path, settings):
    settings.ENVIRONMENTS_DIR = str(tmp_path)
    prefix = tmp_path / "py"
    prefix.mkdir()
    (prefix / "gpuportal-env.lock").write_text("torch==2.14.1\nnumpy==2.1.0\n")
    return Environment.objects.create(name="py", title="Py", kind="python", path=str(prefix), kernel="py",
                                      healthy=True)


def test_a_session_started_gets_its_record(user, partitions, environment, monkeypatch):
    monkeypatch.setattr(start, "server_spawn_dispatch", lambda **kwargs: None)  # no hub here
    session = start.server_start(user=user, name="lab", gpus=1, hours=2, environment="py")
    record = SessionProvenance.objects.get(session=session)
    assert (record.environment, record.environment_lock) == ("py", "numpy==2.1.0\ntorch==2.14.1")
    assert record.environment_hash == hashlib.sha256(b"numpy==2.1.0\ntorch==2.14.1").hexdigest()
    assert record.environment_lock_source == "pip freeze"
    assert record.resources == {"partition": "gpu", "nodes": 1, "gpus_per_node": 1, "hours": 2.0,
                                "profile": session.profile, "account": ""}
    assert record.image_status == Provenance.Image.NONE and not record.image_digest


def test_a_session_in_a_container_records_its_image(user):
    from portal.containers.models import Image

    environment = Environment.objects.create(name="ctr", title="C", kind="container", healthy=True)
    Image.objects.create(name="img", runtime="charliecloud", reference="/srv/images/python",
                         environment=environment)
    record = SessionFactory(user=user, environment="ctr").provenance
    assert (record.image_reference, record.image_status) == ("/srv/images/python", Provenance.Image.LOCAL)


def test_the_record_is_its_owners_only(token_client, client, user):
    SessionFactory(user=user, name="lab", environment="gone")
    body = token_client.get("/api/v1/sessions/lab/provenance/").json()
    assert body["session"] == "lab" and body["environment"] == "gone" and body["resources"]["hours"] == 8.0
    bob = UserFactory(username="bob")
    SessionFactory(user=bob, name="bobs")
    assert token_client.get("/api/v1/sessions/bobs/provenance/").status_code == 404
    assert token_client.get("/api/v1/sessions/nope/provenance/").status_code == 404
    client.force_login(user)
    cards = client.get("/servers/cards/").content.decode()
    assert "data-provenance" in cards and "/api/v1/sessions/lab/provenance/" in cards
    client.force_login(UserFactory(username="ada", is_staff=True, is_superuser=True))
    assert "/api/v1/sessions/lab/provenance/" not in client.get("/servers/cards/").content.decode()
