"""Web apps without the cluster: the catalog's API, starting an app (its form checked field by field,
reuse, the limit), who may see, stop and open which app, the pages, the batch script's quoting and
secrets, the runner's "ready" report, and how an app is followed from Slurm's snapshot to ready or
ended (with its log's words), idle stop included. Slurm is a stand-in wherever it would be called."""

import hashlib
import json
import pwd
import shlex
import subprocess
import sys
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from portal.cluster.models import PollStatus, SlurmJob
from portal.tokens.report import report_token
from portal.webapps import grants
from portal.webapps.catalog import catalog_sync, command_render
from portal.webapps.models import App, AppState, AppType
from portal.webapps.script import app_job_environment, app_script
from portal.webapps.services import apps_follow
from slurm.adapter import Slurm
from slurm.user_files import JobOutput
from tests.factories import AppFactory, UserFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("app_types")]
TYPES, APPS, REPORTS = "/api/v1/app-types/", "/api/v1/apps/", "/api/v1/reports/"
HOME = pwd.getpwnam("alice").pw_dir


@pytest.fixture
def app_types(db, settings):
    settings.APPS_ORIGIN = "http://apps.localhost:8002"
    catalog_sync()


class CancelOnly:
    """The adapter where a stop calls it: scancel only (anything else would fail the test)."""

    def __init__(self):
        self.cancelled = []

    def cancel(self, *, job_id, user):
        self.cancelled.append((job_id, user))


@pytest.fixture
def scancel(monkeypatch):
    fake = CancelOnly()
    monkeypatch.setattr(Slurm, "from_settings", classmethod(lambda cls: fake))
    return fake


@pytest.fixture
def logs(monkeypatch):
    """The app job's stdout and stderr, as the job-files helper would read them (by app UUID)."""
    files = {"stdout": "", "stderr": ""}

    def read(*, user, job_uuid, stream, offset, limit, runner=None):
        data = files[stream].encode()
        return JobOutput(exists=bool(data), size=len(data), data=data[offset:offset + limit])

    monkeypatch.setattr("portal.webapps.services.job_output_read", read)
    return files


def _client(username, **fields):
    client = Client()
    client.force_login(UserFactory(username=username, **fields))
    return client


def _type(slug):
    return AppType.objects.get(slug=slug)


def _app(username="alice", **fields):
    defaults = {"user": UserFactory(username=username), "state": AppState.READY, "host": "vm", "port": 43123,
                "slurm_job_id": "777", "submitted_at": timezone.now() - timedelta(minutes=5),
                "ready_at": timezone.now(), "parameters": {"logdir": f"/home/{username}/logs"}}
    return AppFactory(**{**defaults, **fields})


def _start(client, slug, parameters):
    return client.post(APPS, {"type": slug, "parameters": parameters}, format="json")


# --- the catalog ---

