"""TensorBoard and training metrics without the cluster: folder checks, starting TensorBoard (a web
app of type `tensorboard`) on a folder, a job or a session through /api/v1/tensorboards/ and the
pages, reuse and the per-user limit, who may see and stop what, the script's quoting, the metrics
file's checks, the exporter on real event files."""

import json
import pwd
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from portal.core.errors import InvalidInput
from portal.core.paths import MAX_LENGTH, UserRoots, path_validate
from portal.jobs.models import JobMetric
from portal.jobs.selectors import job_metrics_chart
from portal.jobs.services.metrics import MetricsInvalid, metrics_parse
from portal.webapps.catalog import command_render
from portal.webapps.models import App, AppState, AppType
from portal.webapps.script import app_script
from slurm.adapter import Slurm
from tests.factories import AppFactory, JobFactory, UserFactory
from tests.sessions.factories import SessionFactory

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = ROOT / "templates/jobs/_common/metrics_export.py"
HOME, DATA = "/home/alice", "/data"
ROOTS = UserRoots(home=HOME, data=DATA)
API = "/api/v1/tensorboards/"


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


def _client(username, **fields):
    client = Client()
    client.force_login(UserFactory(username=username, **fields))
    return client


def _board(**fields):
    defaults = {"user": UserFactory(username="alice"), "state": AppState.READY, "host": "vm", "port": 43123,
                "slurm_job_id": "777", "ready_at": timezone.now()}
    return AppFactory(**{**defaults, **fields})


# --- which folders ---

@pytest.mark.parametrize("value", [
    "/home/alice", "/home/alice/logs", "/home/alice/logs/jobs/x y", "/data", "/data/runs/mnist",
    "/home/alice/with:colon,comma", "/home/alice/ünïcode",
])
def test_folders_under_home_or_the_data_mount_are_accepted(value):
    assert path_validate(field="logdir", value=value, roots=ROOTS) == value


@pytest.mark.parametrize("value", [
    "", None, 5, ["/home/alice"], "logs", "~/logs", "./logs", "/etc", "/", "/home", "/home/bob",
    "/home/bob/logs", "/home/alice2", "/home/alice/../bob", "/home/alice/logs/..", "/home/alice/./logs",
    "/home/alice//logs", "/home/alice/logs/", "//home/alice", "/data2", "/datax/y",
    "/home/alice/a\nb", "/home/alice/a\x00b", "/home/alice/\x1b[31m", "/home/alice/\u202etxt",
    "/home/alice/" + "x" * MAX_LENGTH,
])
def test_other_folders_are_refused_naming_logdir(value):
    with pytest.raises(InvalidInput) as refused:
        path_validate(field="logdir", value=value, roots=ROOTS)
    assert list(refused.value.fields) == ["logdir"]


def test_a_sites_scratch_is_one_of_the_users_folders(settings):
    from portal.core.paths import user_roots

    settings.SCRATCH_DIR = "/scratch/{username}"
    roots = user_roots(home=HOME, username="alice")
    assert path_validate(field="logdir", value="/scratch/alice/runs", roots=roots) == "/scratch/alice/runs"
    with pytest.raises(InvalidInput) as refused:
        path_validate(field="logdir", value="/scratch/bob", roots=roots)
    assert "your scratch (/scratch/alice)" in refused.value.fields["logdir"][0]




# --- starting: input checks before anything reaches Slurm ---

@pytest.mark.usefixtures("app_types")
@pytest.mark.parametrize("body", [
    {"logdir": "/etc"}, {"logdir": "/home/bob/logs"}, {"logdir": "logs"}, {"logdir": "/home/alice/../bob"},
    {"logdir": "/home/alice/a\u0007b"}, {"logdir": "/home/alice/" + "y" * 5000}, {"logdir": ""},
    {"logdir": 7},
])
def test_a_folder_you_may_not_open_is_a_400_naming_logdir(token_client, body):
    response = token_client.post(API, body, format="json")
    assert response.status_code == 400, response.json()
    assert "logdir" in response.json()["fields"], response.json()
    assert not App.objects.exists()


