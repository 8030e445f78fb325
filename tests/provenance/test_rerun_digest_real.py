"""Re-run exactly on the bed, the image part (issue 36): pytorch-train runs a framework environment,
not an image, so the smallest job that runs one does (custom, in rootless Podman, from the bed's
registry with alice's stored key). The job runs its image by digest; its tag is then moved to
another manifest; the re-run runs, and records, the original digest, while a new submit takes the
tag's new one. The tag is this test's own (the shared catalog's tag is never moved)."""

import json
import subprocess
import uuid

import pytest

from portal.containers import digests
from portal.containers.services import image_create
from portal.jobs.models import TERMINAL_STATES, JobState
from portal.jobs.services.prepare import job_prepare
from portal.provenance.models import Provenance
from tests.containers.conftest import LOGIN, REFERENCE, REGISTRY, api_key, needs_registry  # noqa: F401
from tests.containers.test_podman_state_real import _pull, _submit
from tests.containers.test_pull_real import _store_key
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_registry,
              pytest.mark.usefixtures("polled", "cleanup_jobs")]


def _skopeo(*argv: str) -> str:
    return subprocess.run(["skopeo", *argv], capture_output=True, text=True, check=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "REGISTRY_AUTH_FILE": "/dev/null"}).stdout


def _digest(key: str, reference: str) -> str:
    return json.loads(_skopeo("inspect", "--creds", f"{LOGIN}:{key}", f"docker://{reference}"))["Digest"]


def _ended(client, slurm, job_id, capture):
    with capture(execute=True):  # the job's provenance is read once it has ended (after the commit)
        job = poll_until(slurm, job_id, TERMINAL_STATES, timeout=300)
    stdout = client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state}\n{job.script}\n{stdout}"
    return job, stdout


def test_a_rerun_runs_the_recorded_digest_after_the_tag_moved(token_client, user, api_key, slurm,  # noqa: F811
                                                              django_capture_on_commit_callbacks):
    tag = f"{REGISTRY}/gpuportal/python:rerun-{uuid.uuid4().hex[:8]}"
    creds = ["--src-creds", f"{LOGIN}:{api_key}", "--dest-creds", f"{LOGIN}:{api_key}"]
    _skopeo("copy", "-q", *creds, f"docker://{REFERENCE}", f"docker://{tag}")
    first = _digest(api_key, tag)
    _store_key(token_client, api_key)
    image = image_create(name="python-rerun", runtime="podman", reference=tag, title="Python (re-run test)")
    environment = _pull(token_client, image)
    job, stdout = _ended(token_client, slurm, _submit(token_client, "cat /etc/gpuportal-image", environment),
                         django_capture_on_commit_callbacks)
    name = tag.rsplit(":", 1)[0]
    assert f"{name}@{first}" in job.script and tag not in job.script.split("RUN=(", 1)[1].split(")", 1)[0]
    assert Provenance.objects.get(job=job).image_digest == first

    # The tag moves to another manifest (the same files as Docker v2 schema 2: another digest).
    _skopeo("copy", "-q", "--format", "v2s2", *creds, f"docker://{REFERENCE}", f"docker://{tag}")
    moved = _digest(api_key, tag)
    assert moved != first
    digests._recent.clear()  # a new submit asks the registry again (30 s memo)

    response = token_client.post(f"/api/v1/jobs/{job.pk}/rerun/", {}, format="json")
    assert response.status_code == 201, response.json()
    again, rerun_stdout = _ended(token_client, slurm, response.json()["id"],
                                 django_capture_on_commit_callbacks)
    assert f"{name}@{first}" in again.script and moved not in again.script
    assert rerun_stdout.splitlines()[-1] == stdout.splitlines()[-1]  # the image's own marker file
    record = Provenance.objects.get(job=again)
    assert (record.image_digest, record.rerun_of_id) == (first, job.pk)
    fresh = job_prepare(user=user, template="custom", parameters={
        "commands": "true", "gpus": 0, "time_limit": 5, "environment": environment})
    assert f"{name}@{moved}" in fresh.script
