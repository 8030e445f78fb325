"""The policy from the cluster snapshot, settings and profiles; published as a file for the hub.

The hub cannot read the portal's database, so the portal writes the policy as JSON
(settings.POLICY_FILE, world-readable, written atomically) whenever the poll cycle or a profile
changes it, and the spawner re-reads it when its modification time changes.
"""

import math
from collections.abc import Iterable
from typing import Any

from django.conf import settings

from portal.accounts.models import User
from portal.cluster.models import Node, Partition
from portal.cluster.selectors import snapshots_by_cluster
from portal.core.published import file_publish
from portal.policy.models import ResourceProfile
from portal.policy.rules import ClusterRules, GroupRules, PartitionRules, Policy, Profile
from slurm.clusters import Clusters, clusters_from_settings


def _partition_rules(partition: Partition, nodes: list[Node]) -> PartitionRules:
    resources: dict[str, Any] = settings.POLICY_PARTITION_RESOURCES
    sizes = {**resources.get("*", {}), **resources.get(partition.name, {})}
    members = [node for node in nodes if partition.name in node.partitions]
    if members:
        gpus_per_node = max(sum(node.gpus.values()) for node in members)
    else:  # no node rows (yet): the partition's GPUs spread over its nodes
        total = sum(gpu.total for gpu in partition.gpus.all())
        gpus_per_node = math.ceil(total / max(partition.node_count, 1))
    site_hours = settings.SITE_MAX_WALLTIME_MINUTES / 60
    max_hours = site_hours if partition.max_time is None else min(
        partition.max_time.total_seconds() / 3600, site_hours)
    return PartitionRules(
        name=partition.name, nodes=partition.node_count, gpus_per_node=gpus_per_node, max_hours=max_hours,
        cpus_per_node=max((node.cpus_total for node in members), default=0), **sizes)


def _group_rules(data: dict[str, Any]) -> GroupRules:
    return GroupRules(**{key: tuple(value) if key in ("partitions", "environments") and value is not None
                         else value for key, value in data.items()})


def _groups(configured: dict[str, dict[str, Any]]) -> dict[str, GroupRules]:
    return {name: _group_rules(rules) for name, rules in configured.items()}


def _snapshot(partitions: list[Partition], nodes: list[Node]) -> tuple[dict[str, PartitionRules], str]:
    """A cluster's partitions as the policy sizes them, and its default one."""
    default = next((p.name for p in partitions if p.is_default), partitions[0].name if partitions else "")
    return {p.name: _partition_rules(p, nodes) for p in partitions}, default


def policy_current(*, with_members: bool = False) -> Policy:
    """The policy now: a few queries (every configured cluster's partitions and nodes at once,
    profiles). Each cluster other than the default one gets its own snapshot and its file's limits
    and profiles (#38). The users' groups are for the published file only (the portal reads them
    from the user at hand)."""
    clusters = clusters_from_settings()
    names = [cluster.name for cluster in clusters.all]
    partitions, nodes = snapshots_by_cluster(names)
    snapshots = {name: _snapshot(partitions[name], nodes[name]) for name in names}
    home = clusters.default  # its file's limits and profiles, where it gives them, are the site's
    members = User.objects.filter(is_active=True).exclude(ldap_groups=[]).order_by("username").values_list(
        "username", "ldap_groups") if with_members else []
    return Policy(
        partitions=snapshots[home.name][0],
        default_partition=snapshots[home.name][1],
        groups=_groups(settings.POLICY_GROUPS if home.groups is None else home.groups),
        profiles={p.name: Profile(name=p.name, title=p.title, partition=p.partition, gpus=p.gpus,
                                  hours=p.hours, nodes=p.nodes, groups=tuple(p.groups or ()))
                  for p in ResourceProfile.objects.all() if home.profiles is None or p.name in home.profiles},
        members={username: tuple(groups) for username, groups in members},
        clusters={cluster.name: ClusterRules(
            partitions=snapshots[cluster.name][0], default_partition=snapshots[cluster.name][1],
            profiles=cluster.profiles, groups=None if cluster.groups is None else _groups(cluster.groups))
            for cluster in clusters.all if not cluster.default},
    )


def partitions_offered(policy: Policy, clusters: Clusters,
                       groups: Iterable[str] | None = None) -> list[tuple[PartitionRules, str]]:
    """The forms' partition pickers with several clusters (#38): one entry per partition and size,
    with the names of the clusters (space-separated) whose snapshot has it so, whose file offers it
    and, given the user's `groups`, whose limits allow it. The default cluster's come first."""
    offered: dict[PartitionRules, list[str]] = {}
    for known in sorted(clusters.all, key=lambda cluster: not cluster.default):
        on = policy.on(known.name)
        allowed = None if groups is None else on.rules_for(groups).partitions
        for partition in on.partitions.values():
            refused = known.refusal("partition", partition.name)
            if not refused and (allowed is None or partition.name in allowed):
                offered.setdefault(partition, []).append(known.name)
    return [(partition, " ".join(sorted(names))) for partition, names in offered.items()]


def user_groups(user: User) -> list[str]:
    """The LDAP groups the policy goes by (synced at every login; the hub gets the same through OAuth)."""
    return list(user.ldap_groups or [])


def policy_publish(*, policy: Policy | None = None) -> bool:
    """Write the policy file if its content changed; True when written."""
    return file_publish(settings.POLICY_FILE, (policy or policy_current(with_members=True)).to_json())
