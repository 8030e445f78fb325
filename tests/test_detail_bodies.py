"""Another user's object is a 404 whatever the request carries: every API route with a path parameter
finds its object before it reads the body or the query, so bob learns nothing about alice's job,
session, pull, key, preset, app or token from a 400. A route added with a path parameter
nobody here knows fails `test_every_object_route_is_covered`."""

import json
from collections.abc import Callable

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from portal.accounts.models import User
from portal.accounts.services import api_token_create
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import PartitionFactory, SessionFactory, SlurmJobFactory

pytestmark = pytest.mark.django_db

# Results are the site's, visible to every portal user (tests/test_authz.py): not anybody's own; so
# are job templates and session profiles (a suggestion reads the asker's own runs only).
SHARED = {"result_id", "template", "profile"}

BAD_BODIES = [
    b"{", b"[]", b'"text"', b"null", b'{"minutes": "ten", "hours": true, "x": [1]}',
    b'{"minutes": 0}', b'{"hours": 1e999}', b"[" * 40 + b"]" * 40, b'{"minutes": 5' + b" " * (2 << 20) + b"}",
    b"\xff\xfe{}",
]
BAD_QUERY = "?stream=nope&offset=-1&minutes=x"


def _alices(alice: User) -> dict[str, Callable[[], object]]:
    """alice's object for each path parameter, made when first asked for."""
    from portal.containers.models import Image, Pull, RegistryCredential
    from portal.files.models import Upload
    from portal.launches.models import Preset
    from portal.webapps.shells import shell_type

    def image() -> int:
        catalog = Image.objects.create(name="cat", runtime="charliecloud", reference="nvcr.io/x/y:1")
        return Image.objects.create(name="cat", runtime="charliecloud", reference="nvcr.io/x/y:1",
                                    owner=alice, source=catalog, local="/home/alice/img").pk

    def sweep() -> int:
        from portal.sweeps.models import Sweep

        return Sweep.objects.create(
            user=alice, job=JobFactory(user=alice, state="RUNNING", slurm_job_id="7272"), name="s",
            template="pytorch-train", method="list", space=[{"lr": 0.1}], tasks=[{"lr": 0.1}], concurrency=1,
            objective="loss", direction="min").pk

    def run() -> str:
        from portal.tracking.models import Experiment, Run

        experiment = Experiment.objects.create(owner=alice, name="e", artifact_location="file:///home/alice/e",
                                               creation_time=1, last_update_time=1)
        return Run.objects.create(run_id="a" * 32, experiment=experiment, owner=alice, run_name="r",
                                  start_time=1, artifact_uri="file:///home/alice/e/r").run_id

    def session() -> str:
        SlurmJobFactory(job_id="7777", state="RUNNING")
        return SessionFactory(user=alice, name="nb", job_id="7777").name

    return {
        "job_id": lambda: JobFactory(user=alice, state="RUNNING", slurm_job_id="7070").pk,
        "name": session,
        "image_id": image,
        "pull_id": lambda: Pull.objects.create(user=alice, image=Image.objects.get(pk=image()),
                                               state="running", slurm_job_id="7171").pk,
        "credential_id": lambda: RegistryCredential.objects.create(
            user=alice, registry="nvcr.io", username="$oauthtoken", secret=b"x").pk,
        "preset_id": lambda: Preset.objects.create(user=alice, kind="session", name="p", values={}).pk,
        "board_id": lambda: AppFactory(user=alice, state="ready").pk,
        "app_id": lambda: AppFactory(user=alice, state="ready").pk,
        "shell_id": lambda: AppFactory(user=alice, type=shell_type(), parameters={}, state="ended").pk,
        "token_id": lambda: api_token_create(user=alice, name="hers")[0].pk,
        "sweep_id": sweep,
        "run_id": run,
        "upload_id": lambda: Upload.objects.create(user=alice, root="home", path="x.bin", length=1).pk,
    }


def _object_routes(patterns: list, prefix: str = "") -> list[tuple[str, URLPattern]]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _object_routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif (prefix + str(pattern.pattern)).startswith("api/v1/") and pattern.pattern.converters:
            found.append((prefix + str(pattern.pattern), pattern))
    return found


ROUTES = _object_routes(get_resolver().url_patterns)


def _methods(pattern: URLPattern) -> list[str]:
    view = pattern.callback.cls
    return [method for method in ("get", "post", "put", "patch", "delete") if hasattr(view, method)]


def test_every_object_route_is_covered():
    names = {name for _, pattern in ROUTES for name in pattern.pattern.converters}
    assert names - SHARED <= set(_alices(User())), "add alice's object for the new path parameter"
    assert len(ROUTES) >= 10


@pytest.mark.parametrize(("route", "pattern"), ROUTES, ids=[route for route, _ in ROUTES])
def test_another_users_object_is_a_404_whatever_the_body(route, pattern, settings, monkeypatch):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # nothing reaches a hub, Slurm or sudo
    monkeypatch.setattr("slurm.adapter.Slurm.from_settings", lambda: pytest.fail("Slurm was asked"))
    PartitionFactory()
    alice, bob = UserFactory(username="alice"), UserFactory(username="bob")
    if set(pattern.pattern.converters) & SHARED:
        pytest.skip("the site's results are everybody's")
    makers = _alices(alice)
    path = "/" + route
    for name in pattern.pattern.converters:
        path = _fill(path, name, makers[name]())
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=bob, name='t')[1]}")
    for method in _methods(pattern):
        for body in BAD_BODIES:
            response = client.generic(method.upper(), path + BAD_QUERY, data=body,
                                      content_type="application/json")
            assert response.status_code == 404, (method, path, body[:40], response.content[:200])
            assert response.json()["code"] == "not_found"


def _fill(route: str, name: str, value: object) -> str:
    """The route with <converter:name> replaced by the value."""
    start = route.index(f":{name}>")
    return route[:route.rindex("<", 0, start)] + str(value) + route[start + len(name) + 2:]


def test_the_owner_gets_past_the_lookup_to_the_body():
    """The same bad body from alice is judged as a body: the 404 above is about the object."""
    alice = UserFactory(username="alice")
    job = JobFactory(user=alice, state="RUNNING", slurm_job_id="7070")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user=alice, name='t')[1]}")
    response = client.post(f"/api/v1/jobs/{job.pk}/extend/", json.dumps({"hours": True}),
                           content_type="application/json")
    assert response.status_code == 400 and "hours" in response.json()["fields"]
