"""Re-run exactly on the bed (issue 36, must show): a real pytorch-train job with a fixed seed, its
script in a git work tree in alice's home with an uncommitted line, and a data set file. Then the
environment changes (the site's pytorch environment now points at a copy with mpmath at another
version) and one line of the script changes, uncommitted. The re-run runs the recorded code and the
recorded environment (rebuilt from the lock, as alice, into her cache keyed by the lock's hash): its
final accuracy and loss equal the original's within 1e-6. A changed byte of the data set: refused,
naming the file; with run_anyway, submitted.

pytorch-train runs a framework environment (a venv), not a container image: the image digest path
(a registry image run by name@sha256:...) is tested with a rendered job in test_rerun.py."""

import hashlib
import pwd
import random
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from portal.environments.models import Environment
from portal.jobs.models import TERMINAL_STATES, JobState
from portal.provenance.models import Provenance
from tests.environments.conftest import REAL_ROOT, needs_real_envs, pytorch_env  # noqa: F401 (fixture)
from tests.jobs.conftest import cleanup_jobs, poll_until, polled  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs]

TRAIN = """import os
import mpmath
import torch

torch.manual_seed(1234)
data = open(os.environ["INPUT_DATA"], "rb").read()
x = torch.tensor(list(data[:8192]), dtype=torch.float32).reshape(-1, 16) / 255
y = (x[:, :8].sum(1) > x[:, 8:].sum(1)).long()
model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
LR = 0.01
optimizer = torch.optim.SGD(model.parameters(), lr=LR)
for _ in range(40):
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
accuracy = (model(x).argmax(1) == y).float().mean().item()
print(f"final accuracy {accuracy:.9f} loss {loss.item():.9f} mpmath {mpmath.__version__}")
"""
RESULT = re.compile(r"final accuracy ([0-9.]+) loss ([0-9.]+) mpmath (\S+)")