def test_the_app_types_each_with_a_json_schema_of_its_parameters(token_client):
    body = token_client.get(TYPES).json()
    types = {item["slug"]: item for item in body}
    assert set(types) == {"tensorboard", "vscode", "web-app"}
    for item in body:
        schema = item["parameters"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False, item
        assert set(schema["required"]) <= set(schema["properties"]), item
        assert {"name", "description", "time_limit_minutes", "idle_minutes"} <= set(item)
    assert types["tensorboard"]["parameters"]["required"] == ["logdir"]
    assert set(types["web-app"]["parameters"]["properties"]) == {"command", "folder"}
    assert types["web-app"]["parameters"]["required"] == ["command"]
    assert types["vscode"]["parameters"]["required"] == []
    # A disabled type is not offered.
    AppType.objects.filter(slug="vscode").update(enabled=False)
    assert {item["slug"] for item in token_client.get(TYPES).json()} == {"tensorboard", "web-app"}
    assert APIClient().get(TYPES).status_code in (401, 403)


# --- starting ---

def test_a_start_saves_it_queued_and_the_same_values_reuse_it(token_client):
    response = _start(token_client, "vscode", {"folder": "projects"})
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["type"] == "vscode" and body["owner"] == "alice" and body["state"] == "queued"
    assert body["slurm_job_id"] == "" and body["parameters"] == {"folder": f"{HOME}/projects"}
    app = App.objects.get(pk=body["id"])
    assert body["url"] == f"http://{app.uuid}.apps.localhost:8002/"
    assert body["open_url"] == f"/apps/{app.pk}/open/"
    again = _start(token_client, "vscode", {"folder": f"{HOME}/projects"})  # the same folder, absolute
    assert again.status_code == 200 and again.json()["id"] == app.pk
    other = _start(token_client, "vscode", {})
    assert other.status_code == 201 and other.json()["parameters"] == {"folder": None}
    assert App.objects.count() == 2


def test_the_limit_is_a_409_app_limit(token_client, settings):
    settings.APPS_MAX_PER_USER = 1
    assert _start(token_client, "vscode", {}).status_code == 201
    refused = _start(token_client, "tensorboard", {"logdir": "logs"})
    assert refused.status_code == 409 and refused.json()["code"] == "app_limit", refused.json()


@pytest.mark.parametrize("slug", ["nope", "", "x" * 41, "TensorBoard"])
def test_an_unknown_type_is_a_400_naming_type(token_client, slug):
    response = _start(token_client, slug, {})
    assert response.status_code == 400 and "type" in response.json()["fields"], response.json()
    assert not App.objects.exists()


def test_a_disabled_type_cannot_be_started(token_client):
    AppType.objects.filter(slug="vscode").update(enabled=False)
    response = _start(token_client, "vscode", {})
    assert response.status_code == 400 and "type" in response.json()["fields"]


@pytest.mark.parametrize(("slug", "parameters", "field"), [
    ("tensorboard", {"logdir": "logs", "port": 80}, "port"),  # unknown
    ("tensorboard", {}, "logdir"),  # required
    ("web-app", {"folder": "x"}, "command"),  # required
    ("tensorboard", {"logdir": "/etc"}, "logdir"),  # not one of the user's folders
    ("tensorboard", {"logdir": "/home/bob/logs"}, "logdir"),
    ("tensorboard", {"logdir": "../bob"}, "logdir"),
    ("vscode", {"folder": "/home/alice/../bob"}, "folder"),
    ("vscode", {"folder": "/home/alice2"}, "folder"),
    ("tensorboard", {"logdir": ["logs"]}, "logdir"),  # a wrong JSON type
    ("tensorboard", {"logdir": 7}, "logdir"),
    ("web-app", {"command": {"x": 1}}, "command"),
    ("web-app", {"command": "y" * 4001}, "command"),
    ("tensorboard", {"logdir": "/home/alice/a\nb"}, "logdir"),
])
def test_a_parameter_outside_the_form_is_a_400_naming_it(token_client, slug, parameters, field):
    response = _start(token_client, slug, parameters)
    assert response.status_code == 400, response.json()
    problems = response.json()["fields"]["parameters"]
    assert isinstance(problems[field], list) and problems[field], problems
    assert not App.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"type": "vscode", "parameters": {}, "user": "bob"}, "user"),
    ({"type": "vscode", "host": "evil.example"}, "host"),
    ({"type": "vscode", "parameters": "folder=x"}, "parameters"),
    ({"parameters": {}}, "type"),
])
def test_a_body_outside_the_input_is_a_400(token_client, body, field):
    response = token_client.post(APPS, body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    assert not App.objects.exists()


# --- who sees, stops and opens what ---

def test_bob_gets_404_on_alices_app_and_sees_only_his_own(scancel):
    app = _app()
    bob = _client("bob")
    assert bob.get(f"{APPS}{app.pk}/").status_code == 404
    assert bob.delete(f"{APPS}{app.pk}/").status_code == 404
    assert bob.get(f"/apps/{app.pk}/").status_code == 404
    assert bob.post(f"/apps/{app.pk}/stop/").status_code == 404
    assert bob.get(APPS).json() == []
    assert scancel.cancelled == []
    alice = _client("alice")
    assert [item["id"] for item in alice.get(APPS).json()] == [app.pk]
    assert alice.get(f"{APPS}{app.pk}/").json()["host"] == "vm"
    assert alice.get(f"{APPS}{app.pk + 1000}/").status_code == 404


def test_an_admin_sees_every_app_and_stops_it_as_its_owner(scancel):
    app = _app()
    bobs = _app("bob", slurm_job_id="778")
    ada = _client("ada", is_staff=True)
    assert {item["id"] for item in ada.get(APPS).json()} == {app.pk, bobs.pk}
    assert ada.get(f"{APPS}{app.pk}/").json()["owner"] == "alice"
    stopped = ada.delete(f"{APPS}{app.pk}/")
    assert stopped.status_code == 200
    assert stopped.json()["state"] == "ended"
    assert stopped.json()["reason"] == "Stopped by an administrator (ada)."
    assert scancel.cancelled == [("777", "alice")]


def test_delete_scancels_once_and_a_queued_one_not_yet_in_slurm_just_ends(token_client, scancel):
    app = _app()
    response = token_client.delete(f"{APPS}{app.pk}/")
    assert response.status_code == 200 and response.json()["reason"] == "Stopped by you."
    assert token_client.delete(f"{APPS}{app.pk}/").json()["state"] == "ended"
    assert scancel.cancelled == [("777", "alice")]
    queued = _app(state=AppState.QUEUED, slurm_job_id="", port=None, host="", parameters={"logdir": "/data"})
    assert token_client.delete(f"{APPS}{queued.pk}/").json()["state"] == "ended"
    assert scancel.cancelled == [("777", "alice")]


def test_the_serializer_never_shows_the_secret(token_client):
    app = _app()
    for body in (token_client.get(f"{APPS}{app.pk}/").json(), token_client.get(APPS).json()[0],
                 token_client.get(f"/api/v1/tensorboards/{app.pk}/").json()):
        assert "secret" not in body and app.secret not in json.dumps(body)
    page = _client("alice").get(f"/apps/{app.pk}/").content.decode()
    assert app.secret not in page


def test_open_sends_the_owner_to_the_apps_origin_with_a_grant_and_nobody_else():
    app = _app()
    alice = _client("alice")
    response = alice.get(f"/apps/{app.pk}/open/")
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}" == f"http://{app.uuid}.apps.localhost:8002"
    assert location.path == grants.GRANT_PATH
    assert response["Referrer-Policy"] == "no-referrer" and "no-store" in response["Cache-Control"]
    [token] = parse_qs(location.query)["token"]
    assert grants.grant_redeem(token=token, app_uuid=app.uuid) == app.user_id
    for other in (_client("ada", is_staff=True), _client("bob")):
        assert other.get(f"/apps/{app.pk}/open/").status_code == 404
    assert Client().get(f"/apps/{app.pk}/open/").status_code == 302  # to the login page
    assert "login" in Client().get(f"/apps/{app.pk}/open/")["Location"]
    for state in (AppState.QUEUED, AppState.STARTING, AppState.ENDED):
        App.objects.filter(pk=app.pk).update(state=state)
        back = alice.get(f"/apps/{app.pk}/open/")
        assert back.status_code == 302 and back["Location"] == f"/apps/{app.pk}/", state