@pytest.mark.usefixtures("app_types")
@pytest.mark.parametrize(("body", "field"), [
    ({}, "non_field_errors"), ({"logdir": "/home/alice", "job": 1}, "non_field_errors"),
    ({"job": 999999}, "job"), ({"job": "x"}, "job"), ({"session": "nope"}, "session"),
])
def test_exactly_one_source_of_yours(token_client, body, field):
    response = token_client.post(API, body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"], response.json()
    assert not App.objects.exists()


@pytest.mark.usefixtures("app_types")
def test_another_users_job_or_session_is_not_a_source(token_client):
    bob = UserFactory(username="bob")
    job = JobFactory(user=bob)
    SessionFactory(user=bob, name="bobs")
    response = token_client.post(API, {"job": job.pk}, format="json")
    assert response.status_code == 400 and "job" in response.json()["fields"]
    response = token_client.post(API, {"session": "bobs"}, format="json")
    assert response.status_code == 400 and "session" in response.json()["fields"]
    assert not App.objects.exists()


# --- starting: saved only, in this API's shape; reuse and the limit ---

@pytest.mark.usefixtures("app_types")
def test_a_start_on_a_folder_saves_it_only_in_this_apis_shape(token_client):
    home = pwd.getpwnam("alice").pw_dir
    response = token_client.post(API, {"logdir": f"{home}/logs"}, format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    # Saved only: no sbatch in the request (tests/conftest.py fails any), its worker does that.
    assert body["state"] == "queued" and body["slurm_job_id"] == "" and body["host"] == ""
    assert body["logdir"] == f"{home}/logs" and body["owner"] == "alice"
    assert body["url"] == f"/apps/{body['id']}/open/" and body["job"] is None and body["session"] is None
    assert set(body) == {"id", "uuid", "owner", "logdir", "job", "session", "state", "reason", "slurm_job_id",
                         "host", "port", "created_at", "submitted_at", "started_at", "ready_at", "ended_at",
                         "last_access", "url"}
    app = App.objects.get(pk=body["id"])
    assert app.type.slug == "tensorboard" and app.parameters == {"logdir": f"{home}/logs"}
    # The same app under /api/v1/apps/, same id.
    same = token_client.get(f"/api/v1/apps/{app.pk}/").json()
    assert same["type"] == "tensorboard" and same["parameters"] == {"logdir": f"{home}/logs"}


@pytest.mark.usefixtures("app_types")
def test_a_start_on_a_job_or_a_session_opens_its_log_folder(token_client, user):
    home = pwd.getpwnam("alice").pw_dir
    job = JobFactory(user=user)
    SessionFactory(user=user, name="mine")
    from_job = token_client.post(API, {"job": job.pk}, format="json")
    assert from_job.status_code == 201, from_job.json()
    assert from_job.json()["logdir"] == f"{home}/logs/jobs/{job.uuid}" and from_job.json()["job"] == job.pk
    from_session = token_client.post(API, {"session": "mine"}, format="json")
    assert from_session.status_code == 201, from_session.json()
    assert from_session.json()["logdir"] == f"{home}/logs" and from_session.json()["session"] == "mine"


@pytest.mark.usefixtures("app_types")
def test_an_active_one_on_the_same_folder_is_reused(token_client, user):
    home = pwd.getpwnam("alice").pw_dir
    first = token_client.post(API, {"logdir": f"{home}/logs"}, format="json").json()
    again = token_client.post(API, {"logdir": f"{home}/logs"}, format="json")
    assert again.status_code == 200 and again.json()["id"] == first["id"]
    # The session's folder is the same folder: the same one.
    SessionFactory(user=user, name="mine")
    session = token_client.post(API, {"session": "mine"}, format="json")
    assert session.status_code == 200 and session.json()["id"] == first["id"]
    # As the tensorboard app of /api/v1/apps/ too.
    apps = token_client.post("/api/v1/apps/", {"type": "tensorboard", "parameters": {"logdir": "logs"}},
                             format="json")
    assert apps.status_code == 200 and apps.json()["id"] == first["id"]
    # An ended one is not reused.
    App.objects.filter(pk=first["id"]).update(state=AppState.ENDED)
    fresh = token_client.post(API, {"logdir": f"{home}/logs"}, format="json")
    assert fresh.status_code == 201 and fresh.json()["id"] != first["id"]
    assert App.objects.count() == 2


@pytest.mark.usefixtures("app_types")
def test_the_per_user_limit_counts_every_active_app(token_client, settings):
    settings.APPS_MAX_PER_USER = 2
    home = pwd.getpwnam("alice").pw_dir
    AppFactory(user=UserFactory(username="alice"), parameters={"logdir": f"{home}/a"}, state=AppState.READY)
    AppFactory(user=UserFactory(username="bob"), parameters={"logdir": "/home/bob"}, state=AppState.READY)
    assert token_client.post(API, {"logdir": f"{home}/b"}, format="json").status_code == 201
    refused = token_client.post(API, {"logdir": f"{home}/c"}, format="json")
    assert refused.status_code == 409 and refused.json()["code"] == "app_limit", refused.json()
    # Reuse is not a new app: allowed at the limit.
    assert token_client.post(API, {"logdir": f"{home}/a"}, format="json").status_code == 200
    assert App.objects.filter(user__username="alice").count() == 2


# --- who sees and stops what ---

@pytest.mark.django_db
def test_another_users_tensorboard_does_not_exist_for_bob():
    board = _board()
    bob = _client("bob")
    for url in (f"{API}{board.pk}/", f"/apps/{board.pk}/", f"/apps/{board.pk}/open/",
                f"/api/v1/apps/{board.pk}/"):
        assert bob.get(url).status_code == 404, url
    assert bob.delete(f"{API}{board.pk}/").status_code == 404
    assert bob.post(f"/apps/{board.pk}/stop/").status_code == 404
    assert bob.get(API).json() == []
    board.refresh_from_db()
    assert board.state == AppState.READY


@pytest.mark.django_db
def test_the_list_is_your_own_and_admins_see_and_stop_every_one(scancel):
    board = _board()
    bobs = _board(user=UserFactory(username="bob"), parameters={"logdir": "/home/bob/logs"},
                  slurm_job_id="778")
    alice = _client("alice")
    assert [item["id"] for item in alice.get(API).json()] == [board.pk]
    ada = _client("ada", is_staff=True)
    assert {item["id"] for item in ada.get(API).json()} == {board.pk, bobs.pk}
    assert ada.get(f"{API}{board.pk}/").json()["owner"] == "alice"
    assert ada.get(f"/apps/{board.pk}/").status_code == 200
    assert ada.get(f"/apps/{board.pk}/open/").status_code == 404  # an admin never opens somebody's app
    stopped = ada.delete(f"{API}{board.pk}/")
    assert stopped.status_code == 200, stopped.json()
    assert stopped.json()["state"] == "ended"
    assert stopped.json()["reason"] == "Stopped by an administrator (ada)."
    assert scancel.cancelled == [("777", "alice")]  # as its owner


@pytest.mark.django_db
def test_delete_ends_it_with_scancel_as_its_owner_and_again_changes_nothing(token_client, scancel):
    board = _board()
    response = token_client.delete(f"{API}{board.pk}/")
    assert response.status_code == 200
    assert response.json()["state"] == "ended" and response.json()["reason"] == "Stopped by you."
    assert scancel.cancelled == [("777", "alice")]
    again = token_client.delete(f"{API}{board.pk}/")
    assert again.status_code == 200 and again.json()["reason"] == "Stopped by you."
    assert scancel.cancelled == [("777", "alice")]  # an ended one is not cancelled twice
    board.refresh_from_db()
    assert board.state == AppState.ENDED and board.ended_at is not None


@pytest.mark.usefixtures("app_types")
def test_another_types_app_is_not_a_tensorboard(token_client):
    other = AppFactory(user=UserFactory(username="alice"), type=AppType.objects.get(slug="vscode"),
                       parameters={"folder": HOME}, state=AppState.READY)
    assert token_client.get(f"{API}{other.pk}/").status_code == 404
    assert token_client.get(API).json() == []


# --- the pages ---

@pytest.mark.django_db
def test_the_old_page_redirects_to_the_apps():
    response = _client("alice").get("/tensorboards/")
    assert response.status_code in (301, 302) and response["Location"] == "/apps/"


@pytest.mark.usefixtures("app_types")
def test_open_tensorboard_from_a_jobs_page_goes_to_the_apps_page_and_errors_are_messages(user):
    job = JobFactory(user=user)
    alice = Client()
    alice.force_login(user)
    response = alice.post("/tensorboards/open/", {"job": job.pk})
    app = App.objects.get(job=job)
    assert response.status_code == 302 and response["Location"] == f"/apps/{app.pk}/"
    assert app.parameters == {"logdir": f"{pwd.getpwnam('alice').pw_dir}/logs/jobs/{job.uuid}"}
    refused = alice.post("/tensorboards/open/", {"logdir": "/etc"}, follow=True)
    assert refused.redirect_chain[-1][0] == "/apps/"
    assert "logdir:" in refused.content.decode()
    assert alice.get("/tensorboards/open/").status_code == 405
    assert App.objects.count() == 1


# --- the script ---

@pytest.mark.django_db
def test_the_script_quotes_the_folder_and_runs_tensorboard_under_the_runner(settings, tmp_path):
    settings.TENSORBOARD_COMMAND = "'/opt/tb env/bin/tensorboard' --load_fast=false"  # split like a shell
    hostile = "/home/alice/it's $(id) `x`; rm -rf ~"
    board = _board(parameters={"logdir": hostile}, state=AppState.QUEUED)
    command = command_render(app_type=board.type, values=board.parameters)
    assert shlex.split(command) == ["exec", "/opt/tb env/bin/tensorboard", "--load_fast=false", "--logdir",
                                    hostile, "--host", "127.0.0.1", "--port", "$PORT"]
    script = app_script(app=board, command=command, output_dir="/home/alice/gpuportal/jobs", environment=None)
    assert f" serve -- bash -c {shlex.quote(command)}\n" in script
    assert "--bind_all" not in script and "path_prefix" not in script
    assert f"#SBATCH --error=/home/alice/gpuportal/jobs/job-{board.uuid}.err" in script
    assert f"#SBATCH --comment=gpuportal-app:{board.uuid}" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)
    # Run as bash would: the runner gets the command as one word.
    argv = tmp_path / "argv.py"
    argv.write_text("import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    settings.APPS_PYTHON, settings.APPS_RUNNER = sys.executable, str(argv)
    script = app_script(app=board, command=command, output_dir="/home/alice/gpuportal/jobs", environment=None)
    ran = subprocess.run(["bash"], input=script, text=True, capture_output=True, check=True)
    assert json.loads(ran.stdout.splitlines()[-1]) == ["serve", "--", "bash", "-c", command]


# --- the metrics file ---

def test_a_metrics_file_is_checked_like_any_input():
    good = {"version": 1, "series": [{"run": "smoke", "tag": "train/loss", "steps": [0, 1],
                                      "values": [1.5, None]}]}
    [series] = metrics_parse(json.dumps(good).encode())
    assert (series.run, series.tag, series.steps) == ("smoke", "train/loss", [0, 1])
    assert series.values == [1.5, None]
    bad = [b"not json", b"[]", b'{"series": {}}',
           b'{"series": [{"run": "", "tag": "", "steps": [], "values": []}]}',
           b'{"series": [{"run": "", "tag": "t", "steps": [1], "values": []}]}',
           b'{"series": [{"run": "", "tag": "t", "steps": [1], "values": [NaN]}]}',
           b'{"series": [{"run": "", "tag": "t", "steps": [-1], "values": [1]}]}',
           b'{"series": [{"run": "", "tag": "t", "steps": [true], "values": [1]}]}',
           json.dumps({"series": [{"run": "", "tag": "t", "steps": list(range(2000)),
                                   "values": [1.0] * 2000}]}).encode(),
           b"[" * 100000]
    for data in bad:
        with pytest.raises(MetricsInvalid):
            metrics_parse(data)


def test_the_exporter_reads_events_with_tensorboards_own_reader(tmp_path):
    from tensorboard.summary import Writer

    writer = Writer(str(tmp_path / "logs" / "run1"))
    for step in range(1500):
        writer.add_scalar("loss", 1 / (step + 1), step)
    writer.add_scalar("accuracy", 0.9, 7)
    writer.close()
    output = tmp_path / "metrics.json"
    subprocess.run([sys.executable, str(EXPORTER), str(tmp_path / "logs"), str(output)], check=True)
    series = {item.tag: item for item in metrics_parse(output.read_bytes())}
    assert set(series) == {"loss", "accuracy"} and series["loss"].run == "run1"
    assert len(series["loss"].steps) == 500 and series["loss"].steps[-1] == 1499
    assert series["loss"].values[-1] == pytest.approx(1 / 1500)
    assert (series["accuracy"].steps, series["accuracy"].values) == ([7], [pytest.approx(0.9)])
    # No events, no folder: no file, and no error.
    (tmp_path / "empty").mkdir()
    for folder in ("empty", "missing"):
        subprocess.run([sys.executable, str(EXPORTER), str(tmp_path / folder), str(tmp_path / "x.json")],
                       check=True)
    assert not (tmp_path / "x.json").exists()


def test_the_exporter_is_included_verbatim_in_job_scripts():
    text = EXPORTER.read_text()
    assert not any(marker in text for marker in ("{{", "{%", "{#")), "Jinja would read it as a template"


@pytest.mark.django_db
def test_metrics_api_and_chart_are_for_the_owner_and_admins(token_client):
    job = JobFactory(user=UserFactory(username="alice"))
    JobMetric.objects.create(job=job, run="smoke", tag="train/loss", steps=[0, 1, 2], values=[3.0, None, 1.0],
                             final_step=2, final_value=1.0)
    body = token_client.get(f"/api/v1/jobs/{job.pk}/metrics/").json()
    assert body == {"job": job.pk, "series": [{
        "run": "smoke", "tag": "train/loss", "steps": [0, 1, 2], "values": [3.0, None, 1.0], "final_step": 2,
        "final_value": 1.0}]}
    bob = Client()
    bob.force_login(UserFactory(username="bob"))
    assert bob.get(f"/api/v1/jobs/{job.pk}/metrics/").status_code == 404
    spec = job_metrics_chart(metrics=list(job.metrics.all()))
    assert [row["value"] for row in spec["data"]["values"]] == [3.0, 1.0]
    assert job_metrics_chart(metrics=[]) is None
    alice = Client()
    alice.force_login(job.user)
    page = alice.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="metrics-chart"' in page and "train/loss" in page and 'id="tensorboard-button"' in page


@pytest.mark.django_db
def test_a_sessions_card_has_open_tensorboard(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # no hub needed for the card
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    server = SessionFactory(user=UserFactory(username="alice"), name="mine")
    client = Client()
    client.force_login(server.user)
    page = client.get("/servers/").content.decode()
    assert 'id="tensorboard-mine"' in page and 'name="session" value="mine"' in page
