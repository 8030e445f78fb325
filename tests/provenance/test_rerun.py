"""Re-run exactly (issue 36): what a re-run's script does (scratch work tree with the recorded diff,
environment rebuilt from its lock, image by digest), the API's refusals (another user's job, an
incomplete record, changed or missing inputs checked as the user, a changed environment where the
site does not rebuild), rerun_of both ways, and a re-run's submit time against a plain submit's."""

import base64
import hashlib
import json
import pwd
import shutil
import statistics
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.containers.models import Image
from portal.core.errors import InvalidInput
from portal.environments.models import Environment
from portal.jobs.services.prepare import CodeTree, Pin, job_prepare
from portal.jobs.services.submission import job_create
from portal.provenance import rerun
from portal.provenance.models import Provenance
from tests.factories import UserFactory

ROOT = Path(__file__).resolve().parents[2]
REBUILD = ROOT / "templates/jobs/_common/env_rebuild.py"
pytestmark = pytest.mark.django_db


@pytest.fixture
def dispatched(monkeypatch):
    """The first sbatch is the jobs app's (tested there): here, which jobs were handed to it."""
    seen: list[int] = []
    monkeypatch.setattr(rerun, "job_submit_dispatch", lambda *, job: seen.append(job.pk))
    return seen


@pytest.fixture
def alices_data():
    """A file in alice's home, hers (the check reads it as her, through user-files)."""
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"rerun-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "data.bin").write_bytes(b"0123456789" * 1000)
    shutil.chown(folder, account.pw_uid, account.pw_gid)
    shutil.chown(folder / "data.bin", account.pw_uid, account.pw_gid)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _ran(user, folder: Path, **captured):
    """A pytorch-train job that ran and recorded itself: its data file as it is now."""
    data = (folder / "data.bin").read_bytes()
    relative = f"{folder.name}/data.bin"
    draft = job_prepare(user=user, template="pytorch-train", parameters={
        "entrypoint": f"{folder.name}/train.py", "data": relative, "environment": "", "time_limit": 5})
    job = job_create(user=user, draft=draft)
    record = {"code": [], "gpu": {"model": "none"}, "inputs": [
        {"path": relative, "kind": "file", "size": len(data), "mtime": 0,
         "sha256": hashlib.sha256(data).hexdigest(), "over_bound": False}], **captured}
    Provenance.objects.filter(job=job).update(captured=record, capture_state=Provenance.Capture.DONE)
    return job


def _client(username: str, **fields) -> APIClient:
    _, key = api_token_create(user=UserFactory(username=username, **fields), name="t")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


# --- what the re-run's script does ---

def test_a_rerun_checks_out_the_recorded_commit_and_diff_in_its_own_work_tree(user, partitions):
    home = pwd.getpwnam("alice").pw_dir
    tree = CodeTree(top=f"{home}/proj", commit="a" * 40, diff="--- a/train.py\n+++ b/train.py\n")
    draft = job_prepare(user=user, template="pytorch-train", parameters={
        "entrypoint": "proj/train.py", "data": "/data/mnist", "environment": "", "time_limit": 5},
        pin=Pin(code=(tree,)))
    scratch = f"{home}/gpuportal/jobs/job-{draft.uuid}/code/0"
    assert f"git -C {home}/proj worktree add --detach --quiet {scratch} {'a' * 40}" in draft.script
    assert base64.b64encode(tree.diff.encode()).decode() in draft.script
    assert f"proj/train.py) copy={scratch}/train.py ;;" in draft.script
    assert "ENTRYPOINT=$(gpuportal_path proj/train.py)" in draft.script
    assert "/data/mnist) copy" not in draft.script  # not in the work tree: the file itself
    assert "GPUPORTAL_RERUN=" in draft.script
    plain = job_prepare(user=user, template="pytorch-train", parameters={
        "entrypoint": "proj/train.py", "environment": "", "time_limit": 5})
    assert "worktree add" not in plain.script and "GPUPORTAL_RERUN=" not in plain.script


