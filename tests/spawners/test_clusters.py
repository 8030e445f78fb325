"""The spawner on several clusters (#38): the `cluster` option, checked against the clusters the hub
loads from the portal's CLUSTERS_DIR; sbatch, scancel and squeue name it with `-M` only where several
are configured; a restarted hub keeps it; an unknown one is a 400 naming `cluster`."""

import os
from pathlib import Path

import pytest
from batchspawner.batchspawner import format_template
from tornado import web

from portal.policy.rules import Usage
from slurm.clusters import Cluster, Clusters
from spawners.options import OptionError, ServerOptions, rebuild_options
from spawners.queue_poller import shared_poller
from spawners.slurm_spawner import PortalSlurmSpawner, apply_portal_options
from tests.clusters import clusters_dir as cluster_files
from tests.spawners.test_options import POLICY, make_spawner, rebuild

ONE = Clusters(all=(Cluster(name="gpuportal", title="GPU", default=True, adapter="sudo"),))
TWO = Clusters(all=(*ONE.all, Cluster(name="cluster-b", title="B", default=False, adapter="sudo")))


@pytest.fixture
def clusters_dir(tmp_path):
    """gpuportal (the default) and cluster-b, as two files; not writable by the test's account."""
    if os.geteuid() != 0:
        pytest.skip("the cluster files must not be the hub's own (slurm/clusters.py)")
    return cluster_files(tmp_path)


def test_the_option_is_a_configured_cluster_kept_only_where_there_are_several():
    assert rebuild({}).cluster == "" and "cluster" not in rebuild({}).as_user_options()
    assert rebuild_with({"cluster": "gpuportal"}, ONE).cluster == ""  # the only one: no -M
    assert rebuild_with({}, TWO).cluster == "gpuportal"  # none: the default one, named
    options = rebuild_with({"cluster": "cluster-b"}, TWO)
    assert options.cluster == "cluster-b" and options.as_user_options()["cluster"] == "cluster-b"
    for bad in ("mars", 3, "CLUSTER-B"):
        with pytest.raises(OptionError, match=r"^cluster must be one of the configured clusters "
                                              r"\(gpuportal, cluster-b\)"):
            rebuild_with({"cluster": bad}, TWO)


def rebuild_with(raw: dict, clusters: Clusters) -> ServerOptions:
    return rebuild_options(raw, policy=POLICY, groups=["portal-users"], usage=Usage(sessions=0, gpus=0),
                           clusters=clusters)


def commands(spawner: PortalSlurmSpawner) -> tuple[str, str]:
    """The sbatch and scancel command lines, as batchspawner renders them."""
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"  # normally from the hub's environment for the job
    subvars = spawner.get_req_subvars()
    return (format_template(spawner.batch_submit_cmd, **subvars),
            format_template(spawner.batch_cancel_cmd, **subvars, job_id="7"))


def test_one_clusters_commands_are_as_before():
    spawner = make_spawner()
    apply_portal_options(spawner, {"gpus": 1})
    assert commands(spawner) == ("/usr/bin/sbatch --parsable", "/usr/bin/scancel 7")
    assert spawner.poller is shared_poller("/usr/bin", 20.0, "")
    assert spawner.poller.slurm.cluster is None


def test_commands_name_the_servers_cluster_and_a_restarted_hub_keeps_it(clusters_dir):
    spawner = make_spawner(clusters_dir=clusters_dir, queue_file="/tmp/queue.json")
    apply_portal_options(spawner, {"gpus": 1, "cluster": "cluster-b"})
    assert spawner.user_options["cluster"] == "cluster-b"
    assert commands(spawner) == ("/usr/bin/sbatch --parsable -M cluster-b", "/usr/bin/scancel -M cluster-b 7")
    # Its own poller (squeue -M cluster-b), which reads the portal's queue file of cluster-b.
    poller = spawner.poller
    assert (poller.slurm.cluster, poller.shared_file) == ("cluster-b", "/tmp/queue.cluster-b.json")
    assert poller.slurm._clusters(None) == ["-M", "cluster-b"]
    spawner.job_id = "12"
    state = spawner.get_state()
    assert state["cluster"] == "cluster-b"
    restarted = make_spawner(clusters_dir=clusters_dir, queue_file="/tmp/queue.json")
    restarted.load_state(state)
    assert restarted.poller is poller
    # The default cluster's servers read the portal's shared queue, named with -M all the same.
    default = make_spawner(clusters_dir=clusters_dir, queue_file="/tmp/queue.json")
    apply_portal_options(default, {"gpus": 1})
    assert (default.poller.slurm.cluster, default.poller.shared_file) == ("gpuportal", "/tmp/queue.json")
    # A state's cluster never reaches a command line unless it is a cluster's name.
    forged = make_spawner(clusters_dir=clusters_dir)
    forged.load_state({**state, "cluster": "b; rm -rf /"})
    assert forged.cluster == ""


