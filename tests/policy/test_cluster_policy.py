"""Each cluster's own policy (#38): its partitions from its own snapshot, its groups' limits and the
profiles it offers from its cluster file, applied alike by the portal's sessions, jobs and policy API
and by the hub's spawner (through the published file). On the bed: test_cluster_policy_real.py."""

import json
import re

import pytest

from portal.cluster.models import Partition, PartitionGpu
from portal.policy.models import ResourceProfile
from portal.policy.rules import ClusterRules, GroupRules, PartitionRules, Policy, Usage
from portal.policy.services import policy_current, policy_publish
from portal.sessions.models import Session
from slurm.clusters import ClustersError, cluster_read, clusters_from_settings
from spawners.options import OptionError, rebuild_options
from tests import clusters
from tests.clusters import clusters_dir
from tests.sessions.factories import PartitionFactory
from tests.sessions.test_api import URL, hub  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db

B_POLICY = """profiles = ["small"]

[policy.groups."*"]
max_gpus = 1
max_hours = 2
"""


@pytest.fixture
def two_clusters(tmp_path, settings):
    """gpuportal (the default, the site's POLICY_GROUPS) and cluster-b (1 GPU and 2 h for anybody),
    each with its own snapshot: gpuportal's `gpu` has 4 GPUs per node, cluster-b's `gpu` 2."""
    settings.CLUSTERS_DIR = clusters_dir(tmp_path, b=B_POLICY)
    settings.POLICY_GROUPS = {"*": {"max_gpus": 4, "max_hours": 24}}
    PartitionFactory()
    b = Partition.every_cluster.create(cluster="cluster-b", name="gpu", is_default=True, node_count=1,
                                       cpus_total=16)
    PartitionGpu.objects.create(partition=b, gpu_type="a100", total=2)
    Partition.every_cluster.create(cluster="cluster-b", name="bonly", node_count=1, cpus_total=16)
    for name, title in (("small", "1 GPU · 1 h"), ("big", "4 GPUs · 8 h")):
        ResourceProfile.objects.create(name=name, title=title, partition="gpu", gpus=int(title[0]), hours=1)


def test_another_cluster_has_its_own_partitions_limits_and_profiles(two_clusters):
    policy = policy_current()
    assert set(policy.partitions) == {"gpu"} and policy.partitions["gpu"].gpus_per_node == 4
    assert policy.rules_for([]).max_gpus == 4 and set(policy.profiles) == {"small", "big"}
    on_b = policy.on("cluster-b")
    assert set(on_b.partitions) == {"gpu", "bonly"} and on_b.partitions["gpu"].gpus_per_node == 2
    assert on_b.default_partition == "gpu"
    assert (on_b.rules_for([]).max_gpus, on_b.rules_for([]).max_hours) == (1, 2)
    assert set(on_b.profiles) == {"small"}
    assert policy.on("gpuportal") is policy and policy.on("") is policy


def test_a_cluster_not_polled_yet_is_checked_against_the_default_ones_partitions():
    default = PartitionRules(name="gpu", nodes=1, gpus_per_node=4, max_hours=24)
    policy = Policy(partitions={"gpu": default}, default_partition="gpu",
                    groups={"*": GroupRules(max_gpus=4)},
                    clusters={"cluster-b": ClusterRules(groups={"*": GroupRules(max_gpus=1)})})
    on_b = policy.on("cluster-b")
    assert on_b.partitions == {"gpu": default} and on_b.default_partition == "gpu"
    assert on_b.rules_for([]).max_gpus == 1


def test_the_published_file_carries_each_clusters_policy_for_the_hub(two_clusters, settings, tmp_path):
    settings.POLICY_FILE = str(tmp_path / "policy.json")
    assert policy_publish()
    published = Policy.from_json((tmp_path / "policy.json").read_text())
    assert published == policy_current(with_members=True)
    written = json.loads((tmp_path / "policy.json").read_text())
    assert written["clusters"]["cluster-b"]["profiles"] == ["small"]
    # The hub's spawner refuses what the portal refuses, with cluster-b's limits there.
    clusters = clusters_from_settings()
    with pytest.raises(OptionError, match="at most 2 GPUs per node"):
        rebuild_options({"cluster": "cluster-b", "gpus": 3}, policy=published, groups=[],
                        usage=Usage(), clusters=clusters)
    with pytest.raises(OptionError, match="limit is 1 GPUs"):
        rebuild_options({"cluster": "cluster-b", "gpus": 2}, policy=published, groups=[],
                        usage=Usage(), clusters=clusters)
    assert rebuild_options({"cluster": "gpuportal", "gpus": 3}, policy=published, groups=[],
                           usage=Usage(), clusters=clusters).gpus == 3
    with pytest.raises(OptionError, match="Unknown profile 'big'"):
        rebuild_options({"cluster": "cluster-b", "profile": "big"}, policy=published, groups=[],
                        usage=Usage(), clusters=clusters)