# --- the pages ---

def test_the_apps_page_shows_the_cards_and_each_types_start_form():
    ready = _app()
    ended = _app(state=AppState.ENDED, reason="Stopped by you.", parameters={"logdir": "/data"})
    _app("bob", parameters={"logdir": "/home/bob/secret-project"})
    page = _client("alice").get("/apps/").content.decode()
    assert f'id="app-{ready.pk}"' in page and f'id="app-open-{ready.pk}"' in page
    assert f'id="app-stop-{ready.pk}"' in page and f'id="app-{ended.pk}"' not in page
    assert 'id="apps-ended"' in page and "Stopped by you." in page
    assert "secret-project" not in page  # bob's
    for slug in ("tensorboard", "vscode", "web-app"):
        assert f'id="app-form-{slug}"' in page and f'value="{slug}"' in page
    assert 'name="param-logdir"' in page and 'name="param-command"' in page and 'name="param-folder"' in page


def test_starting_from_the_form_and_its_errors_as_messages():
    alice = _client("alice")
    response = alice.post("/apps/start/", {"type": "web-app", "param-command": "python -m http.server $PORT",
                                           "param-folder": ""})
    app = App.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/apps/{app.pk}/"
    assert app.type.slug == "web-app" and app.parameters["command"] == "python -m http.server $PORT"
    assert app.state == AppState.QUEUED and app.user.username == "alice"
    refused = alice.post("/apps/start/", {"type": "tensorboard", "param-logdir": "/etc"}, follow=True)
    assert refused.redirect_chain[-1][0] == "/apps/"
    assert "logdir:" in refused.content.decode()
    unknown = alice.post("/apps/start/", {"type": "nope"}, follow=True)
    assert "type:" in unknown.content.decode() and "Unknown app type" in unknown.content.decode()
    missing = alice.post("/apps/start/", {"type": "web-app", "param-command": ""}, follow=True)
    assert "command:" in missing.content.decode()
    assert alice.get("/apps/start/").status_code == 405
    assert App.objects.count() == 1