def test_the_script_runs_the_scratch_tree_and_records_it_by_the_original(tmp_path):
    """The prologue's steps as a plain process: the worktree, the diff applied, the record."""
    work = tmp_path / "proj"
    work.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(work)]
    (work / "train.py").write_text("print(1)\n")
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "train.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    (work / "train.py").write_text("print(2)\n")
    diff = subprocess.run([*git, "diff", "HEAD"], capture_output=True, check=True).stdout
    commit = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    (work / "train.py").write_text("print(3)\n")  # changed again since the run
    scratch = tmp_path / "job/code/0"
    scratch.parent.mkdir(parents=True)
    subprocess.run([*git, "worktree", "add", "--detach", "--quiet", str(scratch), commit], check=True)
    subprocess.run(["git", "-C", str(scratch), "apply"], input=diff, check=True)
    assert (scratch / "train.py").read_text() == "print(2)\n"
    out = tmp_path / "record.json"
    rerun_map = json.dumps({"paths": {"proj/train.py": f"{scratch}/train.py"},
                            "trees": {str(scratch): str(work)}})
    subprocess.run(["python3", "-I", "-", str(out), "proj/train.py"],
                   input=(ROOT / "templates/jobs/_common/provenance.py").read_bytes(), check=True,
                   env={"PATH": "/usr/bin:/bin", "GPUPORTAL_RERUN": rerun_map})
    record = json.loads(out.read_text())
    [code] = record["code"]
    assert (code["path"], code["worktree"], code["commit"]) == (str(work), str(scratch), commit)
    assert code["diff"] == diff.decode()
    [script] = record["inputs"]
    assert script["path"] == "proj/train.py"
    assert script["sha256"] == hashlib.sha256(b"print(2)\n").hexdigest() and script["tracked"]


