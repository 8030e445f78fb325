"""TensorBoard and training metrics without the cluster: folder checks, the startup line and the
address it may name, the proxy's one target, the script's quoting, the metrics file's checks, the
exporter on real event files, and who may see what."""

import json
import shlex
import subprocess
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from django.test import Client
from django.utils import timezone

from portal.core.errors import Conflict, InvalidInput
from portal.core.paths import MAX_LENGTH, UserRoots, path_validate
from portal.jobs.models import JobMetric
from portal.jobs.selectors import job_metrics_chart
from portal.jobs.services.metrics import MetricsInvalid, metrics_parse
from portal.tensorboards.models import TensorBoard, TensorBoardState
from portal.tensorboards.proxy import proxy_url
from portal.tensorboards.script import tensorboard_script
from portal.tensorboards.startup import AddressRefused, startup_address
from tests.factories import JobFactory, UserFactory
from tests.servers.factories import NotebookServerFactory

ROOT = Path(__file__).resolve().parents[2]
EXPORTER = ROOT / "templates/jobs/_common/metrics_export.py"
HOME, DATA = "/home/alice", "/data"
ROOTS = UserRoots(home=HOME, data=DATA)


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


# --- the startup line ---

LINE = "TensorBoard 2.21.0 at http://{host}:{port}/tensorboards/5/proxy/ (Press CTRL+C to quit)"


def test_the_startup_line_gives_the_node_and_port():
    log = "TensorFlow installation not found\n\n" + LINE.format(host="vm", port=43123) + "\n"
    address = startup_address(log, nodes=["vm"])
    assert (address.host, address.port) == ("vm", 43123)
    assert startup_address("TensorFlow installation not found\n", nodes=["vm"]) is None


@pytest.mark.parametrize(("host", "port"), [
    ("db.example.org", 5432), ("10.0.0.1", 8080), ("vm", 22), ("vm", 80), ("vm", 70000),
    ("user@vm", 8000), ("vm%2F", 8000), ("-vm", 8000),
])
def test_an_address_that_is_not_a_port_on_the_jobs_node_is_refused(host, port):
    with pytest.raises(AddressRefused):
        startup_address(LINE.format(host=host, port=port), nodes=["vm"])


def test_only_the_first_startup_line_counts():
    log = LINE.format(host="elsewhere", port=8000) + "\n" + LINE.format(host="vm", port=9000)
    with pytest.raises(AddressRefused):
        startup_address(log, nodes=["vm"])


# --- the proxy's target ---

def _board(**fields):
    defaults = {"user": UserFactory(username="alice"), "logdir": "/home/alice/logs",
                "state": TensorBoardState.READY, "host": "vm", "port": 43123}
    return TensorBoard.objects.create(**{**defaults, **fields})


@pytest.mark.django_db
def test_the_proxy_target_is_the_recorded_address_and_the_boards_own_prefix():
    board = _board()
    prefix = f"/tensorboards/{board.pk}/proxy"
    assert proxy_url(board=board, full_path=f"{prefix}/data/runs?x=1") == f"http://vm:43123{prefix}/data/runs?x=1"
    for path in ("http://evil:80/", "//evil/x", f"/tensorboards/{board.pk + 1}/proxy/", "/admin/"):
        with pytest.raises(ValueError):
            proxy_url(board=board, full_path=path)
    board.state = TensorBoardState.STARTING
    with pytest.raises(Conflict):
        proxy_url(board=board, full_path=f"{prefix}/")