def test_an_unknown_cluster_is_a_400_naming_cluster(clusters_dir):
    spawner = make_spawner(clusters_dir=clusters_dir)
    with pytest.raises(web.HTTPError) as error:
        apply_portal_options(spawner, {"gpus": 1, "cluster": "mars"})
    assert error.value.status_code == 400
    assert error.value.log_message.startswith("cluster must be one of the configured clusters")


def test_unusable_cluster_files_are_a_400_naming_cluster(tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    (folder / "x.toml").write_text("name = 3\n")
    spawner = make_spawner(clusters_dir=str(folder))
    with pytest.raises(web.HTTPError) as error:
        apply_portal_options(spawner, {"gpus": 1, "cluster": "x"})
    assert error.value.status_code == 400 and error.value.log_message.startswith("cluster: ")


# --- what a cluster file gives (#38): its partitions, environments, runtimes, data and [spawner] ---

OFFERING = Clusters(all=(*ONE.all, Cluster(
    name="cluster-b", title="Cluster B", default=False, adapter="sudo", partitions=("debug",),
    environments=("pytorch",), runtimes=("podman",))))
PYTORCH = {"environment": "pytorch", "environment_kernel": "pytorch",
           "environment_path": "/opt/gpuportal/envs/pytorch"}
IMAGE = {"container_runtime": "charliecloud", "container_image": "/opt/gpuportal/images/torch.sqfs"}


@pytest.mark.parametrize(("raw", "message"), [
    ({"partition": "gpu"}, "partition: The cluster Cluster B (cluster-b) does not offer the partition 'gpu'; "
                           "it offers: debug."),
    ({**PYTORCH, "environment": "tensorflow", "environment_kernel": "tf"},
     "environment: The cluster Cluster B (cluster-b) does not offer the environment 'tensorflow'"),
    (IMAGE, "container_runtime: The cluster Cluster B (cluster-b) does not offer the runtime 'charliecloud'"),
])
def test_what_the_servers_cluster_does_not_offer_is_refused_naming_the_field(raw, message):
    with pytest.raises(OptionError) as error:
        rebuild_options({"cluster": "cluster-b", **raw}, policy=POLICY, groups=["portal-users"],
                        usage=Usage(sessions=0, gpus=0), clusters=OFFERING,
                        container_runtimes={"charliecloud": {"binary": "/usr/bin/ch-run"}},
                        container_image_dirs=["/opt/gpuportal/images"])
    assert str(error.value).startswith(message)


def test_the_clusters_offer_is_kept_and_its_default_partition_is_one_it_offers():
    options = rebuild_with({"cluster": "cluster-b", "gpus": 1, **PYTORCH}, OFFERING)
    assert (options.partition, options.hours, options.environment.name) == ("debug", 1, "pytorch")
    # The default cluster, whose file leaves them out, offers all the site has.
    assert rebuild_with({"gpus": 1, "partition": "gpu", **PYTORCH}, OFFERING).partition == "gpu"
    assert rebuild_with({"gpus": 1}, OFFERING).partition == "gpu"


def test_a_clusters_spawner_options_and_data_mount_reach_its_servers_script(clusters_dir):
    folder = Path(clusters_dir)
    (folder / "cluster-b.toml").write_text(
        'name = "cluster-b"\ntitle = "Cluster B"\ndata_dir = "/srv/b-data"\n'
        '[spawner]\nprologue = ["module load cuda/12.4"]\n')
    spawner = make_spawner(clusters_dir=clusters_dir, data_dir="/data")
    apply_portal_options(spawner, {"gpus": 1, "cluster": "cluster-b"})
    prologue = _prologue(spawner)
    assert 'ln -s /srv/b-data "$HOME/data"' in prologue and "ln -s /data " not in prologue
    assert prologue.index("ln -s /srv/b-data") < prologue.index("module load cuda/12.4")
    assert spawner.binds() == ["{home}", "/srv/b-data:ro"]
    # The default cluster's servers: the site's data and no lines of cluster-b's.
    apply_portal_options(spawner, {"gpus": 1})
    prologue = _prologue(spawner)
    assert 'ln -s /data "$HOME/data"' in prologue and "module load" not in prologue
    assert spawner.binds() == ["{home}", "/data:ro"]


def _prologue(spawner: PortalSlurmSpawner) -> str:
    spawner.req_keepvars = "JUPYTERHUB_API_TOKEN"
    return spawner.get_req_subvars()["prologue"]
