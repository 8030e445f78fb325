"""Must show (#38): on the bed's two clusters, a project whose GPU-hour budget on cluster-b is 0 (and
none on the default cluster) holds alice's job there (Slurm's AssocGrpGRESMinutes, on that cluster's
association alone), while the same project's job on the default cluster runs; both submitted through
the API with `cluster` and `account`. The throw-away account is removed from both clusters after."""

import contextlib
import secrets
import subprocess
import time

import pytest

from portal.jobs.models import Job, JobState
from portal.poll.cycle import cluster_poll_cycle, poll_cycle
from portal.projects.models import Project, ProjectClusterBudget
from portal.projects.services import projects_sync_clusters
from tests.jobs.test_job_cluster_real import B, two_clusters  # noqa: F401 - the fixture
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

DEFAULT = "gpuportal"


def _assocs(cluster: str, account: str) -> list[str]:
    return subprocess.run(["sacctmgr", "-n", "-P", "list", "assoc", f"cluster={cluster}",
                           f"account={account}", "format=Account,User,GrpTRESMins"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()


@pytest.fixture
def project(two_clusters):  # noqa: F811 - the fixture imported above
    """A project with 0 GPU-hours on cluster-b and no budget on the default cluster."""
    tag = secrets.token_hex(3)
    made = Project.objects.create(name=f"cb-{tag}", ldap_group="portal-users", slurm_account=f"cb{tag}")
    ProjectClusterBudget.objects.create(project=made, cluster=B, gpu_hours=0)
    yield made
    for cluster in two_clusters:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["scancel", "-M", cluster, f"--account={made.slurm_account}"], timeout=20,
                           check=False)
    time.sleep(1)  # sacctmgr refuses to delete an association with running jobs
    with contextlib.suppress(subprocess.SubprocessError):  # both clusters' associations, limits and all
        subprocess.run(["sacctmgr", "-i", "delete", "account", made.slurm_account], capture_output=True,
                       timeout=30, check=False)


def test_a_spent_budget_on_cluster_b_holds_the_job_there_while_the_same_project_runs_on_the_default(
        two_clusters, project, user, token_client, client):  # noqa: F811
    user.ldap_groups = ["portal-users"]
    user.save()
    account = project.slurm_account
    reports = projects_sync_clusters(projects=[project])
    added = {name: report.accounts_added for name, report in reports.items()}
    assert added == {DEFAULT: [account], B: [account]}
    assert reports[B].budgets_set == {account: 0}
    # Each cluster's association has its own limit; the members are on both.
    assert f"{account}||gres/gpu=0" in _assocs(B, account) and f"{account}|alice|" in _assocs(B, account)
    assert f"{account}||" in _assocs(DEFAULT, account) and f"{account}|alice|" in _assocs(DEFAULT, account)

    ids = {}
    for cluster in (B, DEFAULT):
        response = token_client.post("/api/v1/jobs/", {
            "template": "custom", "cluster": cluster, "account": account, "name": f"budget on {cluster}",
            "parameters": {"commands": "sleep 1", "gpus": 1, "nodes": 1, "time_limit": 2}}, format="json")
        assert response.status_code == 201, response.json()
        ids[cluster] = response.json()["id"]
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:  # beat's work: the default cluster's cycle, and cluster-b's own
        assert poll_cycle(slurm=two_clusters[DEFAULT]).ran
        assert cluster_poll_cycle(cluster=B, slurm=two_clusters[B]).ran
        held, ran = Job.objects.get(pk=ids[B]), Job.objects.get(pk=ids[DEFAULT])
        if ran.state == JobState.COMPLETED and held.reason == "AssocGrpGRESMinutes":
            break
        assert time.monotonic() < deadline, {"held": (held.state, held.reason),
                                             "ran": (ran.state, ran.reason)}
        time.sleep(0.5)
    assert held.state == JobState.PENDING and ran.exit_code == 0
    detail = token_client.get(f"/api/v1/jobs/{held.pk}/").json()
    assert (detail["cluster"], detail["state"], detail["reason"]) == (B, "PENDING", "AssocGrpGRESMinutes")

    # cluster-b's cycle read its budget: the API shows it next to the default cluster's (none).
    (shown,) = [row for row in token_client.get("/api/v1/projects/").json() if row["account"] == account]
    assert shown["limit_gpu_hours"] is None and shown["level"] == ""
    (other,) = shown["other_clusters"]
    assert (other["cluster"], other["cluster_title"], other["limit_gpu_hours"], other["level"]) == (
        B, "Cluster B", 0, "exhausted")
    client.force_login(user)
    rows = [line.split(",") for line in client.get("/projects/budgets.csv").content.decode().splitlines()]
    assert rows[0][-1] == "cluster"
    assert [(row[3], row[-1]) for row in rows[1:] if row[1] == account] == [("", DEFAULT), ("0.0", B)]
