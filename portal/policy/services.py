"""The policy from the cluster snapshot, settings and profiles; published as a file for the hub.

The hub cannot read the portal's database, so the portal writes the policy as JSON
(settings.POLICY_FILE, world-readable, written atomically) whenever the poll cycle or a profile
changes it, and the spawner re-reads it when its modification time changes.
"""

import math
from typing import Any

from django.conf import settings

from portal.accounts.models import User
from portal.cluster.models import Node, Partition
from portal.core.published import file_publish
from portal.policy.models import ResourceProfile
from portal.policy.rules import GroupRules, PartitionRules, Policy, Profile


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


def policy_current(*, with_members: bool = False) -> Policy:
    """The policy now: a few queries (partitions, nodes, profiles). The users' groups are for the
    published file only (the portal reads them from the user at hand)."""
    nodes = list(Node.objects.all())
    partitions = list(Partition.objects.prefetch_related("gpus"))
    default = next((p.name for p in partitions if p.is_default), partitions[0].name if partitions else "")
    members = User.objects.filter(is_active=True).exclude(ldap_groups=[]).order_by("username").values_list(
        "username", "ldap_groups") if with_members else []
    return Policy(
        partitions={p.name: _partition_rules(p, nodes) for p in partitions},
        default_partition=default,
        groups={name: _group_rules(rules) for name, rules in settings.POLICY_GROUPS.items()},
        profiles={p.name: Profile(name=p.name, title=p.title, partition=p.partition, gpus=p.gpus,
                                  hours=p.hours, nodes=p.nodes, groups=tuple(p.groups or ()))
                  for p in ResourceProfile.objects.all()},
        members={username: tuple(groups) for username, groups in members},
    )


def user_groups(user: User) -> list[str]:
    """The LDAP groups the policy goes by (synced at every login; the hub gets the same through OAuth)."""
    return list(user.ldap_groups or [])


def policy_publish(*, policy: Policy | None = None) -> bool:
    """Write the policy file if its content changed; True when written."""
    return file_publish(settings.POLICY_FILE, (policy or policy_current(with_members=True)).to_json())
