"""The policy's rules as plain functions, its construction from the snapshot, and the file it publishes."""

import json
import stat
from pathlib import Path

import pytest

from portal.policy.rules import (
    SERVER_NAME,
    GroupRules,
    PartitionRules,
    Policy,
    PolicyRefusal,
    Profile,
    SessionRequest,
    Usage,
    job_limits_check,
    session_resolve,
)
from portal.policy.services import policy_current, policy_publish

GPU = PartitionRules(name="gpu", nodes=2, gpus_per_node=4, max_hours=168, cpus_per_node=64)
POLICY = Policy(
    partitions={"gpu": GPU, "debug": PartitionRules(name="debug", nodes=2, gpus_per_node=4, max_hours=1)},
    default_partition="gpu",
    groups={"*": GroupRules(max_gpus=1, max_hours=4, max_sessions=1, partitions=("gpu",)),
            "ml": GroupRules(max_gpus=8, max_hours=48, environments=("pytorch",)),
            "vision": GroupRules(max_gpus=4, max_hours=24, max_sessions=5, partitions=("debug",))},
    profiles={"big": Profile(name="big", title="4 GPUs · 24 h", partition="gpu", gpus=4, hours=24,
                             groups=("ml",))},
)


def resolve(groups=(), usage=None, **request):
    return session_resolve(POLICY, groups=groups, request=SessionRequest(**request), usage=usage or Usage())


def test_a_cpu_only_session_gets_two_cores_and_8_gb_not_a_gpus_share():
    size = resolve(gpus=0)
    assert (size.cpus, size.mem_gb) == (2, 8)
    assert (resolve(gpus=1).cpus, resolve(gpus=1).mem_gb) == (8, 48)


def test_gpus_are_checked_per_node_not_against_the_partitions_total():
    assert resolve(groups=["ml"], gpus=4, nodes=2).gpus == 4  # 8 GPUs over two nodes of 4
    with pytest.raises(PolicyRefusal) as refusal:
        resolve(groups=["ml"], gpus=5)  # 8 in the partition, but 4 per node
    assert refusal.value.fields == {"gpus": "Partition gpu has at most 4 GPUs per node."}


def test_groups_merge_to_the_most_generous_and_unknown_users_get_the_default_group():
    rules = POLICY.rules_for(["ml", "vision"])
    assert (rules.max_gpus, rules.max_hours, rules.max_sessions) == (8, 48, 5)
    assert rules.partitions is None and rules.environments is None  # ml allows every partition
    assert POLICY.rules_for(["nobody"]) == POLICY.groups["*"]
    with pytest.raises(PolicyRefusal, match="may not use partition debug; choose one of: gpu"):
        resolve(partition="debug")
    with pytest.raises(PolicyRefusal, match="may not use environment tensorflow"):
        resolve(groups=["ml"], environment="tensorflow")


def test_the_default_time_is_capped_by_the_partition_and_the_group():
    assert resolve().hours == 4  # the default group's cap
    assert resolve(groups=["ml"], partition="debug").hours == 1
    assert resolve(groups=["ml"]).hours == 8


def test_profiles_are_offered_to_their_groups_and_fields_override_them():
    assert [p.name for p in POLICY.profiles_for(["ml"])] == ["big"] and POLICY.profiles_for([]) == []
    size = resolve(groups=["ml"], profile="big", hours=2)
    assert (size.gpus, size.hours, size.profile) == (4, 2, "big")
    with pytest.raises(PolicyRefusal, match="Unknown profile 'big'; yours: none"):
        resolve(profile="big")


def test_concurrent_sessions_and_gpus_in_use_count():
    with pytest.raises(PolicyRefusal) as refusal:
        resolve(usage=Usage(sessions=1, gpus=1))
    assert set(refusal.value.fields) == {"gpus", "name"}


def test_jobs_get_the_groups_partitions_and_walltime():
    assert job_limits_check(POLICY, groups=["ml"], partition="gpu", minutes=48 * 60) == {}
    assert "at most 2880 minutes" in job_limits_check(POLICY, groups=["ml"], partition="gpu",
                                                      minutes=48 * 60 + 1)["time_limit"]
    assert "partition" in job_limits_check(POLICY, groups=[], partition="debug", minutes=5)


@pytest.mark.parametrize(("name", "valid"), [
    ("a", True), ("my-server", True), ("a1-b2", True), ("x" * 30, True), ("x" * 31, False),
    ("1abc", False), ("-a", False), ("a-", False), ("a--b", False), ("A", False), ("a_b", False), ("", False),
])
def test_server_names_follow_jupyterhub_6(name, valid):
    from jupyterhub.slugs import is_valid_safe_slug

    assert bool(SERVER_NAME.fullmatch(name)) == valid == is_valid_safe_slug(name)


def test_the_json_the_hub_reads_round_trips():
    assert Policy.from_json(POLICY.to_json()) == POLICY
    with pytest.raises(ValueError, match="format"):
        Policy.from_json(json.dumps({"version": 99}))


def test_the_policy_follows_the_snapshot_and_is_published_once_per_change(cluster_policy, settings):
    policy = policy_current()
    assert policy.partitions["gpu"] == PartitionRules(name="gpu", nodes=2, gpus_per_node=4, max_hours=168,
                                                      cpus_per_node=64)
    assert policy.partitions["debug"].max_hours == 1 and policy.default_partition == "gpu"
    path = Path(cluster_policy)
    assert Policy.from_json(path.read_text()) == policy  # written when the profile was saved
    assert stat.S_IMODE(path.stat().st_mode) == 0o644  # the hub's account reads it
    assert policy_publish() is False  # unchanged: not rewritten
    sizes = settings.POLICY_PARTITION_RESOURCES["*"]
    settings.POLICY_PARTITION_RESOURCES = {"*": {**sizes, "cpus_without_gpu": 4}}
    assert policy_publish() is True
    assert Policy.from_json(path.read_text()).partitions["gpu"].cpus_without_gpu == 4