def test_the_stop_button_stops_it(scancel):
    app = _app()
    response = _client("alice").post(f"/apps/{app.pk}/stop/")
    assert response.status_code == 302 and response["Location"] == f"/apps/{app.pk}/"
    app.refresh_from_db()
    assert app.state == AppState.ENDED and scancel.cancelled == [("777", "alice")]


# --- the batch script ---

HOSTILE_COMMAND = "'; touch /tmp/pwned; echo ' $(id) `id` \" \\ ; exit 0 #"
HOSTILE_FOLDER = "/home/alice/x'; rm -rf ~; echo '$(id)"


def _script(app):
    command = command_render(app_type=app.type, values=app.parameters)
    script = app_script(app=app, command=command, output_dir=f"{HOME}/gpuportal/jobs", environment=None)
    return command, script


def test_the_script_quotes_a_hostile_command_and_folder(tmp_path, settings):
    app = _app(type=_type("web-app"), state=AppState.QUEUED,
               parameters={"command": HOSTILE_COMMAND, "folder": HOSTILE_FOLDER})
    command, script = _script(app)
    assert shlex.split(command.splitlines()[0]) == ["cd", HOSTILE_FOLDER]
    assert shlex.split(command.splitlines()[1]) == ["exec", "bash", "-c", HOSTILE_COMMAND]
    assert script.endswith(f" serve -- bash -c {shlex.quote(command)}\n")
    for text in (HOSTILE_COMMAND, HOSTILE_FOLDER, "touch", "rm -rf"):
        assert not any(line.lstrip().startswith(text) for line in script.splitlines()), text
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    # Run as bash would, with a runner that only prints what it was given: one word, unchanged.
    argv = tmp_path / "argv.py"
    argv.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    settings.APPS_PYTHON, settings.APPS_RUNNER = sys.executable, str(argv)
    _, script = _script(app)
    ran = subprocess.run(["bash"], input=script, text=True, capture_output=True, check=True, cwd=tmp_path)
    assert json.loads(ran.stdout.splitlines()[-1]) == ["serve", "--", "bash", "-c", command]
    assert not (tmp_path / "pwned").exists()


def test_an_app_starts_in_its_owners_home(tmp_path, settings):
    """Its job runs in ~/gpuportal/jobs (where its log goes); VS Code's `.` and a web app's `cd .`
    must be the home the forms speak of."""
    app = _app(type=_type("vscode"), state=AppState.QUEUED, parameters={"folder": ""})
    cwd = tmp_path / "cwd.py"
    cwd.write_text("import os\nprint(os.getcwd())\n")
    settings.APPS_PYTHON, settings.APPS_RUNNER = sys.executable, str(cwd)
    home = tmp_path / "home"
    home.mkdir()
    _, script = _script(app)
    ran = subprocess.run(["bash"], input=script, text=True, capture_output=True, check=True, cwd=tmp_path,
                         env={"HOME": str(home), "PATH": "/usr/bin:/bin"})
    assert ran.stdout.splitlines()[-1] == str(home)


def test_a_multiline_command_stays_inside_its_quotes(tmp_path, settings):
    multiline = "echo one\n#SBATCH --uid=0\n'\nexit 3"
    app = _app(type=_type("web-app"), state=AppState.QUEUED,
               parameters={"command": multiline, "folder": None})
    argv = tmp_path / "argv.py"
    argv.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    settings.APPS_PYTHON, settings.APPS_RUNNER = sys.executable, str(argv)
    command, script = _script(app)
    # sbatch reads #SBATCH lines only up to the first command: the user's lies inside a quoted word
    # after it, where it is no directive.
    lines = script.splitlines()
    first_command = next(n for n, line in enumerate(lines[1:], 1) if not line.startswith("#SBATCH"))
    assert lines[first_command] == "set -uo pipefail" and first_command == 11
    assert all("uid" not in line for line in lines[:first_command])
    assert lines.index("#SBATCH --uid=0") > first_command + 1
    ran = subprocess.run(["bash"], input=script, text=True, capture_output=True, check=True, cwd=tmp_path)
    assert json.loads(ran.stdout.splitlines()[-1]) == ["serve", "--", "bash", "-c", command]
    assert shlex.split(command.splitlines()[1] + "\n" + "\n".join(command.splitlines()[2:])) == [
        "exec", "bash", "-c", multiline]