def test_sessions_jobs_and_the_policy_api_go_by_the_sessions_cluster(two_clusters, token_client, hub):  # noqa: F811
    refused = token_client.post(URL, {"name": "on-b", "cluster": "cluster-b", "gpus": 2}, format="json")
    assert refused.status_code == 400
    assert "limit is 1 GPUs" in refused.json()["fields"]["gpus"][0]
    refused = token_client.post(URL, {"name": "on-b", "cluster": "cluster-b", "hours": 3}, format="json")
    assert "at most 2 h" in refused.json()["fields"]["hours"][0]
    assert token_client.post(URL, {"name": "here", "gpus": 2, "hours": 3}, format="json").status_code == 202
    started = token_client.post(URL, {"name": "on-b", "cluster": "cluster-b", "partition": "bonly",
                                      "gpus": 0}, format="json")
    assert started.status_code == 202, started.json()
    assert Session.objects.get(name="on-b").partition == "bonly"
    # A job's group limits (walltime) are its cluster's too.
    job = {"template": "custom", "cluster": "cluster-b",
           "parameters": {"commands": "true", "partition": "bonly", "gpus": 0, "time_limit": 180}}
    refused = token_client.post("/api/v1/jobs/", job, format="json")
    assert refused.status_code == 400, refused.json()
    assert "at most 120 minutes" in refused.json()["fields"]["parameters"]["time_limit"][0], refused.json()

    mine = token_client.get("/api/v1/policy/", {"cluster": "cluster-b"}).json()
    assert mine["cluster"] == "cluster-b" and mine["limits"]["max_gpus"] == 1
    assert {p["name"] for p in mine["partitions"]} == {"gpu", "bonly"}
    assert [p["name"] for p in mine["profiles"]] == ["small"]
    assert token_client.get("/api/v1/policy/").json()["cluster"] == "gpuportal"
    unknown = token_client.get("/api/v1/policy/", {"cluster": "mars; rm -rf /"})
    assert unknown.status_code == 400 and "Unknown cluster" in unknown.json()["fields"]["cluster"][0]


@pytest.mark.parametrize(("policy", "message"), [
    ('policy = "strict"', "policy: a table"),
    ("[policy]\nlimits = 1", "policy: a table whose only field is groups"),
    ('[policy.groups."*"]\nmax_gpu = 1', "policy.groups.*.max_gpu: unknown limit"),
    ('[policy.groups."*"]\nmax_gpus = "all"', "policy.groups.*.max_gpus: a number"),
    ('[policy.groups."*"]\nmax_gpus = true', "policy.groups.*.max_gpus: a number"),
    ('[policy.groups."*"]\nmax_hours = 0', "policy.groups.*.max_hours: more than 0"),
    ('[policy.groups."*"]\npartitions = ["gpu; reboot"]', "policy.groups.*.partitions: a list of names"),
    ('[policy.groups."$(id)"]\nmax_gpus = 1', "an LDAP group's name"),
    ('profiles = []', "profiles: a non-empty list of names"),
])
def test_a_bad_policy_in_a_cluster_file_names_its_field(tmp_path, policy, message):
    path = tmp_path / "b.toml"
    path.write_text(f'name = "cluster-b"\ntitle = "B"\n{policy}\n')
    with pytest.raises(ClustersError, match=re.escape(message)):
        cluster_read(path)


def test_a_good_policy_in_a_cluster_file_is_read(tmp_path):
    path = tmp_path / "b.toml"
    path.write_text(clusters.B + B_POLICY + '\n[policy.groups.ml]\nmax_gpus = 2\npartitions = ["gpu"]\n')
    cluster = cluster_read(path)
    assert cluster.profiles == ("small",)
    assert cluster.groups == {"*": {"max_gpus": 1, "max_hours": 2},
                              "ml": {"max_gpus": 2, "partitions": ["gpu"]}}



def test_the_forms_offer_each_clusters_partitions_with_its_own_sizes(two_clusters, client, user, hub):  # noqa: F811
    client.force_login(user)
    servers = client.get("/servers/").content.decode()
    for cluster, gpus in (("gpuportal", 4), ("cluster-b", 2)):
        assert re.search(rf'<option value="gpu"[^>]* data-clusters="{cluster}"[^>]*>'
                         rf'gpu \(1 node\(s\), {gpus} GPUs', servers)
    assert re.search(r'<option value="bonly"[^>]* data-clusters="cluster-b"', servers)
    compose = client.get("/jobs/new/custom/").content.decode()
    for cluster, gpus in (("gpuportal", 4), ("cluster-b", 2)):
        assert re.search(rf'<option value="gpu"[^>]* data-clusters="{cluster}"\s+data-max-time=""'
                         rf'\s+data-max-gpus="{gpus}"', compose)
