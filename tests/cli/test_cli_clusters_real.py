"""`gpuportal submit --cluster cluster-b --wait` on the bed's two clusters (#38): the job runs on
cluster-b's node (its output names the cluster), its own cluster's cycle follows it to COMPLETED, and
`job` and `logs` find it by its portal number."""

import contextlib
import threading

import pytest
from django.db import connection

from portal.jobs.models import IN_SLURM_STATES, Job
from portal.poll.cycle import cluster_poll_cycle, poll_cycle
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from tests.clusters import clusters_dir
from tests.hub import wait_for
from tests.poll_helpers import slurm_poll
from tests.slurm_waits import SLURM_PATIENCE

pytestmark = pytest.mark.integration

B = "cluster-b"


@pytest.fixture
def both_clusters_polled(transactional_db, tmp_path, settings):
    """Both of the bed's clusters configured, and beat's work for them: the default cluster's cycle
    and cluster-b's own, every second while the test runs. Cancels what the test left in Slurm."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path)
    adapters = {"gpuportal": Slurm.from_settings(), B: Slurm.from_settings(B)}
    wait_for(lambda: slurm_poll(slurm=adapters["gpuportal"]).error == "", SLURM_PATIENCE,
             "a successful Slurm poll", interval=1)
    stop = threading.Event()

    def run() -> None:
        try:
            while not stop.is_set():
                poll_cycle(slurm=adapters["gpuportal"])
                cluster_poll_cycle(cluster=B, slurm=adapters[B])
                stop.wait(1)
        finally:
            connection.close()

    thread = threading.Thread(target=run, name="poll-cycles", daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)
    for job in Job.objects.filter(state__in=IN_SLURM_STATES).exclude(slurm_job_id="").select_related("user"):
        with contextlib.suppress(SlurmError):
            adapters[job.cluster].cancel(job_id=job.slurm_job_id, user=job.user.username)


def test_submit_with_cluster_runs_there_and_waits_for_it(token_cli, both_clusters_polled):
    done = token_cli("submit", "custom", "-p", "commands=echo ran on $SLURM_CLUSTER_NAME", "--gpus", "1",
                     "--time", "5", "--name", "on-b", "--cluster", B, "--wait", "--interval", "0.5",
                     timeout=SLURM_PATIENCE + 60)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert f"(on-b) on {B}; waiting" in done.stderr and "COMPLETED" in done.stderr
    job = Job.objects.get(name="on-b")
    assert job.cluster == B and job.slurm_job_id
    shown = dict(line.split("\t", 1) for line in token_cli("job", str(job.pk)).stdout.splitlines())
    assert (shown["Cluster"], shown["State"]) == (B, "COMPLETED")
    output = token_cli("logs", str(job.pk)).stdout
    assert " on b-node1 " in output and output.endswith(f"\nran on {B}\n"), output