def test_an_environment_is_rebuilt_from_its_lock_over_the_current_one(tmp_path):
    """The job's step (env_rebuild.py) with a small venv: the lock's mpmath shadows the newer one;
    a lock the rebuild cannot reach (a package the current one has and the lock lacks) fails."""
    base = tmp_path / "base"
    subprocess.run(["/usr/bin/python3", "-m", "venv", str(base)], check=True)
    pip = [str(base / "bin/pip"), "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "mpmath==1.3.0"], check=True, capture_output=True)
    lock = subprocess.run([str(base / "bin/pip"), "freeze", "--all"], capture_output=True, text=True,
                          check=True).stdout
    subprocess.run([*pip, "mpmath==1.4.1"], check=True, capture_output=True)
    target = tmp_path / "cache" / "h"
    subprocess.run(["/usr/bin/python3", "-I", str(REBUILD), str(base), str(target), lock], check=True)
    version = subprocess.run([str(target / "bin/python"), "-c", "import mpmath; print(mpmath.__version__)"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "1.3.0" and (target / ".gpuportal-lock").is_file()
    refused = subprocess.run(["/usr/bin/python3", "-I", str(REBUILD), str(base), str(tmp_path / "cache/x"),
                              lock.replace("mpmath==1.3.0\n", "")], capture_output=True, text=True)
    assert refused.returncode == 1 and "mpmath==1.4.1" in refused.stderr
    assert not (tmp_path / "cache/x").exists()


def test_a_rerun_rebuilds_an_environment_whose_lock_changed(user, partitions, tmp_path, settings):
    settings.ENVIRONMENTS_DIR = str(tmp_path)
    (tmp_path / "py").mkdir()
    Environment.objects.create(name="py", title="Py", kind="python", path=str(tmp_path / "py"), kernel="py",
                               healthy=True)
    draft = job_prepare(user=user, template="custom", parameters={
        "commands": "true", "gpus": 0, "time_limit": 5, "environment": "py"},
        pin=Pin(environment_lock="mpmath==1.3.0", environment_lock_sha256="f" * 64))
    assert f'/gpuportal/envs/"{"f" * 64}' in draft.script, draft.script[-3000:]
    assert "mpmath==1.3.0 <<'PY'" in draft.script
    assert 'source "$GPUPORTAL_ENV/bin/activate"' in draft.script


@pytest.fixture
def registry(monkeypatch):
    """The registry's answer for a tag (its adapter is tested on the bed: test_provenance_real.py)."""
    from portal.containers import digests

    asked: list[str] = []

    def resolve(reference, *, login, timeout):
        asked.append(str(reference))
        if "missing" in reference.path:
            raise digests.DigestUnresolved(f"{reference.registry} has no {reference.path}:{reference.tag}")
        return "sha256:" + "c" * 64

    monkeypatch.setattr(digests, "digest_resolve", resolve)
    monkeypatch.setattr(digests, "_recent", {})
    return asked


def test_a_registry_image_runs_by_the_digest_its_tag_has_at_submit(user, partitions, registry):
    """Any job, not only a re-run: never by the tag; its record names the same digest, asked once."""
    environment = Environment.objects.create(name="img", title="Img", kind="container", healthy=True)
    Image.objects.create(name="py", runtime="podman", reference="127.0.0.1:5000/gpuportal/python:3.11",
                         environment=environment)
    draft = job_prepare(user=user, template="custom", parameters={
        "commands": "true", "gpus": 0, "time_limit": 5, "environment": "img"})
    assert f"127.0.0.1:5000/gpuportal/python@sha256:{'c' * 64}" in draft.script
    assert "python:3.11" not in draft.script.split("RUN=(", 1)[1].split(")", 1)[0]
    job = job_create(user=user, draft=draft)
    assert job.provenance.image_digest == "sha256:" + "c" * 64 and len(registry) == 1
    Image.objects.filter(name="py").update(reference="127.0.0.1:5000/gpuportal/missing:1")
    with pytest.raises(InvalidInput) as refused:
        job_prepare(user=user, template="custom", parameters={
            "commands": "true", "gpus": 0, "time_limit": 5, "environment": "img"})
    assert "runs by its digest" in refused.value.fields["parameters"]["environment"][0]


def test_a_registry_image_runs_by_its_recorded_digest(user, partitions):
    digest = "sha256:" + "b" * 64
    environment = Environment.objects.create(name="img", title="Img", kind="container", healthy=True)
    Image.objects.create(name="py", runtime="podman", reference="127.0.0.1:5000/gpuportal/python:3.11",
                         environment=environment)
    draft = job_prepare(user=user, template="custom", parameters={
        "commands": "true", "gpus": 0, "time_limit": 5, "environment": "img"}, pin=Pin(image_digest=digest))
    assert f"127.0.0.1:5000/gpuportal/python@{digest}" in draft.script
    assert "python:3.11" not in draft.script.split("RUN=(", 1)[1].split(")", 1)[0]


# --- the API ---

def test_rerun_submits_the_same_job_and_links_both_ways(user, token_client, partitions, alices_data,
                                                        dispatched):
    job = _ran(user, alices_data)
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 201, response.json()
    again = response.json()
    assert dispatched == [again["id"]] and again["template"] == "pytorch-train"
    record = Provenance.objects.get(job_id=again["id"])
    assert record.rerun_of_id == job.pk and record.parameters == job.parameters
    assert record.resources == job.provenance.resources
    assert token_client.get(f"/api/v1/jobs/{job.pk}/rerun/").json() == {
        "job": job.pk, "rerun_of": None, "reruns": [again["id"]]}
    assert token_client.get(f"/api/v1/jobs/{again['id']}/rerun/").json()["rerun_of"] == job.pk


def test_a_changed_or_missing_input_is_named_and_refused_unless_run_anyway(user, token_client, partitions,
                                                                            alices_data, dispatched):
    job = _ran(user, alices_data)
    data = alices_data / "data.bin"
    data.write_bytes(b"1" + data.read_bytes()[1:])  # one byte
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {"run_anyway": False}, format="json")
    assert response.status_code == 409, response.json()
    body = response.json()
    assert body["code"] == "inputs_changed"
    assert body["fields"]["inputs"] == [{"path": f"{alices_data.name}/data.bin", "reason": "changed"}]
    assert f"{alices_data.name}/data.bin" in body["detail"] and not dispatched
    data.unlink()
    body = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json").json()
    assert body["fields"]["inputs"] == [{"path": f"{alices_data.name}/data.bin", "reason": "missing"}]
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {"run_anyway": True}, format="json")
    assert response.status_code == 201 and dispatched == [response.json()["id"]]


def test_a_file_the_recorded_commit_tracks_comes_from_the_record_not_the_disk(user, token_client, partitions,
                                                                               alices_data, dispatched):
    """A tracked file in the recorded work tree is code (checked out by the re-run); an untracked
    one there is data, checked."""
    code = [{"path": str(alices_data), "commit": "c" * 40, "diff": "", "diff_truncated": False}]
    job = _ran(user, alices_data, code=code)
    record = Provenance.objects.get(job=job)
    record.captured["inputs"][0]["tracked"] = True
    Provenance.objects.filter(job=job).update(captured=record.captured)
    (alices_data / "data.bin").write_bytes(b"changed")
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 201, response.json()
    record.captured["inputs"][0]["tracked"] = False
    Provenance.objects.filter(job=job).update(captured=record.captured)
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 409 and response.json()["fields"]["inputs"][0]["reason"] == "changed"


@pytest.mark.parametrize(("change", "why"), [
    ({"capture_state": Provenance.Capture.PENDING}, "not read yet"),
    ({"capture_state": Provenance.Capture.ABSENT, "capture_reason": "The job wrote no provenance file."},
     "wrote no provenance"),
    ({"captured": {"code": [{"path": "/x", "commit": "a" * 40, "diff_truncated": True}], "inputs": []}},
     "over the recorded bound"),
])
def test_an_incomplete_record_is_409_saying_why(user, token_client, partitions, alices_data, dispatched,
                                               change, why):
    job = _ran(user, alices_data)
    Provenance.objects.filter(job=job).update(**change)
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "provenance_incomplete"
    assert why in response.json()["detail"] and not dispatched


def test_a_changed_environment_is_409_where_the_site_does_not_rebuild(user, token_client, partitions,
                                                                      alices_data, dispatched, settings,
                                                                      tmp_path):
    settings.ENVIRONMENTS_DIR = str(tmp_path)
    (tmp_path / "py").mkdir()
    (tmp_path / "py/gpuportal-env.lock").write_text("mpmath==1.4.1\n")
    Environment.objects.create(name="py", title="Py", kind="python", path=str(tmp_path / "py"), kernel="py",
                               healthy=True)
    job = _ran(user, alices_data)
    Provenance.objects.filter(job=job).update(environment="py", environment_lock="mpmath==1.3.0",
                                              environment_lock_source="pip freeze",
                                              environment_hash=hashlib.sha256(b"mpmath==1.3.0").hexdigest())
    settings.PROVENANCE_REBUILD_ENVS = False
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 409 and response.json()["code"] == "environment_changed"
    assert "PROVENANCE_REBUILD_ENVS" in response.json()["detail"] and not dispatched


def test_only_the_owner_may_rerun(user, partitions, alices_data, dispatched):
    job = _ran(user, alices_data)
    for client in (_client("bob"), _client("ada", is_staff=True, is_superuser=True)):
        assert client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json").status_code == 404
        assert client.get(f"/api/v1/jobs/{job.pk}/rerun/").status_code == 404
    assert not dispatched


def test_run_anyway_must_be_a_boolean(user, token_client, partitions, alices_data, dispatched):
    job = _ran(user, alices_data)
    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {"run_anyway": "maybe"}, format="json")
    assert response.status_code == 400 and "run_anyway" in response.json()["fields"]