def test_the_secret_goes_in_sbatchs_environment_as_its_hash_only(settings):
    settings.PORTAL_URL_FOR_JOBS = "http://portal.test:8000/"
    settings.APPS_START_TIMEOUT_SECONDS = 90
    app = _app(state=AppState.QUEUED)
    _, script = _script(app)
    environment = app_job_environment(app=app)
    digest = hashlib.sha256(app.secret.encode()).hexdigest()
    assert environment == {"GPUPORTAL_APP_SECRET_SHA256": digest,
                           "GPUPORTAL_REPORT_TOKEN": report_token("app", app.pk),
                           "GPUPORTAL_URL": "http://portal.test:8000", "GPUPORTAL_APP_READY_TIMEOUT": "90"}
    assert app.secret not in json.dumps(environment)
    for value in (app.secret, digest, environment["GPUPORTAL_REPORT_TOKEN"], "GPUPORTAL_APP_SECRET_SHA256"):
        assert value not in script


# --- the runner's report ---

def _report(app, body):
    return APIClient().post(REPORTS, body, format="json",
                            HTTP_AUTHORIZATION=f"Report {report_token('app', app.pk)}")


def test_ready_with_a_port_records_it_once(django_capture_on_commit_callbacks):
    app = _app(state=AppState.STARTING, port=None, host="")
    with django_capture_on_commit_callbacks() as callbacks:
        response = _report(app, {"event": "ready", "port": 40123})
    assert response.status_code == 202 and response.json() == {"applied": True}, response.json()
    # An early poll cycle is asked for (besides the owner's live version, portal.core.versions).
    assert [callback.__name__ for callback in callbacks].count("_poll_soon") == 1
    app.refresh_from_db()
    assert app.port == 40123 and app.answered_at is not None
    assert app.host == "" and app.state == AppState.STARTING  # where: Slurm's snapshot says, not the job
    again = _report(app, {"event": "ready", "port": 40124})
    assert again.status_code == 202 and again.json() == {"applied": False}
    app.refresh_from_db()
    assert app.port == 40123


@pytest.mark.parametrize("body", [
    {"event": "ready", "port": 80}, {"event": "ready", "port": 1023}, {"event": "ready", "port": 65536},
    {"event": "ready", "port": "x"}, {"event": "ready", "port": 40000, "node": "evil.example"},
])
def test_a_port_outside_1024_to_65535_is_a_400(body):
    app = _app(state=AppState.STARTING, port=None, host="")
    response = _report(app, body)
    assert response.status_code == 400, response.json()
    app.refresh_from_db()
    assert app.port is None


def test_an_app_whose_sbatch_answer_is_late_still_records_its_port():
    """The runner reports once; the job id may come a cycle later (an sbatch that timed out)."""
    not_in_slurm = _app(state=AppState.QUEUED, port=None, host="", slurm_job_id="",
                        parameters={"logdir": "/data"})
    assert _report(not_in_slurm, {"event": "ready", "port": 40000}).json() == {"applied": True}
    not_in_slurm.refresh_from_db()
    assert (not_in_slurm.port, not_in_slurm.host, not_in_slurm.state) == (40000, "", AppState.QUEUED)


def test_a_report_that_does_not_apply_changes_nothing():
    ended = _app(state=AppState.ENDED, port=None, host="")
    assert _report(ended, {"event": "ready", "port": 40000}).json() == {"applied": False}
    starting = _app(state=AppState.STARTING, port=None, host="", parameters={"logdir": f"{HOME}/x"})
    assert _report(starting, {"event": "ready"}).json() == {"applied": False}
    # A job's token is not an app's.
    response = APIClient().post(REPORTS, {"event": "ready", "port": 40000}, format="json",
                                HTTP_AUTHORIZATION=f"Report {report_token('job', starting.pk)}")
    assert response.status_code == 400 or response.json() == {"applied": False}, response.json()
    for app in (ended, starting):
        app.refresh_from_db()
        assert app.port is None


# --- following from Slurm's snapshot ---

