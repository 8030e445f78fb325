"""No secret or token shows in process argv, rendered scripts, logs or API responses: after a login,
a token, a job and a notebook server went through the real portal, hub and Slurm."""

import os
from pathlib import Path

import pytest
from django.test import Client
from rest_framework.test import APIClient

from portal.jobs.models import Job
from portal.sessions.services.start import server_start
from portal.sessions.services.stop import server_stop
from portal.tokens.report import report_token
from portal.tokens.tracking import tracking_token
from tests.conftest import DEMO_PASSWORDS
from tests.factories import UserFactory
from tests.hub import STATE_DIR
from tests.sessions.test_servers_real import ready_server

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]
STATE = Path(os.environ.get("GPUPORTAL_STATE", "/var/lib/gpuportal"))


def _argv_of_every_process() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            found.append(cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:  # gone meanwhile
            continue
    return found


def _logs() -> list[tuple[Path, str]]:
    roots = [STATE / "log", STATE_DIR, Path("/home/alice")]
    files = [path for root in roots if root.exists() for path in root.rglob("*")
             if path.is_file() and (path.suffix in (".log", ".out", ".err") or "jupyterhub" in path.name)]
    return [(path, path.read_text(errors="replace")) for path in files]


def test_secrets_appear_nowhere(portal_hub, live_server, settings):
    settings.PORTAL_URL_FOR_JOBS = live_server.url  # the job reports to this portal, with its token
    api = APIClient()
    response = api.post("/api/v1/tokens/", {"username": "alice", "password": DEMO_PASSWORDS["alice"]},
                        format="json")
    key = response.json()["token"]
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    job = api.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": "env | sort; echo done", "gpus": 0, "time_limit": 5}}, format="json").json()
    alice = UserFactory(username="alice")
    server = server_start(user=alice, name="secretless", gpus=0, hours=1)
    ready_server(portal_hub, "alice", "secretless")

    secrets = {
        "DJANGO_SECRET_KEY": settings.SECRET_KEY,
        "the user's API token": key,
        "alice's password": DEMO_PASSWORDS["alice"],
        # In sbatch's environment and the hub's options only (portal.reports).
        "the job's report token": report_token("job", job["id"]),
        "the session's report token": report_token("session", server.pk),
        # In the session's job environment (its kernels' MLflow client) and the hub's options only.
        "the session's tracking token": tracking_token("session", server.pk),
        **{name: value for name, value in portal_hub.env.items()
           if name.endswith(("_TOKEN", "_SECRET", "_KEY")) and len(value) >= 16},
    }
    responses = "\n".join(api.get(path).content.decode() for path in (
        "/api/v1/me/", "/api/v1/tokens/", "/api/v1/jobs/", f"/api/v1/jobs/{job['id']}/",
        f"/api/v1/jobs/{job['id']}/log/", "/api/v1/sessions/", "/api/v1/cluster/", "/api/v1/templates/"))
    browser = Client()
    browser.force_login(alice)
    pages = "\n".join(browser.get(path).content.decode() for path in (
        "/servers/", "/servers/cards/", "/jobs/", f"/jobs/{job['id']}/"))
    places = {
        "process argv": "\n".join(_argv_of_every_process()),
        "pages": pages,
        "rendered scripts": "\n".join(Job.objects.values_list("script", flat=True)),
        "API responses": responses,
        **{f"log {path}": text for path, text in _logs()},
    }
    leaks = [(secret, place) for secret, value in secrets.items() for place, text in places.items()
             if value and value in text]
    server_stop(server=alice.notebook_servers.get(name="secretless"))
    assert leaks == []
    assert len(places) > 3
