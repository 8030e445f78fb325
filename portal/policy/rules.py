"""The one policy for sessions and jobs, as plain data and checks.

Pure Python on purpose (no Django, no database): the portal builds a `Policy` from its cluster
snapshot, settings and admin-defined profiles (`portal.policy.services`) and publishes it as JSON;
the hub's spawner reads that file and runs the very same `session_resolve`. So the form, the REST
API and the hub API refuse the same requests with the same messages.
"""

import json
import math
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

# JupyterHub 6's rule for new named servers (jupyterhub.slugs.is_valid_safe_slug).
SERVER_NAME = re.compile(r"^(?=.{1,30}$)[a-z](?:-?[a-z0-9])*$")
SERVER_NAME_RULE = ("1 to 30 lowercase letters, digits or single hyphens, starting with a letter and "
                    "ending with a letter or digit.")
ANY_GROUP = "*"
FORMAT_VERSION = 1


class PolicyRefusal(ValueError):
    """Requests the policy refuses: one message per field, fit to show a user."""

    def __init__(self, fields: dict[str, str]) -> None:
        super().__init__(" ".join(fields.values()))
        self.fields = fields


@dataclass(frozen=True)
class PartitionRules:
    """One partition as the last cluster poll saw it, with the size of a session's share."""

    name: str
    nodes: int
    gpus_per_node: int
    max_hours: float  # the partition's time limit, capped by the site's maximum
    cpus_per_node: int = 0  # 0: unknown
    cpus_per_gpu: int = 8
    mem_gb_per_gpu: int = 48
    cpus_without_gpu: int = 2
    mem_gb_without_gpu: int = 8

    def cpus(self, gpus: int) -> int:
        return gpus * self.cpus_per_gpu if gpus else self.cpus_without_gpu

    def mem_gb(self, gpus: int) -> int:
        return gpus * self.mem_gb_per_gpu if gpus else self.mem_gb_without_gpu


@dataclass(frozen=True)
class GroupRules:
    """Defaults and maxima of an LDAP group; `partitions`/`environments` None: all of them."""

    max_gpus: int = 4  # across the user's sessions at once
    max_hours: float = 168.0
    max_sessions: int = 3
    partitions: tuple[str, ...] | None = None
    environments: tuple[str, ...] | None = None
    default_gpus: int = 1
    default_hours: float = 8.0

    def merge(self, other: "GroupRules") -> "GroupRules":
        """A member of several groups gets the most generous of each."""
        def union(a: tuple[str, ...] | None, b: tuple[str, ...] | None) -> tuple[str, ...] | None:
            return None if a is None or b is None else tuple(sorted(set(a) | set(b)))
        return GroupRules(
            max_gpus=max(self.max_gpus, other.max_gpus), max_hours=max(self.max_hours, other.max_hours),
            max_sessions=max(self.max_sessions, other.max_sessions),
            partitions=union(self.partitions, other.partitions),
            environments=union(self.environments, other.environments),
            default_gpus=max(self.default_gpus, other.default_gpus),
            default_hours=max(self.default_hours, other.default_hours),
        )


@dataclass(frozen=True)
class Profile:
    """An admin-defined resource profile ("1 GPU · 8 h"); `groups` empty: offered to everybody."""

    name: str
    title: str
    partition: str
    gpus: int
    hours: float
    nodes: int = 1
    groups: tuple[str, ...] = ()

    def offered_to(self, groups: Iterable[str]) -> bool:
        return not self.groups or bool(set(self.groups) & set(groups))


