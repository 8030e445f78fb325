"""The bed's second cluster, cluster-b (#38, slurm/dev/services/cluster_b.sh), as a user of a real
multi-cluster site sees it: one slurmdbd, `-M cluster-b` from the default client configuration,
and the default cluster unchanged for everything that does not name it."""

import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.slurm_waits import SLURM_PATIENCE

pytestmark = pytest.mark.integration

CTL = Path(__file__).resolve().parents[2] / "slurm/dev/slurmctld.sh"
CLUSTER = "cluster-b"


def as_alice(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", "alice", "--", *argv], cwd="/home/alice", capture_output=True,
                          text=True, timeout=60, check=check)


def submit(*options: str, command: str) -> str:
    """A job as alice; its id (`--parsable` answers `id;cluster` with -M)."""
    out = as_alice("sbatch", "--parsable", "--output=/dev/null", *options, "--wrap", command).stdout
    return out.strip().split(";")[0]


def ended(job_id: str, *cluster: str) -> list[str]:
    """State|NodeList|AllocTRES of the job once sacct shows it ended, polled (a finished job's row
    fills in over a few seconds)."""
    deadline = time.monotonic() + SLURM_PATIENCE
    while True:
        row = as_alice("sacct", *cluster, "-X", "-n", "-P", "-j", job_id,
                       "-o", "State,NodeList,AllocTRES,Partition").stdout.strip().split("|")
        if row[0] not in ("", "PENDING", "RUNNING", "COMPLETING") and row[-1]:
            return row
        assert time.monotonic() < deadline, f"job {job_id} on {cluster or 'the default cluster'}: {row}"
        time.sleep(0.5)


def test_a_gpu_job_on_cluster_b_runs_on_its_node_and_only_dash_m_sees_it():
    name = f"cb-{uuid.uuid4().hex[:12]}"
    job_id = submit("-M", CLUSTER, "--gres=gpu:2", f"--job-name={name}", "--time=2", command="sleep 3")
    try:
        assert name in as_alice("squeue", "-M", CLUSTER, "-h", "-o", "%j").stdout
        assert name not in as_alice("squeue", "-h", "-a", "-o", "%j").stdout
        state, nodes, tres, partition = ended(job_id, "-M", CLUSTER)
        assert (state, nodes, partition) == ("COMPLETED", "b-node1", "gpu") and "gres/gpu=2" in tres
    finally:
        as_alice("scancel", "-M", CLUSTER, job_id, check=False)
    default_jobs = as_alice("sacct", "-X", "-n", "-P", "-S", "now-1hour", "-o", "JobName").stdout
    assert name not in default_jobs.split()


def test_the_portals_adapters_see_only_the_default_cluster(slurm):
    """The poll cycle's reads (squeue, sacct, sinfo) name no cluster: cluster-b's jobs and node stay
    out of the portal, through the sudo adapter and slurmrestd alike."""
    comment = f"gpuportal:{uuid.uuid4()}"
    since = datetime.now(UTC) - timedelta(seconds=5)
    job_id = submit("-M", CLUSTER, f"--comment={comment}", "--time=2", command="sleep 2")
    try:
        assert comment not in {job.comment for job in slurm.queue(finished=True).rows}
        ended(job_id, "-M", CLUSTER)
        assert comment not in {job.comment for job in slurm.accounting(since=since, users=["alice"]).rows}
        assert "b-node1" not in {node.node for node in slurm.nodes().rows}
    finally:
        as_alice("scancel", "-M", CLUSTER, job_id, check=False)


def test_both_clusters_share_one_slurmdbd_with_the_same_associations():
    clusters = as_alice("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster").stdout.split()
    assert {"gpuportal", CLUSTER} <= set(clusters)
    for cluster in ("gpuportal", CLUSTER):
        assocs = as_alice("sacctmgr", "-n", "-P", "show", "assoc", f"cluster={cluster}", "user=alice",
                          "format=Account,QOS").stdout.split()
        assert "portal|normal" in assocs, (cluster, assocs)
    sinfo = as_alice("sinfo", "-M", "all", "-h", "-o", "%P %G").stdout
    assert "gpu* gpu:a100:2" in sinfo and "gpu* gpu:a100:4" in sinfo
    # Without -M: the default cluster alone, as before there was a second one.
    assert "gpu:a100:2" not in as_alice("sinfo", "-h", "-o", "%P %G").stdout


@pytest.mark.fault
def test_cluster_b_controller_down_leaves_the_default_cluster_working():
    subprocess.run([CTL, "stop", CLUSTER], check=True, capture_output=True, timeout=120)
    try:
        refused = as_alice("sbatch", "-M", CLUSTER, "--parsable", "--output=/dev/null", "--wrap", "true",
                           check=False)
        assert refused.returncode != 0 and CLUSTER in refused.stderr, refused
        job_id = submit("--time=2", command="true")
        state, nodes, _, _ = ended(job_id)
        assert state == "COMPLETED" and nodes.startswith("gpu-node")
    finally:
        subprocess.run([CTL, "start", CLUSTER], check=True, capture_output=True, timeout=120)
    assert ended(submit("-M", CLUSTER, "--time=2", command="true"), "-M", CLUSTER)[0] == "COMPLETED"
