"""Who may reach what: every URL pattern of the portal and its API has a row here, tried as the
owner, another user, an admin, anonymous, with a revoked token, and as a deprovisioned user.

A route added without a row fails `test_every_route_has_a_row`. The hub's proxy paths (a server's
/user/<name>/...) have their table against the real hub in tests/sessions/test_hub_authz_real.py."""

import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from portal.accounts.models import ApiToken, User
from portal.accounts.services import api_token_create, api_token_revoke
from portal.benchmarks.models import BenchmarkResult
from portal.webapps.selectors import SHELL_TYPE
from tests.benchmarks.factories import ResultFactory
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import PartitionFactory, SessionFactory

pytestmark = pytest.mark.django_db

PRINCIPALS = ("other", "admin", "anonymous", "revoked", "deprovisioned", "owner")  # the owner last
A = "api"  # authenticate with a token
P = "page"  # authenticate with a browser session

# Expected status per principal, for the usual kinds of route.
API_MINE = {"owner": 200, "other": 404, "admin": 200, "anonymous": 401, "revoked": 401, "deprovisioned": 401}
API_ANY = {"owner": 200, "other": 200, "admin": 200, "anonymous": 401, "revoked": 401, "deprovisioned": 401}
PAGE_ANY = {"owner": 200, "other": 200, "admin": 200, "anonymous": 302, "revoked": 302, "deprovisioned": 302}
PAGE_MINE = {**PAGE_ANY, "other": 404}
PUBLIC = dict.fromkeys(PRINCIPALS, 200)
ADMIN_ONLY = {**dict.fromkeys(PRINCIPALS, 302), "admin": 200}


@dataclass
class World:
    job: object
    server: object
    token_to_delete: object


@dataclass(frozen=True)
class Row:
    method: str
    path: Callable[[World], str]
    via: str
    expect: dict
    body: dict | Callable[[World], dict] | None = None


def _fixed(path: str) -> Callable[[World], str]:
    return lambda world: path


def _result(world: World) -> str:
    """A benchmark result of the owner's job: the site's results are visible to every portal user."""
    found = BenchmarkResult.objects.filter(job=world.job).first()
    return str((found or ResultFactory(user=world.job.user, job=world.job)).pk)


def _image(world: World) -> int:
    """A catalog image that is a local path: a pull of it is refused as invalid (400) past authz,
    so nothing reaches Slurm."""
    from portal.containers.models import Image

    found = Image.objects.filter(name="local").first()
    return (found or Image.objects.create(name="local", runtime="charliecloud",
                                          reference="/opt/gpuportal/images/local")).pk


def _pull(world: World) -> int:
    """A finished pull of the owner's: reading it asks nothing of Slurm."""
    from portal.containers.models import Image, Pull

    found = Pull.objects.filter(user=world.job.user).first()
    return (found or Pull.objects.create(user=world.job.user, image=Image.objects.get(pk=_image(world)),
                                         state="failed", error="test")).pk


def _key(world: World) -> int:
    from portal.containers.models import RegistryCredential

    found = RegistryCredential.objects.filter(user=world.job.user).first()
    return (found or RegistryCredential.objects.create(user=world.job.user, registry="nvcr.io",
                                                       username="$oauthtoken", secret=b"x")).pk


def _provenance(world: World) -> int:
    """The owner's job's provenance record (owner only: an admin gets 404 too, it holds their code)."""
    from portal.provenance.models import Provenance

    Provenance.objects.get_or_create(job=world.job, defaults={"template": "custom", "script": "true"})
    return world.job.pk


def _board(world: World) -> int:
    """An ended TensorBoard app of the owner's: opening it leads back to its page, nothing runs."""
    from portal.webapps.models import App

    found = App.objects.filter(user=world.job.user).exclude(type__slug=SHELL_TYPE).first()
    return (found or AppFactory(user=world.job.user, state="ended", reason="Stopped by you.")).pk


def _shell(world: World) -> int:
    """An ended shell of the owner's (#37): opening it leads back to the list, stopping it runs nothing."""
    from portal.webapps.models import App
    from portal.webapps.shells import shell_type

    found = App.objects.filter(user=world.job.user, type__slug=SHELL_TYPE).first()
    return (found or AppFactory(user=world.job.user, type=shell_type(), parameters={}, state="ended",
                                reason="Ended by you.")).pk


def _preset(world: World) -> int:
    from portal.launches.models import Preset

    found = Preset.objects.filter(user=world.job.user).first()
    return (found or Preset.objects.create(user=world.job.user, kind="session", name="mine",
                                           values={"gpus": 1})).pk


def _sweep(world: World) -> int:
    """A sweep of the owner's whose array job ended: cancelling it is refused (409), nothing runs."""
    from portal.sweeps.models import Sweep

    found = Sweep.objects.filter(user=world.job.user).first()
    return (found or Sweep.objects.create(
        user=world.job.user, job=JobFactory(user=world.job.user, state="COMPLETED"), name="s",
        template="pytorch-train", method="list", space=[{"lr": 0.1}], tasks=[{"lr": 0.1}], concurrency=1,
        objective="loss", direction="min")).pk


def _elsewhere(world: World) -> str:
    """The owner's run (`_tracked`), its artifacts in a folder outside their home."""
    from portal.tracking.models import Run

    run_id = _tracked(world)["run_id"]
    Run.objects.filter(run_id=run_id).update(artifact_uri="file:///srv/elsewhere/artifacts")
    return run_id


def _efficiency(world: World, session: bool = False) -> object:
    """The efficiency record of the owner's job, or of their session once it ended."""
    from portal.efficiency.models import Efficiency
    from tests.efficiency.records import efficiency_record

    if session:
        type(world.server).objects.filter(pk=world.server.pk).update(ended_at=world.server.created_at)
        found = Efficiency.objects.filter(session=world.server).first()
        return found or efficiency_record(session=world.server)
    return Efficiency.objects.filter(job=world.job).first() or efficiency_record(job=world.job)