@dataclass(frozen=True)
class ClusterRules:
    """A cluster other than the default one (#38): its partitions as its own poll cycle last saw them
    (none yet: the default cluster's, and Slurm decides), its groups' limits where its file gives
    them (None: the site's), and the profiles it offers (None: all)."""

    partitions: dict[str, PartitionRules] = field(default_factory=dict)
    default_partition: str = ""
    groups: dict[str, GroupRules] | None = None
    profiles: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Policy:
    """The default cluster's policy; `on(name)` gives another cluster's."""

    partitions: dict[str, PartitionRules]
    default_partition: str
    groups: dict[str, GroupRules] = field(default_factory=dict)
    profiles: dict[str, Profile] = field(default_factory=dict)
    # Each portal user's LDAP groups as synced at login: the hub goes by these, not by what it was
    # told at its own last login (a session the portal starts may come before any hub login).
    members: dict[str, tuple[str, ...]] = field(default_factory=dict)
    clusters: dict[str, ClusterRules] = field(default_factory=dict)

    def on(self, cluster: str) -> "Policy":
        """The policy of work on `cluster`: this one for the default cluster (or '', a one-cluster
        site's), that cluster's partitions, limits and profiles for another one."""
        rules = self.clusters.get(cluster)
        if rules is None:
            return self
        return replace(
            self, clusters={},
            partitions=rules.partitions or self.partitions,
            default_partition=rules.default_partition if rules.partitions else self.default_partition,
            groups=self.groups if rules.groups is None else rules.groups,
            profiles={name: profile for name, profile in self.profiles.items()
                      if rules.profiles is None or name in rules.profiles})

    def groups_of(self, username: str, fallback: Iterable[str] = ()) -> list[str]:
        return list(self.members[username]) if username in self.members else list(fallback)

    def rules_for(self, groups: Iterable[str]) -> GroupRules:
        matching = [self.groups[name] for name in groups if name in self.groups]
        if not matching:
            return self.groups.get(ANY_GROUP, GroupRules())
        merged = matching[0]
        for rules in matching[1:]:
            merged = merged.merge(rules)
        return merged

    def profiles_for(self, groups: Iterable[str]) -> list[Profile]:
        groups = list(groups)
        return [profile for profile in self.profiles.values() if profile.offered_to(groups)]

    def to_json(self) -> str:
        return json.dumps({"version": FORMAT_VERSION, **asdict(self)}, sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str) -> "Policy":
        data = json.loads(text)
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"policy format {data.get('version')!r}, expected {FORMAT_VERSION}")
        return cls(
            partitions=_partitions(data["partitions"]),
            default_partition=data["default_partition"],
            groups=_groups(data["groups"]),
            profiles={name: Profile(**_tuples(profile, "groups"))
                      for name, profile in data["profiles"].items()},
            members={name: tuple(groups) for name, groups in data.get("members", {}).items()},
            clusters={name: ClusterRules(
                partitions=_partitions(rules["partitions"]), default_partition=rules["default_partition"],
                groups=None if rules["groups"] is None else _groups(rules["groups"]),
                profiles=None if rules["profiles"] is None else tuple(rules["profiles"]))
                for name, rules in data.get("clusters", {}).items()},
        )


def _partitions(data: dict[str, Any]) -> dict[str, PartitionRules]:
    return {name: PartitionRules(**rules) for name, rules in data.items()}


def _groups(data: dict[str, Any]) -> dict[str, GroupRules]:
    return {name: GroupRules(**_tuples(rules, "partitions", "environments")) for name, rules in data.items()}


