"""Clusters as configuration (#38) on the bed's two clusters: with a clusters.d holding the default
cluster `gpuportal` and `cluster-b`, each cluster's adapter (Slurm.from_settings(name)) reaches that
cluster alone: its nodes, alice's jobs submitted through the real submit path (sudo sbatch, and one
sudo's sbatch-batch), its queue and accounting, cancel, and a project's budget on that cluster's
association only."""

import contextlib
import secrets
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from slurm.adapter import Slurm
from slurm.parsing import AccountedJob
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = pytest.mark.integration

B = "cluster-b"
CONF_B = Path("/etc/slurm-cluster-b/slurm.conf")  # slurm/dev/services/cluster_b.sh
SCRIPT = "#!/bin/bash\n#SBATCH --time=2 --mem=100M --output=/dev/null {options}\n{command}\n"


@pytest.fixture(params=["-M", "slurm_conf"])
def clusters(request, tmp_path, settings) -> tuple[Slurm, Slurm]:
    """The default cluster's adapter and cluster-b's, from two files (docs/admin/adding-a-cluster.md):
    cluster-b's commands name it with `-M`, or read its own slurm.conf."""
    folder = tmp_path / "clusters.d"
    folder.mkdir()
    (folder / "gpuportal.toml").write_text('name = "gpuportal"\ntitle = "GPU cluster"\ndefault = true\n')
    own = f'slurm_conf = "{CONF_B}"\n' if request.param == "slurm_conf" else ""
    (folder / "cluster-b.toml").write_text(f'name = "{B}"\ntitle = "Cluster B"\nadapter = "sudo"\n{own}')
    settings.CLUSTERS_DIR = str(folder)
    default, other = Slurm.from_settings(), Slurm.from_settings(B)
    assert other.runner.slurm_conf == (CONF_B if own else None)
    return default, other


def ended(slurm: Slurm, job_id: str) -> AccountedJob:
    """The job's accounting row once it has ended and its partition is filled in (polled)."""
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:
        rows = [row for row in slurm.accounting(job_ids=[job_id]).rows if row.job_id == job_id]
        if rows and rows[0].end_time is not None and rows[0].partition:
            return rows[0]
        assert time.monotonic() < deadline, f"job {job_id} on {slurm.cluster}: {rows}"
        time.sleep(0.5)


def test_each_adapter_lists_only_its_own_clusters_nodes(clusters):
    default, other = clusters
    assert (default.cluster, other.cluster) == ("gpuportal", B)
    nodes = other.nodes()
    assert nodes.malformed == 0 and {row.node for row in nodes.rows} == {"b-node1"}
    assert {row.partition: row.gpus for row in nodes.rows}["gpu"] == {"a100": 2}
    names = {row.node for row in default.nodes().rows}
    assert names and "b-node1" not in names and all(name.startswith("gpu-node") for name in names)


def test_alice_submits_to_cluster_b_and_only_its_adapter_sees_the_job(clusters):
    default, other = clusters
    comment = f"gpuportal:clusters-{secrets.token_hex(6)}"
    since = datetime.now(UTC) - timedelta(seconds=5)
    job_id = other.submit(script=SCRIPT.format(options="--gres=gpu:2", command="sleep 2"), user="alice",
                          comment=comment)
    try:
        queued = [job for job in other.queue(finished=True).rows if job.comment == comment]
        assert [job.job_id for job in queued] == [job_id] and queued[0].user == "alice"
        # Job ids are per cluster: the default cluster's queue may hold a job with this id, never this one.
        assert comment not in {job.comment for job in default.queue(finished=True).rows}
        row = ended(other, job_id)
        assert (row.base_state, row.nodes, row.gpus, row.partition) == ("COMPLETED", "b-node1", 2, "gpu")
        assert comment in row.comment + row.submit_line
        assert comment not in {row.comment for row in default.accounting(since=since, users=["alice"]).rows}
        deadline = time.monotonic() + SLURM_PATIENCE
        while comment not in {row.comment for row in other.accounting(since=since, users=["alice"]).rows}:
            assert time.monotonic() < deadline
            time.sleep(0.5)
    finally:
        other.cancel(job_id=job_id, user="alice")


def test_a_batch_of_submissions_and_a_cancel_on_cluster_b(clusters):
    """Several jobs go through one sudo's sbatch-batch (`-M cluster-b`); scancel -M ends one."""
    default, other = clusters
    tag = secrets.token_hex(6)
    comments = [f"gpuportal:clusters-{tag}-{n}" for n in range(2)]
    with other.submitter(user="alice", jobs=2) as submit:
        job_ids = [submit(script=SCRIPT.format(options="--hold", command="sleep 60"), comment=comment)
                   for comment in comments]
    try:
        queued = {job.job_id: job for job in other.queue().rows}
        assert [queued[job_id].comment for job_id in job_ids] == comments
        assert all(queued[job_id].reason == "JobHeldUser" for job_id in job_ids)
        other.cancel(job_id=job_ids[0], user="alice")
        assert ended(other, job_ids[0]).base_state == "CANCELLED"
        assert job_ids[1] in {job.job_id for job in other.queue().rows}
        assert not set(comments) & {job.comment for job in default.queue().rows}
    finally:
        for job_id in job_ids:
            other.cancel(job_id=job_id, user="alice")


def _assocs(cluster: str, account: str) -> list[str]:
    return subprocess.run(["sacctmgr", "--noheader", "--parsable2", "show", "assoc", f"cluster={cluster}",
                           f"account={account}", "format=Account,User,GrpTRESMins"],
                          capture_output=True, text=True, check=True, timeout=30).stdout.splitlines()


def test_a_projects_budget_on_cluster_b_is_on_its_association_alone(clusters):
    default, other = clusters
    account = f"cl{secrets.token_hex(4)}"
    try:
        for slurm in (default, other):
            slurm.account_add(account=account, parent="projects", description="clusters test")
        other.account_users_add(account=account, users=["alice", "bob"])
        other.account_users_remove(account=account, users=["bob"])
        other.account_budget_set(account=account, minutes=90)
        assert _assocs(B, account) == [f"{account}||gres/gpu=90", f"{account}|alice|"]
        assert _assocs("gpuportal", account) == [f"{account}||"]
        assert other.account_members(accounts=[account]) == {account: {"alice"}}
        assert default.account_members(accounts=[account]) == {account: set()}
        # sshare -M prints a CLUSTER: heading even with --noheader: it is no row.
        (budget,) = other.gpu_budgets(accounts=[account]).rows
        assert (budget.account, budget.limit_minutes) == (account, 90)
        (budget,) = default.gpu_budgets(accounts=[account]).rows
        assert budget.limit_minutes is None
        other.account_budget_set(account=account, minutes=None)
        assert _assocs(B, account)[0] == f"{account}||"
    finally:
        with contextlib.suppress(subprocess.SubprocessError):
            subprocess.run(["sacctmgr", "-i", "delete", "account", account], capture_output=True, timeout=30,
                           check=False)