def _tracked(world: World) -> dict:
    """The owner's experiment and run (MLflow's tracking API, portal.tracking), with a metric and a
    tag: {"experiment_id", "run_id"}."""
    from portal.tracking.models import Run
    from portal.tracking.services import experiment_create, log_batch, run_create

    owner = world.job.user
    run = Run.objects.filter(owner=owner).first()
    if run is None:
        experiment = experiment_create(user=owner, name="authz")
        run = run_create(user=owner, experiment_id=experiment.pk, start_time=1, run_name="r",
                         tags=[{"key": "t", "value": "v"}])
        log_batch(user=owner, run_id=run.run_id, metrics=[{"key": "m", "value": 1, "timestamp": 1}],
                  params=[], tags=[])
    return {"experiment_id": str(run.experiment_id), "run_id": run.run_id, "experiment_name": "authz"}


def _mlflow_rows() -> dict[str, list[Row]]:
    """MLflow's REST API: the owner's experiments and runs; anybody else's do not exist (404), an
    admin reads them but writes only their own; searches answer everybody (with their own)."""
    api_write = {**API_MINE, "admin": 404}
    # Names are per user: an admin's get-by-name finds only their own.
    reads = {"experiments/get": (lambda w: f"experiment_id={_tracked(w)['experiment_id']}", API_MINE),
             "experiments/get-by-name": (lambda w: f"experiment_name={_tracked(w)['experiment_name']}",
                                         api_write),
             "runs/get": (lambda w: f"run_id={_tracked(w)['run_id']}", API_MINE),
             "metrics/get-history": (lambda w: f"run_id={_tracked(w)['run_id']}&metric_key=m", API_MINE)}
    writes = {"experiments/update": {"new_name": "renamed"}, "experiments/delete": {},
              "runs/create": {}, "runs/update": {"status": "FINISHED"}, "runs/delete": {},
              "runs/log-batch": {"metrics": []}, "runs/set-tag": {"key": "u", "value": "1"},
              "runs/log-metric": {"key": "m", "value": 2, "timestamp": 2},
              "runs/log-parameter": {"key": "p", "value": "1"}, "runs/delete-tag": {"key": "t"},
              "runs/log-inputs": {"datasets": []}}
    rows = {f"api/2.0/mlflow/{name}": [Row("GET", lambda w, q=query, n=name: f"/api/2.0/mlflow/{n}?{q(w)}",
                                           A, expect)]
            for name, (query, expect) in reads.items()}
    for name, extra in writes.items():
        field = "experiment_id" if name.startswith("experiments/") or name == "runs/create" else "run_id"
        rows[f"api/2.0/mlflow/{name}"] = [Row(
            "POST", _fixed(f"/api/2.0/mlflow/{name}"), A, api_write,
            body=lambda w, f=field, e=extra: {f: _tracked(w)[f], **e})]
    for name, body in (("experiments/create", {"name": "new"}), ("experiments/search", {}),
                       ("runs/search", {"experiment_ids": ["0"]}), ("logged-models/search", {})):
        rows[f"api/2.0/mlflow/{name}"] = [Row("POST", _fixed(f"/api/2.0/mlflow/{name}"), A, API_ANY,
                                              body=body)]
    # The rest of MLflow's API: not implemented, for anybody signed in.
    not_implemented = {**API_ANY, "owner": 501, "other": 501, "admin": 501}
    rows[r"^api/[23]\.0/mlflow(?:-artifacts)?/"] = [Row("GET", _fixed("/api/2.0/mlflow/traces"), A,
                                                        not_implemented)]
    return rows


PAGE_ADMIN = {**PAGE_ANY, "owner": 403, "other": 403}
API_ADMIN = {**API_ANY, "owner": 403, "other": 403, "admin": 400}  # admin: past authz, refused as invalid


def _upload(world: World) -> str:
    from portal.files.models import Upload

    found = Upload.objects.filter(user=world.job.user).first()
    return str((found or Upload.objects.create(user=world.job.user, root="home", path="a.bin", length=1)).pk)


def _signed_in(status: int) -> dict:
    """Any signed-in user past authz, answered `status` (their own files: each has a home)."""
    return {**API_ANY, "owner": status, "other": status, "admin": status}


def _files(route: str, method: str, query: str, expect: dict,
           body: dict | None = None) -> tuple[str, list[Row]]:
    url = f"/api/v1/files/{route}{query}"
    return f"api/v1/files/{route}", [Row(method, _fixed(url), A, expect, body=body)]


