"""The provenance record (issue 36): what the portal writes when a job is stored, what the job's own
step records (run here as a plain process), reading it back, the API, the diff and the RO-Crate."""

import hashlib
import io
import json
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
from rocrate.rocrate import ROCrate

from portal.containers.models import Image
from portal.environments.models import Environment
from portal.jobs.services.prepare import job_prepare
from portal.jobs.services.submission import job_create
from portal.provenance import services
from portal.provenance.models import Provenance
from portal.provenance.selectors import provenance_diff
from portal.provenance.services import environment_lock, provenance_capture
from slurm.user_files import JobOutput
from tests.factories import JobFactory, UserFactory

ROOT = Path(__file__).resolve().parents[2]
STEP = ROOT / "templates/jobs/_common/provenance.py"
pytestmark = pytest.mark.django_db


def _git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def _store(user, template="custom", parameters=None):
    draft = job_prepare(user=user, template=template, parameters=parameters or {
        "commands": "echo hi", "gpus": 1, "time_limit": 5})
    return job_create(user=user, draft=draft)


# --- the portal's part, written with the job ---

def test_the_record_is_written_with_the_job(user, partitions):
    job = _store(user)
    record = job.provenance
    assert record.script == job.script and "provenance.py" not in record.script
    assert f"job-{job.uuid}.provenance.json" in record.script  # the job's own step writes beside its output
    assert record.parameters == job.parameters and record.template == "custom"
    assert record.resources == {"partition": job.partition, "nodes": 1, "gpus_per_node": 1,
                                "cpus_per_node": job.cpus_per_node, "mem_mb_per_node": job.mem_mb_per_node,
                                "time_limit_minutes": 5}
    assert record.image_status == Provenance.Image.NONE and record.environment == ""
    assert record.capture_state == Provenance.Capture.PENDING


def test_the_template_path_parameters_are_the_inputs_the_job_records(user, partitions):
    job = _store(user, "pytorch-train", {"entrypoint": "proj/train.py", "data": "proj/data.bin",
                                         "environment": "", "time_limit": 5})
    assert "proj/train.py proj/data.bin <<'PY'" in job.script
    assert "INPUT_DATA=$(gpuportal_path proj/data.bin)" in job.script


def test_the_environment_lock_is_the_builds_pip_freeze_else_its_manifest(tmp_path):
    prefix = tmp_path / "env"
    prefix.mkdir()
    (prefix / "gpuportal-env.json").write_text(json.dumps({"frameworks": {"torch": "2.14.1"}}))
    environment = Environment(name="t", kind=Environment.Kind.PYTHON, path=str(prefix))
    assert environment_lock(environment).text == "torch==2.14.1"
    assert environment_lock(environment).source == "manifest"
    (prefix / "gpuportal-env.lock").write_text("Torch==2.14.1\nnumpy==2.1.0\n# a comment\n")
    lock = environment_lock(environment)
    assert (lock.text, lock.source) == ("numpy==2.1.0\nTorch==2.14.1", "pip freeze")
    assert lock.sha256 == hashlib.sha256(lock.text.encode()).hexdigest()
    modules = Environment(name="m", kind=Environment.Kind.MODULES, modules=["nccl", "cuda/12.4"])
    assert environment_lock(modules).text == "cuda/12.4\nnccl"


def test_a_job_in_an_environment_records_its_lock(user, tmp_path, partitions, settings):
    settings.ENVIRONMENTS_DIR = str(tmp_path)
    prefix = tmp_path / "py"
    prefix.mkdir()
    (prefix / "gpuportal-env.lock").write_text("torch==2.14.1\n")
    Environment.objects.create(name="py", title="Py", kind="python", path=str(prefix), kernel="py",
                               healthy=True)
    job = _store(user, parameters={"commands": "true", "gpus": 0, "time_limit": 5, "environment": "py"})
    record = Provenance.objects.get(job=job)
    assert (record.environment, record.environment_lock) == ("py", "torch==2.14.1")
    assert record.environment_hash == hashlib.sha256(b"torch==2.14.1").hexdigest()


@pytest.mark.parametrize(("reference", "status", "digest"), [
    ("/srv/images/python", Provenance.Image.LOCAL, ""),
    ("127.0.0.1:5000/gpuportal/python@sha256:" + "a" * 64, Provenance.Image.PINNED, "sha256:" + "a" * 64),
])
def test_an_image_named_by_path_or_digest_needs_no_registry(user, reference, status, digest):
    image = Image(name="i", runtime="charliecloud", reference=reference)
    facts = services.image_facts(image=image, user_id=user.pk)
    assert (facts.status, facts.digest) == (status, digest)


