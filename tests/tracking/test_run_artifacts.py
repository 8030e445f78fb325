"""A run's artifact files, listed through the job-files helper as the run's owner (sudo, as the job
log view reads), never as root: the helper's `list` itself, then GET /api/v1/runs/{id}/artifacts/.

The helper runs from this tree (deploy/libexec/job-files), as the real alice, through sudo as the
portal runs it; scripts/install.sh installs the same file as /usr/local/libexec/gpuportal/job-files."""

import json
import os
import pwd
import shutil
import subprocess
import uuid
from pathlib import Path
from urllib.parse import urlencode

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.tracking.services import experiment_create, run_create
from tests.factories import UserFactory

HELPER = Path(__file__).resolve().parents[2] / "deploy" / "libexec" / "job-files"
ALICE = Path("/home/alice")

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or not ALICE.is_dir(),
                                reason="needs root and the bed's alice (a Unix account with a home)")


def _as_alice(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["/usr/sbin/runuser", "-u", "alice", "--", *argv], capture_output=True, timeout=30,
                          check=False, cwd="/", **kwargs)


@pytest.fixture
def folder():
    """A folder of alice's own, made by alice, removed afterwards."""
    path = ALICE / "gpuportal" / f"test-artifacts-{uuid.uuid4().hex[:8]}"
    assert _as_alice("mkdir", "-p", str(path)).returncode == 0
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _alice_writes(folder: Path, name: str, data: str) -> None:
    target = folder / name
    assert _as_alice("mkdir", "-p", str(target.parent)).returncode == 0
    assert _as_alice("sh", "-c", 'cat > "$1"', "sh", str(target), input=data.encode()).returncode == 0


def _link(link: Path, target: str) -> None:
    link.symlink_to(target)
    os.lchown(link, pwd.getpwnam("alice").pw_uid, -1)


def test_the_helper_lists_names_and_sizes_without_following_links(folder):
    _alice_writes(folder, "model/weights.bin", "12345")
    _alice_writes(folder, "notes.txt", "hi\n")
    _link(folder / "passwd", "/etc/passwd")
    _link(folder / "etc", "/etc")
    done = _as_alice(str(HELPER), "list", str(folder), "100")
    assert done.returncode == 0, done.stderr
    header, document = done.stdout.split(b"\n", 1)
    assert header == b"files"
    assert json.loads(document) == {"files": [["model/weights.bin", 5], ["notes.txt", 3]], "truncated": False}
    assert json.loads(_as_alice(str(HELPER), "list", str(folder), "1").stdout.split(b"\n", 1)[1]) == \
        {"files": [["model/weights.bin", 5]], "truncated": True}
    assert _as_alice(str(HELPER), "list", str(folder / "none"), "1").stdout == b"absent\n"


@pytest.mark.parametrize("where", ["/etc", "/home/bob", "{folder}/../..", "{folder}/", "relative",
                                   "{folder}/link"])
def test_the_helper_lists_only_folders_of_the_callers_home_reached_without_links(folder, where):
    _link(folder / "link", "/etc")
    done = _as_alice(str(HELPER), "list", where.format(folder=folder), "10")
    assert done.returncode in (2, 3) and done.stdout == b"", done
    assert done.stderr.startswith((b"job-files: usage:", b"job-files: unsafe:"))


@pytest.fixture
def alice_api(db, settings, folder, monkeypatch):
    """alice's API client; her runs' artifacts under `folder`; the portal's sudo runs this tree's helper."""
    monkeypatch.setattr("slurm.user_files.JOB_FILES", HELPER)
    settings.TRACKING_ARTIFACT_ROOT = f"{{home}}/{folder.relative_to(ALICE)}"
    user = UserFactory(username="alice", home_directory=str(ALICE))
    _, key = api_token_create(user=user, name="artifacts")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    experiment = experiment_create(user=user, name="artifacts")
    return client, run_create(user=user, experiment_id=experiment.pk, start_time=1, run_name="r", tags=[])


def test_a_runs_artifacts_listed_as_its_owner(alice_api, folder):
    client, run = alice_api
    url = f"/api/v1/runs/{run.run_id}/artifacts/"
    empty = client.get(url).json()
    assert empty["exists"] is False and empty["files"] == [] and empty["artifact_uri"] == run.artifact_uri
    artifacts = Path(run.artifact_uri.removeprefix("file://"))
    _alice_writes(artifacts, "notes.txt", "trained\n")
    _alice_writes(artifacts, "plots/loss.png", "png")
    answer = client.get(url)
    assert answer.status_code == 200, answer.content
    assert answer.json()["files"] == [{"path": "notes.txt", "size": 8}, {"path": "plots/loss.png", "size": 3}]

    _, key = api_token_create(user=UserFactory(username="bob"), name="peek")
    bob = APIClient()
    bob.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert bob.get(url).status_code == 404


def test_a_folder_reached_through_a_link_is_refused(alice_api, folder):
    client, run = alice_api
    experiment_dir = Path(run.artifact_uri.removeprefix("file://")).parents[1]
    assert _as_alice("mkdir", "-p", str(experiment_dir)).returncode == 0
    _link(experiment_dir / run.run_id, "/etc")
    answer = client.get(f"/api/v1/runs/{run.run_id}/artifacts/")
    assert answer.status_code == 409 and answer.json()["code"] == "artifacts_unlistable"


def test_a_runs_page_lists_its_artifacts(alice_api, client):
    _, run = alice_api
    _alice_writes(Path(run.artifact_uri.removeprefix("file://")), "notes.txt", "trained\n")
    client.force_login(run.owner)
    page = client.get(f"/tracking/runs/compare/?runs={run.run_id}").content.decode()
    assert 'id="artifacts"' in page and "<code>notes.txt</code>" in page and "8\xa0bytes" in page
    # "Open in Files" at the artifacts' folder, relative to alice's home (#37).
    folder = Path(run.artifact_uri.removeprefix("file://")).relative_to(ALICE)
    link = f'href="/files/?{urlencode({"root": "home", "path": str(folder)}).replace("&", "&amp;")}"'
    assert f'{link} id="artifacts-in-files"' in page