class _Upstream(BaseHTTPRequestHandler):
    seen: list = []

    def do_GET(self):
        _Upstream.seen.append((self.path, dict(self.headers)))
        body = json.dumps({"path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Set-Cookie", "upstream=1")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def upstream():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _Upstream.seen = []
    yield server.server_address[1]
    server.shutdown()


@pytest.mark.django_db
def test_the_proxy_forwards_to_that_address_only_without_the_portals_credentials(upstream):
    board = _board(host="localhost", port=upstream)
    alice, bob = Client(), Client()
    alice.force_login(board.user)
    bob.force_login(UserFactory(username="bob"))
    prefix = f"/tensorboards/{board.pk}/proxy"
    response = alice.get(f"{prefix}/data/runs?x=http://evil/", HTTP_AUTHORIZATION="Token secret",
                         HTTP_X_FORWARDED_HOST="evil", HTTP_HOST="127.0.0.1")
    assert response.status_code == 200
    assert json.loads(b"".join(response.streaming_content)) == {"path": f"{prefix}/data/runs?x=http://evil/"}
    assert "Set-Cookie" not in response.headers or "upstream" not in response.headers["Set-Cookie"]
    _, headers = _Upstream.seen[-1]
    assert not {"Cookie", "Authorization", "X-Forwarded-Host", "X-Csrftoken"} & set(headers)
    board.refresh_from_db()
    assert board.last_access is not None
    # Somebody else's TensorBoard does not exist for bob: page, proxy and API alike.
    assert bob.get(f"/tensorboards/{board.pk}/").status_code == 404
    assert bob.get(f"{prefix}/data/runs").status_code == 404
    assert bob.get(f"/api/v1/tensorboards/{board.pk}/").status_code == 404
    assert bob.delete(f"/api/v1/tensorboards/{board.pk}/").status_code == 404
    assert bob.get("/api/v1/tensorboards/").json() == []
    assert len(_Upstream.seen) == 1
    # A cross-site POST is not forwarded; an anonymous request goes to the login page.
    assert alice.post(f"{prefix}/data/x", HTTP_ORIGIN="http://evil.example").status_code == 403
    assert Client().get(f"{prefix}/data/runs").status_code == 302


@pytest.mark.django_db
def test_admins_see_every_tensorboard():
    board = _board()
    ada = UserFactory(username="ada", is_staff=True)
    client = Client()
    client.force_login(ada)
    assert client.get(f"/api/v1/tensorboards/{board.pk}/").json()["owner"] == "alice"
    assert client.get(f"/tensorboards/{board.pk}/").status_code == 200


# --- starting: input checks before anything reaches Slurm ---

@pytest.mark.django_db
@pytest.mark.parametrize("body", [
    {"logdir": "/etc"}, {"logdir": "/home/bob/logs"}, {"logdir": "logs"}, {"logdir": "/home/alice/../bob"},
    {"logdir": "/home/alice/a\u0007b"}, {"logdir": "/home/alice/" + "y" * 5000}, {"logdir": ""},
    {"logdir": 7},
])
def test_a_folder_you_may_not_open_is_a_400_naming_logdir(token_client, body):
    response = token_client.post("/api/v1/tensorboards/", body, format="json")
    assert response.status_code == 400, response.json()
    assert "logdir" in response.json()["fields"]
    assert not TensorBoard.objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [
    ({}, "non_field_errors"), ({"logdir": "/home/alice", "job": 1}, "non_field_errors"),
    ({"job": 999999}, "job"), ({"job": "x"}, "job"), ({"session": "nope"}, "session"),
])
def test_exactly_one_source_of_yours(token_client, body, field):
    response = token_client.post("/api/v1/tensorboards/", body, format="json")
    assert response.status_code == 400 and field in response.json()["fields"], response.json()


@pytest.mark.django_db
def test_another_users_job_is_not_a_source(token_client):
    job = JobFactory(user=UserFactory(username="bob"))
    response = token_client.post("/api/v1/tensorboards/", {"job": job.pk}, format="json")
    assert response.status_code == 400 and "job" in response.json()["fields"]


# --- the script ---

@pytest.mark.django_db
def test_the_script_quotes_the_folder_and_listens_on_the_node_only(settings):
    settings.TENSORBOARD_COMMAND = "'/opt/tb env/bin/tensorboard' --load_fast=false"  # split like a shell
    board = _board(logdir="/home/alice/it's $(id) `x`; rm -rf ~", state=TensorBoardState.QUEUED)
    script = tensorboard_script(board=board, output_dir="/home/alice/gpuportal/jobs")
    assert f"--logdir {shlex.quote(board.logdir)} " in script
    assert "exec '/opt/tb env/bin/tensorboard' --load_fast=false --logdir" in script
    assert "--port 0" in script and "--bind_all" not in script
    assert f"--path_prefix /tensorboards/{board.pk}/proxy" in script
    assert f"#SBATCH --error=/home/alice/gpuportal/jobs/job-{board.uuid}.err" in script
    assert f"#SBATCH --comment=gpuportal-tensorboard:{board.uuid}" in script
    subprocess.run(["bash", "-n"], input=script, text=True, check=True)


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
def test_a_finished_board_is_not_proxied_and_stopping_it_again_changes_nothing(token_client):
    board = _board(user=UserFactory(username="alice"), state=TensorBoardState.ENDED, reason="Stopped by you.",
                   ended_at=timezone.now())
    response = token_client.delete(f"/api/v1/tensorboards/{board.pk}/")
    assert response.status_code == 200 and response.json()["reason"] == "Stopped by you."
    client = Client()
    client.force_login(board.user)
    assert client.get(f"/tensorboards/{board.pk}/proxy/").status_code == 409
    assert uuid.UUID(response.json()["uuid"]) == board.uuid


@pytest.mark.django_db
def test_a_sessions_card_has_open_tensorboard(settings):
    settings.JUPYTERHUB_API_URL = "http://127.0.0.1:9/hub/api"  # no hub needed for the card
    settings.JUPYTERHUB_TIMEOUT_SECONDS = 1
    server = NotebookServerFactory(user=UserFactory(username="alice"), name="mine")
    client = Client()
    client.force_login(server.user)
    page = client.get("/servers/").content.decode()
    assert 'id="tensorboard-mine"' in page and 'name="session" value="mine"' in page