def _snapshot(app, state="RUNNING", nodes="gpu[03-05],cpu1", reason=""):
    PollStatus.objects.update_or_create(pk=1, defaults={"refreshed_at": timezone.now(),
                                                        "checked_at": timezone.now()})
    if state is not None:
        SlurmJob.objects.update_or_create(job_id=app.slurm_job_id, defaults={
            "user": app.user.username, "partition": "gpu", "state": state, "nodes": nodes, "reason": reason,
            "start_time": timezone.now() - timedelta(seconds=10), "comment": app.slurm_comment})


def test_an_answered_app_is_ready_on_the_snapshots_first_node_never_a_logs_host(logs, scancel):
    logs["stderr"] = "listening on http://evil.example:8000/\nhost=evil.example port=22\n"
    app = _app(state=AppState.STARTING, port=40123, host="", ready_at=None, last_access=None)
    _snapshot(app)
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.READY and app.host == "gpu03" and app.port == 40123
    assert app.ready_at is not None and app.started_at is not None and app.reason == ""
    assert scancel.cancelled == []


def test_a_running_app_that_did_not_answer_is_starting_and_a_pending_one_queued(logs):
    app = _app(state=AppState.QUEUED, port=None, host="", ready_at=None)
    _snapshot(app, state="PENDING", nodes="", reason="Resources")
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.QUEUED and "Resources" in app.reason
    _snapshot(app)
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.STARTING and app.host == "" and app.started_at is not None
    # Answered, but the snapshot names no node: not ready yet.
    App.objects.filter(pk=app.pk).update(port=40123)
    _snapshot(app, nodes="")
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.STARTING and app.host == ""


def test_an_app_whose_job_is_gone_ends_with_its_logs_tail(logs):
    logs["stderr"] = ("".join(f"line {n}\n" for n in range(40))
                      + "tensorboard: error: unrecognized arguments\n")
    app = _app(state=AppState.STARTING, port=None, host="", ready_at=None)
    _snapshot(app, state=None)  # a snapshot after its sbatch, without it
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.ENDED and app.ended_at is not None
    assert app.reason.startswith("TensorBoard ended before it was ready (Slurm job gone). Its log ends:\n")
    assert app.reason.endswith("tensorboard: error: unrecognized arguments") and "line 20" not in app.reason


def test_a_ready_app_whose_job_ended_says_so_and_one_without_a_log_says_that(logs):
    ready = _app()
    _snapshot(ready, state="TIMEOUT")
    silent = _app(state=AppState.STARTING, port=None, host="", slurm_job_id="779", ready_at=None,
                  parameters={"logdir": f"{HOME}/x"})
    _snapshot(silent, state="FAILED")
    apps_follow()
    ready.refresh_from_db()
    silent.refresh_from_db()
    assert ready.state == AppState.ENDED and ready.reason == "Reached its time limit (480 minutes)."
    assert silent.state == AppState.ENDED and silent.reason.endswith("It left no log.")


def test_a_snapshot_older_than_the_sbatch_changes_nothing(logs):
    app = _app(state=AppState.QUEUED, port=None, host="", submitted_at=timezone.now() + timedelta(minutes=1))
    _snapshot(app, state=None)
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.QUEUED


def test_an_unused_app_is_stopped_after_its_idle_minutes(logs, scancel):
    app = _app(idle_minutes=30, last_access=timezone.now() - timedelta(minutes=31))
    used = _app(idle_minutes=30, last_access=timezone.now() - timedelta(minutes=5), slurm_job_id="780",
                parameters={"logdir": f"{HOME}/x"})
    _snapshot(app)
    _snapshot(used)
    apps_follow()
    app.refresh_from_db()
    used.refresh_from_db()
    assert app.state == AppState.ENDED and app.reason == "Stopped after 30 minutes without use."
    assert used.state == AppState.READY
    assert scancel.cancelled == [("777", "alice")]


def test_an_app_that_never_answers_is_stopped_with_its_logs_tail(logs, scancel, settings):
    settings.APPS_START_TIMEOUT_SECONDS = 3
    logs["stdout"] = "loading...\n"
    app = _app(state=AppState.STARTING, port=None, host="", ready_at=None,
               started_at=timezone.now() - timedelta(seconds=10))
    _snapshot(app)
    apps_follow()
    app.refresh_from_db()
    assert app.state == AppState.ENDED
    assert app.reason == "TensorBoard did not answer within 3 s. Its log ends:\nloading..."
    assert scancel.cancelled == [("777", "alice")]
