"""A real pytorch-train job on the local cluster records its own provenance as alice: the commit,
remote and uncommitted diff of her script's work tree and the SHA-256 of her input file; the portal
reads it through job-files once the job has ended; bob gets 404; the export is a valid RO-Crate."""

import hashlib
import io
import json
import pwd
import shutil
import subprocess
import uuid
import zipfile
from pathlib import Path

import pytest
from rest_framework.test import APIClient
from rocrate.rocrate import ROCrate

from portal.accounts.services import api_token_create
from portal.containers.models import Image
from portal.containers.services import credential_store
from portal.jobs.models import TERMINAL_STATES, JobState
from portal.provenance.models import Provenance
from portal.provenance.services import image_facts
from tests.containers.conftest import LOGIN, REFERENCE, REGISTRY, REGISTRY_STATE, needs_registry
from tests.environments.conftest import needs_real_envs, pytorch_env  # noqa: F401 (fixture)
from tests.factories import UserFactory
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

TRAIN = "import os, sys\nprint('trained on', os.path.getsize(os.environ['INPUT_DATA']))\n"


def _git(folder: Path, *args: str) -> str:
    # Run by root here (the folder is alice's once the fixture hands it over).
    config = ["-c", "user.name=alice", "-c", "user.email=a@example.org", "-c", "safe.directory=*"]
    return subprocess.run(["git", "-C", str(folder), *config, *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def project():
    """A git work tree in alice's home, hers: a committed script changed by one uncommitted line,
    and a data file."""
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"prov-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    _git(folder, "init", "-q")
    _git(folder, "add", "train.py")
    _git(folder, "commit", "-qm", "first")
    _git(folder, "remote", "add", "origin", "https://git.example.org/alice/prov.git")
    (folder / "train.py").write_text(TRAIN + "print('an uncommitted line')\n")
    (folder / "data.bin").write_bytes(bytes(range(256)) * 4096)
    subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(folder)], check=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@needs_real_envs
@pytest.mark.usefixtures("polled", "cleanup_jobs", "pytorch_env")
def test_a_real_job_records_its_code_and_inputs_as_its_user(token_client, slurm, project, tmp_path,
                                                            django_capture_on_commit_callbacks):
    relative = project.name
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "parameters": {
        "entrypoint": f"{relative}/train.py", "data": f"{relative}/data.bin", "gpus": 1, "time_limit": 5,
        "environment": "pytorch"}}, format="json")
    assert response.status_code == 201, response.json()
    with django_capture_on_commit_callbacks(execute=True):  # jobs_ended is sent after the cycle commits
        job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=300)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state}\n{stdout}\n{stderr}"
    assert "trained on 1048576" in stdout

    body = token_client.get(f"/api/v1/jobs/{job.pk}/provenance/").json()
    assert body["capture_state"] == Provenance.Capture.DONE, body
    [code] = body["captured"]["code"]
    assert code["path"] == str(project) and code["commit"] == _git(project, "rev-parse", "HEAD")
    assert code["remote"] == "https://git.example.org/alice/prov.git"
    assert "+print('an uncommitted line')" in code["diff"]
    script, data = body["captured"]["inputs"]
    assert data["path"] == f"{relative}/data.bin" and data["size"] == 1048576
    assert data["sha256"] == hashlib.sha256((project / "data.bin").read_bytes()).hexdigest()
    assert script["sha256"] == hashlib.sha256((project / "train.py").read_bytes()).hexdigest()
    assert body["captured"]["gpu"]["model"] == "none"  # the bed's GPUs have no nvidia-smi
    assert body["environment"] == "pytorch" and body["environment_lock_source"] == "pip freeze"
    assert "torch==" in body["environment_lock"] and len(body["environment_hash"]) == 64
    assert body["resources"]["gpus_per_node"] == 1 and body["script"] == job.script

    bob = APIClient()
    _, key = api_token_create(user=UserFactory(username="bob"), name="t")
    bob.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert bob.get(f"/api/v1/jobs/{job.pk}/provenance/").status_code == 404
    assert bob.get(f"/api/v1/jobs/{job.pk}/provenance.zip").status_code == 404

    export = token_client.get(f"/api/v1/jobs/{job.pk}/provenance.zip")
    with zipfile.ZipFile(io.BytesIO(export.content)) as archive:
        archive.extractall(tmp_path / "crate")
    crate = ROCrate(tmp_path / "crate")
    [action] = crate.get_by_type("CreateAction")
    assert action["instrument"].id == "script.sh" and crate.mainEntity.id == "script.sh"
    assert "+print('an uncommitted line')" in (tmp_path / "crate/code.diff").read_text()
    assert data["sha256"] in (tmp_path / "crate/inputs.json").read_text()


@needs_registry
def test_the_image_digest_is_resolved_from_the_beds_registry_with_the_users_key(user):
    """The bed's registry (https, its own CA, htpasswd like NGC): the digest skopeo sees for the tag;
    without a stored key, unresolved and said why."""
    api_key = (REGISTRY_STATE / "api-key").read_text().strip()
    image = Image(name="p", runtime="podman", reference=REFERENCE)
    assert image_facts(image=image, user_id=user.pk).reason == f"no key stored for {REGISTRY}"
    credential_store(user=user, registry=REGISTRY, username=LOGIN, key=api_key)
    facts = image_facts(image=image, user_id=user.pk)
    inspected = subprocess.run(["skopeo", "inspect", "--creds", f"{LOGIN}:{api_key}", f"docker://{REFERENCE}"],
                               capture_output=True, text=True, check=True, timeout=60)
    assert facts.status == Provenance.Image.RESOLVED, facts
    assert facts.digest == json.loads(inspected.stdout)["Digest"]
