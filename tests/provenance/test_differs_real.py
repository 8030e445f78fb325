"""What differs on the bed (issue 36, must show): a real pytorch-train job with a fixed seed, then
its environment's packages and one line of its script changed (uncommitted), then Re-run exactly:
the What-differs page and API mark only run-time facts (times, node, job ids) as different."""

import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from portal.environments.models import Environment
from portal.provenance.models import Provenance
from tests.environments.conftest import needs_real_envs, pytorch_env  # noqa: F401 (fixture)
from tests.jobs.conftest import cleanup_jobs, polled  # noqa: F401 (fixtures)
from tests.provenance.test_rerun_real import TRAIN, _run, _submit, changed_env, project  # noqa: F401

pytestmark = [pytest.mark.integration, pytest.mark.django_db, needs_real_envs]


@pytest.mark.usefixtures("polled", "cleanup_jobs")
def test_a_faithful_rerun_differs_only_in_run_time_facts(token_client, client, user, slurm, project,  # noqa: F811
                                                          changed_env,  # noqa: F811 (fixtures)
                                                          django_capture_on_commit_callbacks):
    original, _ = _run(token_client, slurm, _submit(token_client, project),
                       django_capture_on_commit_callbacks)
    record = Provenance.objects.get(job=original)
    assert record.capture_state == Provenance.Capture.DONE, record.capture_reason
    Environment.objects.filter(name="pytorch").update(path=str(changed_env))
    (project / "train.py").write_text(TRAIN.replace("LR = 0.01", "LR = 0.7"))
    cache = Path(pwd.getpwnam("alice").pw_dir) / ".cache/gpuportal/envs" / record.environment_hash
    try:
        response = token_client.post(f"/api/v1/jobs/{original.pk}/rerun/", {}, format="json")
        assert response.status_code == 201, response.json()
        again, _ = _run(token_client, slurm, response.json()["id"], django_capture_on_commit_callbacks)
        body = token_client.get(f"/api/v1/jobs/{again.pk}/provenance/diff/?other={original.pk}").json()
        different = [item["field"] for item in body["fields"] if not item["same"]]
        assert body["verdict"] == "Only run-time facts differ.", (different, [
            (item["this"], item["other"]) for item in body["fields"] if not item["same"]])
        apart = {item["field"] for item in body["run_time"] if not item["same"]}
        assert {"job id", "job uuid", "Slurm job id", "started", "ended", "output folder"} <= apart
        assert [row for row in body["packages"] if row["status"] != "same"] == []
        assert body["inputs"] and all(row["same"] for row in body["inputs"])
        client.force_login(user)
        page = client.get(f"/jobs/{again.pk}/")
        assert f"/jobs/{again.pk}/differs/{original.pk}/" in page.content.decode()  # from a re-run
        shown = client.get(f"/jobs/{again.pk}/differs/{original.pk}/").content.decode()
        assert "Only run-time facts differ." in shown and 'class="badge warn"' not in shown
    finally:
        subprocess.run(["git", "-C", str(project), "-c", "safe.directory=*", "worktree", "prune"],
                       check=False)
        shutil.rmtree(cache, ignore_errors=True)