def _tuples(data: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {**data, **{key: tuple(data[key]) for key in keys if data.get(key) is not None}}


@dataclass(frozen=True)
class SessionRequest:
    """What a user asked for; None: not given (the profile's value, then the default)."""

    partition: str | None = None
    gpus: int | None = None
    hours: float | None = None
    nodes: int | None = None
    environment: str = ""
    profile: str = ""


@dataclass(frozen=True)
class Usage:
    """The user's other live sessions."""

    sessions: int = 0
    gpus: int = 0


@dataclass(frozen=True)
class SessionSize:
    partition: str
    gpus: int  # per node
    hours: float
    nodes: int
    cpus: int  # per node
    mem_gb: int  # per node
    profile: str = ""


def _given(*values: Any) -> Any:
    return next(value for value in values if value is not None)


def session_resolve(policy: Policy, *, groups: Iterable[str], request: SessionRequest,
                    usage: Usage) -> SessionSize:
    """The session's size under the policy, or PolicyRefusal naming each field that is over a limit."""
    groups = list(groups)
    rules = policy.rules_for(groups)
    profile = None
    if request.profile:
        profile = policy.profiles.get(request.profile)
        if profile is None or not profile.offered_to(groups):
            names = ", ".join(p.name for p in policy.profiles_for(groups)) or "none"
            raise PolicyRefusal({"profile": f"Unknown profile {request.profile!r}; yours: {names}."})
    allowed = [name for name in sorted(policy.partitions)
               if rules.partitions is None or name in rules.partitions]
    name = _given(request.partition or None, profile.partition if profile else None, policy.default_partition)
    partition = policy.partitions.get(name)
    if partition is None:
        raise PolicyRefusal({"partition": f"Unknown partition {name!r}; choose one of: "
                                          f"{', '.join(allowed)}."})
    if name not in allowed:
        raise PolicyRefusal({"partition": f"Your group may not use partition {name}; choose one of: "
                                          f"{', '.join(allowed) or 'none'}."})

    errors: dict[str, str] = {}
    gpus = _given(request.gpus, profile.gpus if profile else None, rules.default_gpus)
    nodes = _given(request.nodes, profile.nodes if profile else None, 1)
    hours = _given(request.hours, profile.hours if profile else None,
                   min(rules.default_hours, partition.max_hours, rules.max_hours))
    if gpus < 0:
        errors["gpus"] = "The number of GPUs cannot be negative."
    elif gpus > partition.gpus_per_node:
        errors["gpus"] = f"Partition {name} has at most {partition.gpus_per_node} GPUs per node."
    elif usage.gpus + gpus * nodes > rules.max_gpus:
        errors["gpus"] = (f"Your group's limit is {rules.max_gpus} GPUs across your sessions; "
                          f"{usage.gpus} are in use.")
    elif partition.cpus(gpus) > partition.cpus_per_node > 0:
        errors["gpus"] = (f"{partition.cpus(gpus)} CPUs would be needed; nodes of {name} have "
                          f"{partition.cpus_per_node}.")
    if not (math.isfinite(hours) and hours > 0):
        errors["hours"] = "The session time must be more than 0 hours."
    elif hours > partition.max_hours:
        errors["hours"] = f"Partition {name} allows at most {partition.max_hours:g} h."
    elif hours > rules.max_hours:
        errors["hours"] = f"Your group allows at most {rules.max_hours:g} h per session."
    if not 1 <= nodes <= max(partition.nodes, 1):
        errors["nodes"] = f"Partition {name} allows 1 to {max(partition.nodes, 1)} node(s)."
    environments = rules.environments
    if request.environment and environments is not None and request.environment not in environments:
        errors["environment"] = f"Your group may not use environment {request.environment}."
    if usage.sessions >= rules.max_sessions:
        errors["name"] = f"Your group's limit is {rules.max_sessions} sessions at once."
    if errors:
        raise PolicyRefusal(errors)
    return SessionSize(partition=name, gpus=gpus, hours=hours, nodes=nodes, cpus=partition.cpus(gpus),
                       mem_gb=partition.mem_gb(gpus), profile=profile.name if profile else "")


def job_limits_check(policy: Policy, *, groups: Iterable[str], partition: str,
                     minutes: int) -> dict[str, str]:
    """A batch job's group limits (partition, walltime); the partition's own are the composer's."""
    rules = policy.rules_for(groups)
    if rules.partitions is not None and partition not in rules.partitions:
        return {"partition": f"Your group may not use partition {partition}; choose one of: "
                             f"{', '.join(rules.partitions) or 'none'}."}
    if minutes > rules.max_hours * 60:
        return {"time_limit": f"Your group allows at most {rules.max_hours * 60:g} minutes per job."}
    return {}
