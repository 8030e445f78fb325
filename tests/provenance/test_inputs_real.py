"""Recording inputs on the bed (issue 36): a real job with 1 GB of inputs starts its program at most
1 s later than the same job without inputs, in the same run; the input is hashed after the program
has started, and the record the portal reads back has its SHA-256."""

import hashlib
import pwd
import re
import subprocess
import uuid
from pathlib import Path

import pytest

from portal.jobs.models import TERMINAL_STATES, JobState
from portal.provenance.models import Provenance
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

# The user's program says how long after its job's script started it runs (from /proc, in clock ticks).
SINCE_START = ("python3 -c \"import os, sys; "
               "stat = open(f'/proc/{sys.argv[1]}/stat').read().rsplit(')', 1)[1]; "
               "up = float(open('/proc/uptime').read().split()[0]); "
               "print('SINCE_START', up - int(stat.split()[19]) / os.sysconf('SC_CLK_TCK'))\" $PPID")


@pytest.fixture
def data():
    """1 GB (10^9 bytes) of alice's, not sparse."""
    account = pwd.getpwnam("alice")
    path = Path(account.pw_dir) / f"inputs-{uuid.uuid4().hex[:8]}.bin"
    block = hashlib.sha256(b"seed").digest() * (1024**2 // 32)
    with path.open("wb") as handle:
        for _ in range(10**9 // len(block)):
            handle.write(block)
        handle.write(block[:10**9 % len(block)])
    subprocess.run(["chown", f"{account.pw_uid}:{account.pw_gid}", str(path)], check=True)
    yield path
    path.unlink(missing_ok=True)


def _run(token_client, slurm, django_capture_on_commit_callbacks, inputs: list[str]):
    response = token_client.post("/api/v1/jobs/", {"template": "custom", "parameters": {
        "commands": SINCE_START, "gpus": 1, "time_limit": 5, "inputs": inputs}}, format="json")
    assert response.status_code == 201, response.json()
    with django_capture_on_commit_callbacks(execute=True):
        job = poll_until(slurm, response.json()["id"], TERMINAL_STATES, timeout=300)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    assert job.state == JobState.COMPLETED, stdout
    return job, float(re.search(r"SINCE_START ([0-9.]+)", stdout).group(1))


@pytest.mark.usefixtures("polled", "cleanup_jobs")
def test_a_gigabyte_of_inputs_adds_at_most_a_second_to_the_start(token_client, slurm, data,
                                                                 django_capture_on_commit_callbacks):
    _, baseline = _run(token_client, slurm, django_capture_on_commit_callbacks, [])
    job, started = _run(token_client, slurm, django_capture_on_commit_callbacks, [data.name])
    print(f"\nprogram start after the script's: {baseline:.2f} s without inputs, {started:.2f} s with "
          f"1 GB ({started - baseline:+.2f} s)")
    assert started - baseline <= 1.0
    record = Provenance.objects.get(job=job)
    assert record.capture_state == Provenance.Capture.DONE, record.capture_reason
    [item] = record.captured["inputs"]
    print(f"recorder at the start: {record.captured['seconds']} s; in the background: "
          f"{record.captured['background']}")
    digest = hashlib.sha256()
    with data.open("rb") as handle:
        while chunk := handle.read(1024**2):
            digest.update(chunk)
    assert record.captured["background"]["state"] == "done"
    assert item["sha256"] == digest.hexdigest() and not item["over_bound"] and item["size"] == 10**9