ROWS: dict[str, list[Row]] = {
    # Files (#37): every user's own roots, as that user; the real helper through sudo
    # (tests/security/test_files_api.py tries bob against alice's files).
    **dict([
        _files("", "GET", "?root=home", API_ANY),
        _files("stat/", "GET", "?root=home", API_ANY),
        _files("preview/", "GET", "?root=home&path=.bashrc", API_ANY),
        _files("content/", "GET", "?root=home&path=.bashrc", _signed_in(400)),  # not an image
        _files("download/", "GET", "?root=home&path=no-such-file", _signed_in(404)),
        _files("zip/", "GET", "?root=home&path=no-such-folder", _signed_in(404)),
        _files("usage/", "GET", "?root=home", API_ANY),
        _files("mkdir/", "POST", "", _signed_in(400), {"root": "home"}),
        _files("move/", "POST", "", _signed_in(400), {"root": "home"}),
        _files("copy/", "POST", "", _signed_in(400), {"root": "home"}),
        _files("delete/", "POST", "", _signed_in(400), {"root": "home"}),
        _files("trash/empty/", "POST", "", _signed_in(204)),
        _files("edit/", "PUT", "", _signed_in(400), {"root": "home"}),
        _files("uploads/", "POST", "", _signed_in(412)),  # no Tus-Resumable header
    ]),
    "files/": [Row("GET", _fixed("/files/?root=home"), P, PAGE_ANY)],
    "files/view/": [Row("GET", _fixed("/files/view/?root=home&path=.bashrc"), P, PAGE_ANY)],
    "files/edit/": [Row("GET", _fixed("/files/edit/?root=home&path=.bashrc"), P, PAGE_ANY)],
    # Back to the folder, told why (no action named).
    "files/action/": [Row("POST", _fixed("/files/action/"), P, dict.fromkeys(PRINCIPALS, 302))],
    "api/v1/files/uploads/<str:upload_id>/": [
        Row("PATCH", lambda w: f"/api/v1/files/uploads/{_upload(w)}/", A,
            {**API_MINE, "owner": 412, "admin": 404})],  # no Tus-Resumable header
    "": [Row("GET", _fixed("/"), P, PAGE_ANY)],  # home: each user's own things
    "home/part/": [Row("GET", _fixed("/home/part/"), P, PAGE_ANY)],
    "docs/": [Row("GET", _fixed("/docs/"), P, PUBLIC)],  # the documentation site: no login
    "docs/<path:path>": [Row("GET", _fixed("/docs/no-such-page/"), P, dict.fromkeys(PRINCIPALS, 404))],
    "accounts/login/": [Row("GET", _fixed("/accounts/login/"), P, PUBLIC)],
    "accounts/logout/": [Row("POST", _fixed("/accounts/logout/"), P, dict.fromkeys(PRINCIPALS, 302))],
    # Anybody's own logins only (the redirect to the login page either way).
    "accounts/logout/everywhere/": [Row("POST", _fixed("/accounts/logout/everywhere/"), P,
                                        dict.fromkeys(PRINCIPALS, 302))],
    "accounts/profile/": [Row("GET", _fixed("/accounts/profile/"), P, PAGE_ANY)],
    "accounts/profile/tokens/<id:token_id>/revoke/": [Row(
        "POST", lambda w: f"/accounts/profile/tokens/{w.token_to_delete.pk}/revoke/", P,
        {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],  # others: a no-op (checked below)
    "cluster/": [Row("GET", _fixed("/cluster/"), P, PAGE_ANY)],
    "jobs/": [Row("GET", _fixed("/jobs/"), P, PAGE_ANY)],
    "jobs/new/": [Row("GET", _fixed("/jobs/new/"), P, PAGE_ANY)],
    "jobs/new/<slug:slug>/": [Row("GET", _fixed("/jobs/new/custom/"), P, PAGE_ANY)],
    "jobs/<id:job_id>/": [Row("GET", lambda w: f"/jobs/{w.job.pk}/", P, PAGE_MINE)],
    "jobs/<id:job_id>/cancel/": [Row("POST", lambda w: f"/jobs/{w.job.pk}/cancel/", P,
                                     {**PAGE_MINE, "owner": 302, "admin": 302})],
    # What differs (provenance): owner only, as the record (an admin gets 404); the picker redirects.
    "jobs/<id:job_id>/differs/": [Row("GET", lambda w: f"/jobs/{_provenance(w)}/differs/?other={w.job.pk}", P,
                                      {**PAGE_MINE, "owner": 302, "admin": 404})],
    "jobs/<id:job_id>/differs/<id:other_id>/": [
        Row("GET", lambda w: f"/jobs/{_provenance(w)}/differs/{w.job.pk}/", P, {**PAGE_MINE, "admin": 404})],
    "jobs/<id:job_id>/rerun/": [Row("POST", lambda w: f"/jobs/{_provenance(w)}/rerun/", P,
                                    {**PAGE_MINE, "owner": 302, "admin": 404})],
    "servers/": [Row("GET", _fixed("/servers/"), P, PAGE_ANY)],
    "servers/<slug:name>/stop/": [Row("POST", lambda w: f"/servers/{w.server.name}/stop/", P,
                                      {**PAGE_MINE, "owner": 302, "admin": 404})],
    "servers/cards/": [Row("GET", _fixed("/servers/cards/"), P, PAGE_ANY)],
    # The owner's server is not ready (the hub is down here): back to the list with a message.
    "servers/<slug:name>/open/": [Row(method, lambda w: f"/servers/{w.server.name}/open/", P,
                                      {**PAGE_MINE, "owner": 302, "admin": 404})
                                  for method in ("GET", "POST")],
    "timing/": [Row("GET", _fixed("/timing/"), P, PAGE_ADMIN)],
    "gpus/": [Row("GET", _fixed("/gpus/"), P, PAGE_ADMIN)],
    "gpus/jobs/<id:job_id>/": [Row("GET", lambda w: f"/gpus/jobs/{w.job.pk}/", P, PAGE_MINE)],
    "usage/gpus.csv": [Row("GET", _fixed("/usage/gpus.csv"), P, PAGE_ANY)],
    "api/v1/usage/gpus/": [Row("GET", _fixed("/api/v1/usage/gpus/"), A, API_ANY)],
    # Each caller's own figures; admins' everybody's (tests/efficiency/test_reports.py).
    "usage/efficiency/": [Row("GET", _fixed("/usage/efficiency/"), P, PAGE_ANY)],
    "usage/efficiency/csv/": [Row("GET", _fixed("/usage/efficiency/csv/"), P, PAGE_ANY)],
    "api/v1/usage/efficiency/": [Row("GET", _fixed("/api/v1/usage/efficiency/"), A, API_ANY)],
    "api/v1/usage/efficiency/wasteful/": [Row("GET", _fixed("/api/v1/usage/efficiency/wasteful/"), A,
                                              {**API_ANY, "owner": 403, "other": 403})],
    # Prometheus: admins' sessions and scrape tokens (tests/metrics); a personal API token is no scrape token.
    "metrics": [Row("GET", _fixed("/metrics"), P, {**PAGE_ADMIN, "anonymous": 401, "revoked": 401,
                                                   "deprovisioned": 401}),
                Row("GET", _fixed("/metrics"), A, dict.fromkeys(PRINCIPALS, 401))],
    "api/v1/policy/": [Row("GET", _fixed("/api/v1/policy/"), A, API_ANY)],
    "api/v1/projects/": [Row("GET", _fixed("/api/v1/projects/"), A, API_ANY)],  # each caller's own
    "projects/budgets.csv": [Row("GET", _fixed("/projects/budgets.csv"), P, PAGE_ANY)],  # admins: all
    "servers/timing.csv": [Row("GET", _fixed("/servers/timing.csv"), P, PAGE_ANY)],
    "jobs/timing.csv": [Row("GET", _fixed("/jobs/timing.csv"), P, PAGE_ANY)],
    "oauth/authorize/": [Row("GET", _fixed("/oauth/authorize/"), P, {**PAGE_ANY, "owner": 400, "other": 400,
                                                                     "admin": 400})],
    "oauth/token/": [Row("POST", _fixed("/oauth/token/"), A, dict.fromkeys(PRINCIPALS, 400))],
    "oauth/revoke_token/": [Row("POST", _fixed("/oauth/revoke_token/"), A, dict.fromkeys(PRINCIPALS, 400))],
    "oauth/userinfo/": [Row("GET", _fixed("/oauth/userinfo/"), A, dict.fromkeys(PRINCIPALS, 403))],
    "admin/login/": [Row("GET", _fixed("/admin/login/"), P, dict.fromkeys(PRINCIPALS, 302))],
    "api/v1/me/": [Row("GET", _fixed("/api/v1/me/"), A, API_ANY)],
    "api/v1/tokens/": [Row("GET", _fixed("/api/v1/tokens/"), A, API_ANY)],
    "api/v1/tokens/<id:token_id>/": [Row("DELETE", lambda w: f"/api/v1/tokens/{w.token_to_delete.pk}/", A,
                                         {**API_MINE, "owner": 204, "admin": 404})],
    "api/v1/cluster/": [Row("GET", _fixed("/api/v1/cluster/"), A, API_ANY)],
    "api/v1/environments/": [Row("GET", _fixed("/api/v1/environments/"), A, API_ANY)],
    "api/v1/templates/": [Row("GET", _fixed("/api/v1/templates/"), A, API_ANY)],
    # The site's templates and profiles; each user's own runs only (tests/efficiency/test_suggest.py).
    "api/v1/templates/<str:template>/suggested-resources/": [
        Row("GET", _fixed("/api/v1/templates/custom/suggested-resources/"), A, API_ANY)],
    "api/v1/profiles/<str:profile>/suggested-resources/": [
        Row("GET", _fixed("/api/v1/profiles/nope/suggested-resources/"), A,
            {**API_ANY, "owner": 404, "other": 404, "admin": 404})],
    "api/v1/jobs/": [Row("GET", _fixed("/api/v1/jobs/"), A, API_ANY),
                     # Refused as invalid, so nothing reaches Slurm: proves the request got past authz.
                     Row("POST", _fixed("/api/v1/jobs/"), A, {**API_ANY, "owner": 400, "other": 400,
                                                              "admin": 400}, body={"template": "nope"})],
    "api/v1/jobs/<str:job_id>/": [
        Row("GET", lambda w: f"/api/v1/jobs/{w.job.pk}/", A, API_MINE),
        Row("GET", lambda w: f"/api/v1/jobs/{w.job.slurm_job_id}/?by=slurm", A, API_MINE),
        Row("GET", lambda w: f"/api/v1/jobs/{w.job.uuid}/?by=uuid", A, API_MINE)],
    "api/v1/jobs/<id:job_id>/cancel/": [Row("POST", lambda w: f"/api/v1/jobs/{w.job.pk}/cancel/", A,
                                            {**API_MINE, "owner": 409, "admin": 409})],
    "api/v1/jobs/<id:job_id>/log/": [Row("GET", lambda w: f"/api/v1/jobs/{w.job.pk}/log/", A,
                                         {**API_MINE, "owner": (200, 409), "admin": (200, 409)})],
    "api/v1/sessions/": [Row("GET", _fixed("/api/v1/sessions/"), A, API_ANY),
                         Row("POST", _fixed("/api/v1/sessions/"), A, {**API_ANY, "owner": 400, "other": 400,
                                                                      "admin": 400}, body={"gpus": -1})],
    "api/v1/sessions/<slug:name>/": [
        Row("GET", lambda w: f"/api/v1/sessions/{w.server.name}/", A, {**API_MINE, "admin": 404}),
        # The hub is down in this test: the owner's stop gets past authz and finds it unreachable.
        Row("DELETE", lambda w: f"/api/v1/sessions/{w.server.name}/", A,
            {**API_MINE, "owner": 503, "admin": 404})],
    "api/v1/jobs/<id:job_id>/metrics/": [Row("GET", lambda w: f"/api/v1/jobs/{w.job.pk}/metrics/", A,
                                             API_MINE)],
    "api/v1/jobs/<id:job_id>/gpu/": [Row("GET", lambda w: f"/api/v1/jobs/{w.job.pk}/gpu/", A, API_MINE)],
    "api/v1/jobs/<id:job_id>/provenance/": [
        Row("GET", lambda w: f"/api/v1/jobs/{_provenance(w)}/provenance/", A, {**API_MINE, "admin": 404})],
    "api/v1/jobs/<id:job_id>/provenance/diff/": [
        Row("GET", lambda w: f"/api/v1/jobs/{_provenance(w)}/provenance/diff/?other={w.job.pk}", A,
            {**API_MINE, "admin": 404})],
    # A job without a record: every answer stays JSON (the owner's zip: tests/provenance).
    "api/v1/jobs/<id:job_id>/provenance.zip": [
        Row("GET", lambda w: f"/api/v1/jobs/{w.job.pk}/provenance.zip", A, {**API_MINE, "owner": 404,
                                                                             "admin": 404})],
    # Re-run exactly: owner only (an admin gets 404, as for the record); a record whose job has not
    # ended is a 409 (tests/provenance/test_rerun.py).
    "api/v1/jobs/<id:job_id>/rerun/": [
        Row("GET", lambda w: f"/api/v1/jobs/{_provenance(w)}/rerun/", A, {**API_MINE, "admin": 404}),
        Row("POST", lambda w: f"/api/v1/jobs/{_provenance(w)}/rerun/", A,
            {**API_MINE, "owner": 409, "admin": 404})],
    "api/v1/sessions/<slug:name>/gpu/": [Row("GET", lambda w: f"/api/v1/sessions/{w.server.name}/gpu/", A,
                                             API_MINE)],
    # The session's record (written with it): owner only, as a job's.
    "api/v1/sessions/<slug:name>/provenance/": [
        Row("GET", lambda w: f"/api/v1/sessions/{w.server.name}/provenance/", A, {**API_MINE, "admin": 404})],
    "api/v1/jobs/<str:job_id>/efficiency/": [
        Row("GET", lambda w: f"/api/v1/jobs/{_efficiency(w).job.pk}/efficiency/", A, API_MINE),
        Row("GET", lambda w: f"/api/v1/jobs/{_efficiency(w).job.uuid}/efficiency/?by=uuid", A, API_MINE)],
    "api/v1/sessions/<slug:name>/efficiency/": [Row(
        "GET", lambda w: f"/api/v1/sessions/{_efficiency(w, session=True).session.name}/efficiency/", A,
        API_MINE)],
    # The owner's job and session are not running: past authz, refused with 409 (a message on pages);
    # extending is the owner's call, so an admin gets 404 too.
    "api/v1/jobs/<id:job_id>/extend/": [Row("POST", lambda w: f"/api/v1/jobs/{w.job.pk}/extend/", A,
                                            {**API_MINE, "owner": 409, "admin": 404}, body={"minutes": 5})],
    "api/v1/sessions/<slug:name>/extend/": [Row(
        "POST", lambda w: f"/api/v1/sessions/{w.server.name}/extend/", A,
        {**API_MINE, "owner": 409, "admin": 404}, body={"minutes": 5})],
    # Keep it answers the owner's idle-GPU warning; the owner's session has none: 409 (a message on
    # the page). Another's session, an admin's included: 404.
    "api/v1/sessions/<slug:name>/keep/": [Row("POST", lambda w: f"/api/v1/sessions/{w.server.name}/keep/", A,
                                              {**API_MINE, "owner": 409, "admin": 404})],
    "idle-gpus/sessions/<slug:name>/keep/": [Row(
        "POST", lambda w: f"/idle-gpus/sessions/{w.server.name}/keep/", P,
        {**PAGE_MINE, "owner": 302, "admin": 404})],
    "api/v1/extensions/": [Row("GET", _fixed("/api/v1/extensions/"), A, API_ANY)],
    "extensions/jobs/<id:job_id>/": [Row("POST", lambda w: f"/extensions/jobs/{w.job.pk}/", P,
                                         {**PAGE_MINE, "owner": 302, "admin": 404})],
    "extensions/sessions/<slug:name>/": [Row("POST", lambda w: f"/extensions/sessions/{w.server.name}/", P,
                                             {**PAGE_MINE, "owner": 302, "admin": 404})],
    "api/v1/presets/": [Row("GET", _fixed("/api/v1/presets/"), A, API_ANY),
                        Row("POST", _fixed("/api/v1/presets/"), A,
                            {**API_ANY, "owner": 400, "other": 400, "admin": 400}, body={"kind": "nope"})],
    "api/v1/presets/<id:preset_id>/": [Row("DELETE", lambda w: f"/api/v1/presets/{_preset(w)}/", A,
                                           {**API_MINE, "owner": 204, "admin": 404})],
    # No preset name posted: refused with a message, back to the form.
    "launches/presets/session/": [Row("POST", _fixed("/launches/presets/session/"), P,
                                      {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],
    "launches/presets/job/<slug:slug>/": [Row("POST", _fixed("/launches/presets/job/custom/"), P,
                                              {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],
    "launches/presets/<id:preset_id>/delete/": [Row(
        "POST", lambda w: f"/launches/presets/{_preset(w)}/delete/", P,
        {**PAGE_MINE, "owner": 302, "admin": 404})],
    "notifications/": [Row("GET", _fixed("/notifications/"), P, PAGE_ANY)],
    "api/v1/notifications/": [Row("GET", _fixed("/api/v1/notifications/"), A, API_ANY)],
    # Everybody's own activity; everybody's, searched and exported, for admins only.
    "activity/": [Row("GET", _fixed("/activity/"), P, PAGE_ANY)],
    "api/v1/activity/": [Row("GET", _fixed("/api/v1/activity/"), A, API_ANY)],
    "activity/all/": [Row("GET", _fixed("/activity/all/"), P, ADMIN_ONLY)],
    "activity/all/export.jsonl": [Row("GET", _fixed("/activity/all/export.jsonl"), P, ADMIN_ONLY)],
    # The old page leads to the apps (no login needed to be redirected).
    "tensorboards/": [Row("GET", _fixed("/tensorboards/"), P, dict.fromkeys(PAGE_ANY, 302))],
    # No source given: refused as invalid (a message and back to the list), nothing reaches Slurm.
    "tensorboards/open/": [Row("POST", _fixed("/tensorboards/open/"), P,
                               {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],
    "apps/": [Row("GET", _fixed("/apps/"), P, PAGE_ANY)],
    # No type given: refused (a message and back to the list), nothing reaches Slurm.
    "apps/start/": [Row("POST", _fixed("/apps/start/"), P, {**PAGE_ANY, "owner": 302, "other": 302,
                                                             "admin": 302})],
    "apps/<id:app_id>/": [Row("GET", lambda w: f"/apps/{_board(w)}/", P, PAGE_MINE)],
    # Only its owner is sent to the app (an ended one: back to its page); an admin gets no grant.
    "apps/<id:app_id>/open/": [Row("GET", lambda w: f"/apps/{_board(w)}/open/", P,
                                   {**PAGE_MINE, "owner": 302, "admin": 404})],
    "apps/<id:app_id>/stop/": [Row("POST", lambda w: f"/apps/{_board(w)}/stop/", P,
                                   {**PAGE_MINE, "owner": 302, "admin": 302})],
    # Shells are their owner's alone: an admin gets 404 as anybody else does. A start naming a job
    # that is not one is refused (a message and back to the list), nothing is started.
    "shell/": [Row("GET", _fixed("/shell/"), P, PAGE_ANY)],
    "shell/start/": [Row("POST", _fixed("/shell/start/"), P, {**PAGE_ANY, "owner": 302, "other": 302,
                                                              "admin": 302}, body={"job": "x"})],
    "shell/<id:shell_id>/open/": [Row("GET", lambda w: f"/shell/{_shell(w)}/open/", P,
                                      {**PAGE_MINE, "owner": 302, "admin": 404})],
    "shell/<id:shell_id>/stop/": [Row("POST", lambda w: f"/shell/{_shell(w)}/stop/", P,
                                      {**PAGE_MINE, "owner": 302, "admin": 404})],
    "api/v1/shells/": [Row("GET", _fixed("/api/v1/shells/"), A, API_ANY),
                       Row("POST", _fixed("/api/v1/shells/"), A, {**API_ANY, "owner": 400, "other": 400,
                                                                  "admin": 400}, body={"job": "x"})],
    "api/v1/shells/<id:shell_id>/": [
        Row("GET", lambda w: f"/api/v1/shells/{_shell(w)}/", A, {**API_MINE, "admin": 404}),
        Row("DELETE", lambda w: f"/api/v1/shells/{_shell(w)}/", A, {**API_MINE, "admin": 404})],
    "containers/": [Row("GET", _fixed("/containers/"), P, PAGE_ANY)],
    # A local-path image is not pulled: a message and back to the catalog, nothing reaches Slurm.
    "containers/<id:image_id>/pull/": [Row("POST", lambda w: f"/containers/{_image(w)}/pull/", P,
                                           {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],
    "containers/keys/": [Row("POST", _fixed("/containers/keys/"), P,
                             {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],
    "containers/keys/<id:credential_id>/delete/": [Row(
        "POST", lambda w: f"/containers/keys/{_key(w)}/delete/", P,
        {**PAGE_ANY, "owner": 302, "other": 302, "admin": 302})],  # others: a no-op
    "api/v1/images/": [Row("GET", _fixed("/api/v1/images/"), A, API_ANY)],
    "api/v1/images/<id:image_id>/pull/": [Row("POST", lambda w: f"/api/v1/images/{_image(w)}/pull/", A,
                                              {**API_ANY, "owner": 400, "other": 400, "admin": 400})],
    "api/v1/pulls/<id:pull_id>/": [Row("GET", lambda w: f"/api/v1/pulls/{_pull(w)}/", A, API_MINE)],
    "api/v1/registry-keys/": [Row("GET", _fixed("/api/v1/registry-keys/"), A, API_ANY),
                              Row("POST", _fixed("/api/v1/registry-keys/"), A,
                                  {**API_ANY, "owner": 400, "other": 400, "admin": 400},
                                  body={"registry": "not a host"})],
    "api/v1/registry-keys/<id:credential_id>/": [Row(
        "DELETE", lambda w: f"/api/v1/registry-keys/{_key(w)}/", A,
        {**API_MINE, "owner": 204, "admin": 404})],
    "api/v1/tensorboards/": [Row("GET", _fixed("/api/v1/tensorboards/"), A, API_ANY),
                             Row("POST", _fixed("/api/v1/tensorboards/"), A,
                                 {**API_ANY, "owner": 400, "other": 400, "admin": 400},
                                 body={"logdir": "/etc"})],
    "api/v1/tensorboards/<id:board_id>/": [
        Row("GET", lambda w: f"/api/v1/tensorboards/{_board(w)}/", A, API_MINE),
        Row("DELETE", lambda w: f"/api/v1/tensorboards/{_board(w)}/", A, API_MINE)],  # ended: no Slurm call
    "api/v1/app-types/": [Row("GET", _fixed("/api/v1/app-types/"), A, API_ANY)],
    "api/v1/apps/": [Row("GET", _fixed("/api/v1/apps/"), A, API_ANY),
                     Row("POST", _fixed("/api/v1/apps/"), A, {**API_ANY, "owner": 400, "other": 400,
                                                              "admin": 400}, body={"type": "no-such-app"})],
    "api/v1/apps/<id:app_id>/": [
        Row("GET", lambda w: f"/api/v1/apps/{_board(w)}/", A, API_MINE),
        Row("DELETE", lambda w: f"/api/v1/apps/{_board(w)}/", A, API_MINE)],  # ended: no Slurm call
    "benchmarks/": [Row("GET", _fixed("/benchmarks/"), P, PAGE_ANY)],
    "benchmarks/compare/": [Row("GET", _fixed("/benchmarks/compare/?ids=1,2"), P, PAGE_ANY)],
    "benchmarks/charts/": [Row("GET", _fixed("/benchmarks/charts/?kind=scaling"), P, PAGE_ANY)],
    "benchmarks/import/": [Row("GET", _fixed("/benchmarks/import/"), P, PAGE_ADMIN)],
    "benchmarks/<id:result_id>/": [Row("GET", lambda w: f"/benchmarks/{_result(w)}/", P, PAGE_ANY)],
    "usage/": [Row("GET", _fixed("/usage/"), P, PAGE_ANY)],
    "usage/csv/": [Row("GET", _fixed("/usage/csv/"), P, PAGE_ANY)],
    "api/v1/benchmarks/": [Row("GET", _fixed("/api/v1/benchmarks/"), A, API_ANY)],
    "api/v1/benchmarks/compare/": [Row("GET", _fixed("/api/v1/benchmarks/compare/?ids=1"), A, API_ANY)],
    "api/v1/benchmarks/import/": [Row("POST", _fixed("/api/v1/benchmarks/import/"), A, API_ADMIN,
                                      body={"tool": "nope"})],
    "api/v1/benchmarks/<id:result_id>/": [Row("GET", lambda w: f"/api/v1/benchmarks/{_result(w)}/", A,
                                              API_ANY)],
    "api/v1/references/": [Row("GET", _fixed("/api/v1/references/"), A, API_ANY),
                           Row("POST", _fixed("/api/v1/references/"), A, API_ADMIN, body={"tool": "nope"})],
    "api/v1/usage/": [Row("GET", _fixed("/api/v1/usage/"), A, API_ANY)],
    # Only a job's or a session's own report token (tests/reports): no user's token or login.
    "api/v1/reports/": [Row("POST", _fixed("/api/v1/reports/"), A, dict.fromkeys(PRINCIPALS, 401),
                            body={"event": "ready"}),
                        Row("POST", _fixed("/api/v1/reports/"), P, dict.fromkeys(PRINCIPALS, 401),
                            body={"event": "ready"})],
    # Public to anonymous clients; a revoked token presented is still refused.
    "api/schema/": [Row("GET", _fixed("/api/schema/"), A, {**PUBLIC, "revoked": 401,
                                                                 "deprovisioned": 401})],
    "api/docs/": [Row("GET", _fixed("/api/docs/"), P, PAGE_ANY)],
    # A job's live curves, what its page polls: as the job page.
    "tracking/jobs/<id:job_id>/curves/": [Row("GET", lambda w: f"/tracking/jobs/{w.job.pk}/curves/", P,
                                              PAGE_MINE)],
    # Runs and their comparison: one's own only (anybody else's run is not found, an admin's neither).
    "tracking/runs/": [Row("GET", _fixed("/tracking/runs/"), P, PAGE_ANY)],
    "tracking/runs/compare/": [Row("GET", lambda w: f"/tracking/runs/compare/?runs={_tracked(w)['run_id']}",
                                   P, {**PAGE_MINE, "admin": 404})],
    "api/v1/runs/compare/": [Row("GET", lambda w: f"/api/v1/runs/compare/?runs={_tracked(w)['run_id']}", A,
                                 {**API_MINE, "admin": 404})],
    # A run's artifact files, listed as its owner (an admin reads anybody's): one whose folder is
    # outside its owner's home is refused (409) before the helper runs, whoever asks.
    "api/v1/runs/<str:run_id>/artifacts/": [
        Row("GET", lambda w: f"/api/v1/runs/{_elsewhere(w)}/artifacts/", A,
            {**API_MINE, "owner": 409, "admin": 409})],
    # Sweeps: the owner's and an admin's; cancelling an ended one is refused (409) before any scancel.
    "sweeps/": [Row("GET", _fixed("/sweeps/"), P, PAGE_ANY)],
    # The composer's sweep button: refused input goes back to the composer (302) for everybody.
    "sweeps/new/<slug:template>/": [Row("POST", _fixed("/sweeps/new/pytorch-train/"), P,
                                        dict.fromkeys(PRINCIPALS, 302))],
    "sweeps/<id:sweep_id>/": [Row("GET", lambda w: f"/sweeps/{_sweep(w)}/", P, PAGE_MINE)],
    "sweeps/<id:sweep_id>/cancel/": [Row("POST", lambda w: f"/sweeps/{_sweep(w)}/cancel/", P,
                                         {**PAGE_MINE, "owner": 302, "admin": 302})],
    "api/v1/sweeps/": [Row("GET", _fixed("/api/v1/sweeps/"), A, API_ANY),
                       Row("POST", _fixed("/api/v1/sweeps/"), A, {**API_ANY, "owner": 400, "other": 400,
                                                                  "admin": 400}, body={"template": "x"})],
    "api/v1/sweeps/<id:sweep_id>/": [Row("GET", lambda w: f"/api/v1/sweeps/{_sweep(w)}/", A, API_MINE)],
    "api/v1/sweeps/<id:sweep_id>/cancel/": [Row("POST", lambda w: f"/api/v1/sweeps/{_sweep(w)}/cancel/", A,
                                                {**API_MINE, "owner": 409, "admin": 409})],
    **_mlflow_rows(),
}


def _routes(patterns: list, prefix: str = "") -> list[str]:
    found = []
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            found += _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            found.append(prefix + str(pattern.pattern))
    return found


def _admin(route: str) -> bool:
    return route.startswith("admin/") and route != "admin/login/"


def test_every_route_has_a_row():
    routes = _routes(get_resolver().url_patterns)
    missing = sorted(route for route in routes if not _admin(route) and route not in ROWS)
    assert missing == [], f"add a row to ROWS for: {missing}"
    assert not set(ROWS) - set(routes), "rows for routes that no longer exist"


@pytest.fixture
def world(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # no hub: stops answer 503
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    PartitionFactory()
    owner = UserFactory(username="alice")
    UserFactory(username="bob")
    UserFactory(username="ada", is_staff=True, is_superuser=True)
    UserFactory(username="carol", is_active=False)
    token, _ = api_token_create(user=owner, name="to delete")
    return World(job=JobFactory(user=owner), server=SessionFactory(user=owner, name="mine"),
                 token_to_delete=token)


def _client(principal: str, via: str) -> APIClient:
    client = APIClient()
    users = {"owner": "alice", "other": "bob", "admin": "ada", "deprovisioned": "carol"}
    if principal == "revoked":
        token, key = api_token_create(user=User.objects.get(username="alice"), name="revoked")
        api_token_revoke(user=token.user, token_id=token.pk)
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    elif principal in users:
        user = User.objects.get(username=users[principal])
        if via == A:
            _, key = api_token_create(user=user, name="authz")
            client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        else:
            client.force_login(user)
    return client


def _check(client: APIClient, row: Row, world: World, principal: str) -> None:
    path = row.path(world)
    body = "" if row.body is None else json.dumps(row.body(world) if callable(row.body) else row.body)
    response = client.generic(row.method, path, data=body, content_type="application/json")
    expected = row.expect[principal]
    allowed = expected if isinstance(expected, tuple) else (expected,)
    assert response.status_code in allowed, (
        f"{row.method} {path} as {principal}: {response.status_code}, expected {expected}")
    if path.startswith("/api/v1/"):
        kind = response.get("Content-Type", "")
        assert kind.startswith("application/json") or response.status_code == 204, (row.method, path, kind)


@pytest.mark.parametrize("route", sorted(ROWS))
def test_route(route, world):
    for row in ROWS[route]:
        for principal in PRINCIPALS:
            _check(_client(principal, row.via), row, world, principal)


def test_nobody_else_can_revoke_or_see_the_owners_things(world):
    """The page that revokes a token answers with a redirect to everybody; only the owner's works."""
    for principal in ("other", "admin"):
        _client(principal, P).post(f"/accounts/profile/tokens/{world.token_to_delete.pk}/revoke/")
    world.token_to_delete.refresh_from_db()  # still there
    _client("owner", P).post(f"/accounts/profile/tokens/{world.token_to_delete.pk}/revoke/")
    assert not ApiToken.objects.filter(pk=world.token_to_delete.pk).exists()


ADMIN_ROUTES = ["/admin/", "/admin/jobs/job/", "/admin/cluster/pollstatus/", "/admin/servers/session/",
                "/admin/environments/environment/", "/admin/webapps/app/", "/admin/webapps/apptype/",
                "/admin/containers/image/", "/admin/containers/pull/",
                "/admin/containers/registrycredential/",
                "/admin/benchmarks/benchmarkresult/", "/admin/benchmarks/reference/",
                "/admin/benchmarks/publishedresult/",
                "/admin/accounts/user/", "/admin/extensions/extensionrequest/",
                "/admin/policy/resourceprofile/",
                "/admin/accounts/apitoken/", "/admin/oauth2_provider/accesstoken/",
                "/admin/axes/accessattempt/", "/admin/notifications/adminnotice/",
                "/admin/metrics/scrapetoken/"]


@pytest.mark.parametrize("path", ADMIN_ROUTES)
def test_admin_pages_are_for_admins_only(path, world):
    for principal in PRINCIPALS:
        response = _client(principal, P).get(path)
        assert response.status_code == ADMIN_ONLY[principal], (path, principal, response.status_code)


def test_the_admin_session_pages_keep_their_old_address():
    """#32: NotebookServer became Session; the admin's old addresses lead to the new ones."""
    for old, new in [("/admin/servers/notebookserver/?p=2", "/admin/servers/session/?p=2"),
                     ("/admin/servers/notebookserver/12/change/", "/admin/servers/session/12/change/")]:
        response = APIClient().get(old)
        assert (response.status_code, response["Location"]) == (301, new)


def test_admin_routes_are_all_under_the_admin_site():
    """Every admin route belongs to Django's admin site, which checks is_staff on each view."""
    routes = [route for route in _routes(get_resolver().url_patterns) if _admin(route)]
    assert routes and all(route.startswith("admin/") for route in routes)


WRITES = ("INSERT", "UPDATE", "DELETE")
# The one write a read may make: when an API token was last used, at most once a minute
# (accounts.services), as GitHub shows it; the profile page lists it.
TOKEN_USE = 'UPDATE "accounts_apitoken" SET "last_used_at"'


@pytest.mark.parametrize("route", sorted(route for route, rows in ROWS.items()
                                         if any(row.method == "GET" for row in rows)))
def test_a_get_writes_no_row(route, world):
    """#33 item 7: a GET reads. As the owner and as an admin (whose pages show more), every GET of
    the table runs with no INSERT, UPDATE or DELETE in PostgreSQL."""
    for row in ROWS[route]:
        if row.method != "GET":
            continue
        for principal in ("owner", "admin"):
            client = _client(principal, row.via)
            path = row.path(world)
            with CaptureQueriesContext(connection) as queries:
                client.get(path)
            written = [q["sql"][:160] for q in queries
                       if q["sql"].lstrip().upper().startswith(WRITES) and not q["sql"].startswith(TOKEN_USE)]
            assert written == [], f"GET {path} as {principal} wrote: {written}"