def test_a_registry_that_does_not_answer_is_recorded_and_bounded(user):
    # A port nothing listens on: refused at once. A routable but silent address would wait out the bound.
    image = Image(name="i", runtime="charliecloud", reference="127.0.0.1:9/gpuportal/python:3.11")
    started = time.monotonic()
    facts = services.image_facts(image=image, user_id=user.pk)
    assert time.monotonic() - started < 3 * services.REGISTRY_TIMEOUT_SECONDS
    assert facts.status == Provenance.Image.UNRESOLVED and "did not answer" in facts.reason


# --- the job's own part: the step the script runs, as the job's user ---

def test_the_jobs_step_records_commit_diff_inputs_and_gpus(tmp_path):
    work = tmp_path / "proj"
    work.mkdir()
    _git(work, "init", "-q")
    (work / "train.py").write_text("print(1)\n")
    _git(work, "add", "train.py")
    _git(work, "commit", "-qm", "first")
    _git(work, "remote", "add", "origin", "https://example.org/proj.git")
    (work / "train.py").write_text("print(2)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data/a.bin").write_bytes(b"x" * 1000)
    out = tmp_path / "record.json"
    subprocess.run(["python3", "-I", "-", str(out), str(work / "train.py"), str(tmp_path / "data"),
                    str(tmp_path / "missing")], input=STEP.read_bytes(), check=True,
                   env={"PATH": "/usr/bin:/bin"})
    record = json.loads(out.read_text())
    [code] = record["code"]
    assert code["commit"] == _git(work, "rev-parse", "HEAD") and code["remote"] == "https://example.org/proj.git"
    assert "-print(1)\n+print(2)" in code["diff"] and not code["diff_truncated"]
    script, folder, missing = record["inputs"]
    assert script["kind"] == "file" and script["sha256"] == hashlib.sha256(b"print(2)\n").hexdigest()
    assert folder["kind"] == "folder" and not folder["over_bound"]
    assert folder["files"] == [{"path": "a.bin", "size": 1000, "mtime": folder["files"][0]["mtime"],
                                "sha256": hashlib.sha256(b"x" * 1000).hexdigest()}]
    assert missing == {"path": str(tmp_path / "missing"), "kind": "missing"}
    assert record["gpu"]["model"] == "none"  # no nvidia-smi on the bed


def test_a_folder_over_the_bound_is_listed_and_marked(tmp_path):
    (tmp_path / "many").mkdir()
    for index in range(1002):
        (tmp_path / f"many/{index:04}").write_bytes(b"")
    out = tmp_path / "record.json"
    subprocess.run(["python3", "-I", "-", str(out), str(tmp_path / "many")], input=STEP.read_bytes(),
                   check=True)
    [folder] = json.loads(out.read_text())["inputs"]
    assert folder["over_bound"] and len(folder["files"]) == 1000
    assert all(item["sha256"] is None for item in folder["files"])


# --- reading it back (job-files stubbed: the real one is in test_provenance_real.py) ---

@pytest.mark.parametrize(("output", "state"), [
    (JobOutput(exists=True, size=2, data=b'{"code": []}'), Provenance.Capture.DONE),
    (JobOutput(exists=False, size=0, data=b""), Provenance.Capture.ABSENT),
    (JobOutput(exists=True, size=5, data=b"[1,2]"), Provenance.Capture.FAILED),
])
def test_the_jobs_record_is_read_once(monkeypatch, output, state):
    job = JobFactory()
    Provenance.objects.create(job=job, template="custom", script="x")
    calls = []
    monkeypatch.setattr(services, "job_output_read", lambda **kwargs: calls.append(kwargs) or output)
    assert provenance_capture(job=job).capture_state == state
    assert calls[0]["stream"] == "provenance" and calls[0]["user"] == "alice"
    assert provenance_capture(job=job) is None and len(calls) == 1  # read once


# --- API, diff, export ---

def _recorded(job, **fields):
    defaults = {"template": "custom", "script": "#!/bin/bash\necho hi\n", "parameters": job.parameters,
                "resources": {"nodes": 1}, "environment": "pytorch", "environment_lock": "torch==2.14.1",
                "environment_hash": "h1", "capture_state": Provenance.Capture.DONE,
                "captured": {"code": [{"path": "/p", "commit": "c1", "remote": "", "diff": "+x\n"}],
                             "inputs": [{"path": "d.bin", "kind": "file", "size": 3, "mtime": 1,
                                         "sha256": "s1"}], "gpu": {"model": "none", "driver": "none"}}}
    return Provenance.objects.create(job=job, **{**defaults, **fields})