def test_a_rerun_submits_in_about_the_time_of_a_submit(user, token_client, partitions, alices_data,
                                                       dispatched, monkeypatch, capsys):
    """The portal's part of each (first sbatch left out, in both): a re-run adds one user-files call."""
    monkeypatch.setattr("portal.jobs.services.submission.job_submit_dispatch", lambda *, job: None)
    job = _ran(user, alices_data)
    body = {"template": "pytorch-train", "parameters": job.parameters}
    token_client.post("/api/v1/jobs/", body, format="json")  # warm both paths once
    token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    submits, reruns = [], []
    for _ in range(10):
        started = time.perf_counter()
        assert token_client.post("/api/v1/jobs/", body, format="json").status_code == 201
        submits.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json").status_code == 201
        reruns.append(time.perf_counter() - started)
    submit, again = statistics.median(submits), statistics.median(reruns)
    with capsys.disabled():
        print(f"\nsubmit p50 {submit * 1000:.1f} ms, rerun p50 {again * 1000:.1f} ms")
    assert again < submit + 0.25, (submits, reruns)


def test_the_job_page_re_runs_and_links_both_ways(user, client, partitions, alices_data, dispatched):
    client.force_login(user)
    job = _ran(user, alices_data)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert 'id="rerun-button"' in page and 'id="reruns"' not in page
    (alices_data / "data.bin").write_bytes(b"other")
    response = client.post(f"/jobs/{job.pk}/rerun/", follow=True)
    assert response.redirect_chain[-1][0] == f"/jobs/{job.pk}/" and not dispatched
    assert f"{alices_data.name}/data.bin (changed)" in response.content.decode()
    response = client.post(f"/jobs/{job.pk}/rerun/", {"run_anyway": "1"}, follow=True)
    [again] = dispatched
    assert response.redirect_chain[-1][0] == f"/jobs/{again}/"
    assert f'A re-run of <a href="/jobs/{job.pk}/">job {job.pk}</a>' in response.content.decode()
    assert f'<a href="/jobs/{again}/">job {again}</a>' in client.get(f"/jobs/{job.pk}/").content.decode()