def _git(folder: Path, *args: str) -> str:
    config = ["-c", "user.name=alice", "-c", "user.email=a@example.org", "-c", "safe.directory=*"]
    return subprocess.run(["git", "-C", str(folder), *config, *args], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture
def project():
    """alice's work tree: train.py committed with LR 0.01, then changed to 0.2 (uncommitted); data.bin."""
    account = pwd.getpwnam("alice")
    folder = Path(account.pw_dir) / f"rerun-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    (folder / "train.py").write_text(TRAIN)
    _git(folder, "init", "-q")
    _git(folder, "add", "train.py")
    _git(folder, "commit", "-qm", "first")
    _git(folder, "remote", "add", "origin", "https://git.example.org/alice/rerun.git")
    (folder / "train.py").write_text(TRAIN.replace("LR = 0.01", "LR = 0.2"))
    (folder / "data.bin").write_bytes(random.Random(7).randbytes(1 << 20))
    subprocess.run(["chown", "-R", f"{account.pw_uid}:{account.pw_gid}", str(folder)], check=True)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def changed_env(pytorch_env):  # noqa: F811 (fixture)
    """The site's pytorch environment, changed: a copy (hard links, so cheap; pip replaces files,
    never writes into them) with mpmath 1.4.1 instead of the build's 1.3.0, and its own lock. Only
    this test's database points at it; the real one is untouched."""
    copy = Path(f"/opt/gpuportal/rerun-test-{uuid.uuid4().hex[:8]}")
    subprocess.run(["cp", "-al", str(REAL_ROOT / "pytorch"), str(copy)], check=True)
    try:
        subprocess.run([str(copy / "bin/python"), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                        "--no-deps", "mpmath==1.4.1"], check=True, capture_output=True)
        freeze = subprocess.run([str(copy / "bin/python"), "-m", "pip", "freeze", "--all"], check=True,
                                capture_output=True, text=True).stdout
        (copy / "gpuportal-env.lock.part").write_text(freeze)
        (copy / "gpuportal-env.lock.part").replace(copy / "gpuportal-env.lock")  # not into the linked file
        yield copy
    finally:
        shutil.rmtree(copy, ignore_errors=True)


def _run(token_client, slurm, job_id, capture):
    with capture(execute=True):
        job = poll_until(slurm, job_id, TERMINAL_STATES, timeout=600)
    stdout = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stdout").json()["text"]
    stderr = token_client.get(f"/api/v1/jobs/{job.pk}/log/?stream=stderr").json()["text"]
    assert job.state == JobState.COMPLETED, f"{job.state}\n{stdout}\n{stderr}"
    return job, stdout


def _submit(token_client, project: Path):
    response = token_client.post("/api/v1/jobs/", {"template": "pytorch-train", "parameters": {
        "entrypoint": f"{project.name}/train.py", "data": f"{project.name}/data.bin", "gpus": 1,
        "time_limit": 10, "environment": "pytorch"}}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()["id"]


@pytest.mark.usefixtures("polled", "cleanup_jobs")
def test_rerun_exactly_uses_the_recorded_code_and_environment(token_client, slurm, project, changed_env,
                                                              django_capture_on_commit_callbacks):
    original, stdout = _run(token_client, slurm, _submit(token_client, project),
                            django_capture_on_commit_callbacks)
    accuracy, loss, mpmath = RESULT.search(stdout).groups()
    assert mpmath == "1.3.0"
    record = Provenance.objects.get(job=original)
    assert record.capture_state == Provenance.Capture.DONE, record.capture_reason

    # What changed since: the environment's packages, and one line of the script (uncommitted).
    Environment.objects.filter(name="pytorch").update(path=str(changed_env))
    (project / "train.py").write_text(TRAIN.replace("LR = 0.01", "LR = 0.7"))
    cache = Path(pwd.getpwnam("alice").pw_dir) / ".cache/gpuportal/envs" / record.environment_hash
    shutil.rmtree(cache, ignore_errors=True)  # built by this re-run, not an earlier one
    try:
        response = token_client.post(f"/api/v1/jobs/{original.pk}/rerun/", {}, format="json")
        assert response.status_code == 201, response.json()
        again, rerun_stdout = _run(token_client, slurm, response.json()["id"],
                                   django_capture_on_commit_callbacks)
        rerun_accuracy, rerun_loss, rerun_mpmath = RESULT.search(rerun_stdout).groups()
        assert abs(float(rerun_accuracy) - float(accuracy)) <= 1e-6
        assert abs(float(rerun_loss) - float(loss)) <= 1e-6
        assert rerun_mpmath == "1.3.0"  # the recorded environment, not the changed one (1.4.1)
        # The environment the re-run used, built from the lock: its freeze is the recorded lock.
        freeze = subprocess.run(["runuser", "-u", "alice", "--", str(cache / "bin/python"), "-m", "pip",
                                 "freeze", "--all"], capture_output=True, text=True, check=True).stdout
        lines = sorted({line.strip() for line in freeze.splitlines() if line.strip()}, key=str.lower)
        assert hashlib.sha256("\n".join(lines).encode()).hexdigest() == record.environment_hash
        rerun_record = Provenance.objects.get(job=again)
        assert rerun_record.rerun_of_id == original.pk
        assert rerun_record.environment_hash == record.environment_hash
        # The recorded code: the same commit and diff, from its own scratch work tree.
        [code], [code_again] = record.captured["code"], rerun_record.captured["code"]
        assert (code_again["path"], code_again["commit"], code_again["remote"], code_again["diff"]) == (
            code["path"], code["commit"], code["remote"], code["diff"])
        assert code_again["worktree"].startswith(f"{again.output_dir}/job-{again.uuid}/code/")
        assert "LR = 0.2" in code["diff"] and "LR = 0.7" not in code_again["diff"]
        # The same inputs: the script (the recorded code's, from the scratch tree) and the data set.
        def facts(inputs: list[dict]) -> list[tuple]:
            return [(i["path"], i["size"], i["sha256"], i.get("tracked")) for i in inputs]
        assert facts(rerun_record.captured["inputs"]) == facts(record.captured["inputs"])
    finally:
        subprocess.run(["git", "-C", str(project), "-c", "safe.directory=*", "worktree", "prune"],
                       check=False)
        shutil.rmtree(cache, ignore_errors=True)


@pytest.mark.usefixtures("polled", "cleanup_jobs", "pytorch_env")
def test_a_changed_byte_of_the_data_set_refuses_the_rerun_naming_it(token_client, slurm, project,
                                                                   django_capture_on_commit_callbacks):
    original, _ = _run(token_client, slurm, _submit(token_client, project),
                       django_capture_on_commit_callbacks)
    data = project / "data.bin"
    with data.open("r+b") as handle:  # one byte, in place
        handle.seek(1000)
        byte = handle.read(1)
        handle.seek(1000)
        handle.write(bytes([byte[0] ^ 1]))
    response = token_client.post(f"/api/v1/jobs/{original.pk}/rerun/", {}, format="json")
    assert response.status_code == 409, response.json()
    assert response.json()["fields"]["inputs"] == [{"path": f"{project.name}/data.bin", "reason": "changed"}]
    response = token_client.post(f"/api/v1/jobs/{original.pk}/rerun/", {"run_anyway": True}, format="json")
    assert response.status_code == 201, response.json()
    assert Provenance.objects.get(job_id=response.json()["id"]).rerun_of_id == original.pk