def test_only_the_owner_reads_the_record(token_client, user):
    mine = _recorded(JobFactory(user=user))
    theirs = _recorded(JobFactory(user=UserFactory(username="bob")))
    body = token_client.get(f"/api/v1/jobs/{mine.job_id}/provenance/").json()
    assert body["captured"]["code"][0]["commit"] == "c1" and body["environment_lock"] == "torch==2.14.1"
    for path in ("provenance/", "provenance.zip", f"provenance/diff/?other={mine.job_id}"):
        assert token_client.get(f"/api/v1/jobs/{theirs.job_id}/{path}").status_code == 404
    diff = token_client.get(f"/api/v1/jobs/{mine.job_id}/provenance/diff/?other={theirs.job_id}")
    assert diff.status_code == 404


def test_what_differs_field_by_field(token_client, user):
    this = _recorded(JobFactory(user=user))
    other = _recorded(JobFactory(user=user), environment_hash="h2",
                      captured={**this.captured, "inputs": [{**this.captured["inputs"][0], "sha256": "s2"}]})
    marks = {item.field: item.same for item in provenance_diff(this, other)}
    assert [field for field, same in marks.items() if not same] == ["environment.hash", "inputs"]
    body = token_client.get(f"/api/v1/jobs/{this.job_id}/provenance/diff/?other={other.job_id}").json()
    assert {item["field"]: item["same"] for item in body["fields"]} == marks
    bad = token_client.get(f"/api/v1/jobs/{this.job_id}/provenance/diff/?other=x")
    assert bad.status_code == 400 and "other" in bad.json()["fields"]


def test_the_export_is_a_workflow_run_crate(token_client, user, tmp_path):
    record = _recorded(JobFactory(user=user))
    response = token_client.get(f"/api/v1/jobs/{record.job_id}/provenance.zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"
    with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
        archive.extractall(tmp_path / "crate")
        assert {"ro-crate-metadata.json", "script.sh", "environment.lock", "code.diff",
                "inputs.json"} <= set(archive.namelist())
    crate = ROCrate(tmp_path / "crate")
    profiles = {item["@id"] for item in crate.root_dataset["conformsTo"]}
    assert "https://w3id.org/ro/wfrun/workflow/0.5" in profiles
    assert crate.mainEntity.id == "script.sh"
    [action] = crate.get_by_type("CreateAction")
    assert action["instrument"].id == "script.sh"
    assert (tmp_path / "crate/environment.lock").read_text() == "torch==2.14.1"
    assert json.loads((tmp_path / "crate/inputs.json").read_text())[0]["sha256"] == "s1"


def test_the_job_page_has_a_provenance_section(client, user):
    record = _recorded(JobFactory(user=user))
    client.force_login(user)
    page = client.get(f"/jobs/{record.job_id}/").content.decode()
    assert 'id="provenance"' in page and "with uncommitted changes" in page
    assert "SHA-256 <code>s1</code>" in page and f"/api/v1/jobs/{record.job_id}/provenance.zip" in page
    bare = JobFactory(user=user, state="PENDING")
    assert "submitted before the portal recorded it" in client.get(f"/jobs/{bare.pk}/").content.decode()


def test_the_jobs_mlflow_run_gets_the_key_facts_as_tags(monkeypatch, user):
    from portal.tracking.job_runs import job_runs_create

    job = JobFactory(user=user)
    [run] = job_runs_create(jobs=[job])
    record = _recorded(job, capture_state=Provenance.Capture.PENDING, image_reference="r:1",
                       image_digest="sha256:" + "b" * 64)
    document = json.dumps(
        {"code": [{"path": "/p", "commit": "c1", "remote": "https://x/p.git", "diff": "+x\n"}],
         "inputs": [{"path": "d.bin", "sha256": "s1"}], "gpu": {"model": "none"}}).encode()
    monkeypatch.setattr(services, "job_output_read",
                        lambda **kwargs: JobOutput(exists=True, size=len(document), data=document))
    provenance_capture(job=job)
    tags = dict(run.tags.values_list("key", "value"))
    assert tags["gpuportal.provenance.git_commit"] == "c1"
    assert tags["gpuportal.provenance.git_dirty"] == "true"
    assert tags["gpuportal.provenance.image_digest"] == "sha256:" + "b" * 64
    assert tags["gpuportal.provenance.environment_hash"] == record.environment_hash
    assert len(tags["gpuportal.provenance.inputs_sha256"]) == 64
