"""The Slurm clusters the portal fronts (#38): one TOML file per cluster in a folder the administrator
owns (CLUSTERS_DIR, docs/admin/adding-a-cluster.md), read once per process and validated as a whole.
Without any file, one default cluster made of the SLURM_* settings: a one-cluster site changes
nothing. Django is imported only where the settings are read: the hub's spawner imports slurm/."""

import dataclasses
import functools
import os
import re
import stat
import tomllib
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

# Slurm's ClusterName as slurmdbd keeps it (lower case) and as `-M`/`cluster=` take it unquoted.
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
ADAPTERS = ("sudo", "slurmrestd")
_KEYS = {"name", "title", "default", "adapter", "slurm_conf", "rest_url", "token_command",
         "partitions", "environments", "runtimes", "profiles", "data_dir", "spawner", "policy"}
_REST_ONLY = ("rest_url", "token_command")
_SPAWNER_KEYS = {"prologue"}
# What a cluster offers (#38), by name: Slurm's partition names, the portal's environment names
# (portal/environments/models.py), container runtime names (portal/containers/runtimes.py) and the
# admins' resource profiles (portal/policy/models.py).
_OFFER_NAMES = {
    "partitions": re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"),
    "environments": re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$"),
    "runtimes": re.compile(r"^[a-z][a-z0-9_-]{0,31}$"),
    "profiles": re.compile(r"^[-a-zA-Z0-9_]{1,30}$"),
}
# A group's limits on the cluster (`[policy.groups.NAME]`), as POLICY_GROUPS gives them for the site
# (portal/policy/rules.py GroupRules): each key's type.
_GROUP_LIMITS: dict[str, tuple[type, ...]] = {
    "max_gpus": (int,), "max_sessions": (int,), "default_gpus": (int,),
    "max_hours": (int, float), "default_hours": (int, float),
    "partitions": (list,), "environments": (list,),
}
_GROUP_NAME = re.compile(r"^(\*|[A-Za-z0-9][A-Za-z0-9._ -]{0,63})$")
Offer = Literal["partition", "environment", "runtime"]


class ClustersError(ValueError):
    """A cluster file the portal cannot use; the message names the file and the field."""


@dataclass(frozen=True)
class Cluster:
    name: str  # Slurm's ClusterName (`-M name`, `cluster=name`)
    title: str
    default: bool
    adapter: Literal["sudo", "slurmrestd"]
    # The cluster's slurm.conf on the portal's host: the portal's own commands (the poll cycle's reads)
    # read it (SLURM_CONF) instead of naming the cluster with `-M`, which costs each slurmctld command
    # a slurmdbd lookup (~90 ms on the bed).
    slurm_conf: Path | None = None
    rest_url: str = ""  # slurmrestd's address (adapter "slurmrestd")
    token_command: tuple[str, ...] = ()  # slurmrestd's tokens; empty: SLURM_TOKEN_COMMAND
    source: Path | None = None  # its file; None: made of the SLURM_* settings
    # What the portal offers there; None: everything the site has (as on a one-cluster site).
    partitions: tuple[str, ...] | None = None
    environments: tuple[str, ...] | None = None
    runtimes: tuple[str, ...] | None = None
    profiles: tuple[str, ...] | None = None
    # Its groups' limits (`[policy.groups]`), which replace the site's POLICY_GROUPS there; None: the
    # site's. Plain data: the portal's policy (portal/policy) makes its rules of them.
    groups: dict[str, dict[str, object]] | None = dataclasses.field(default=None, hash=False)
    data_dir: str = ""  # the shared data on that cluster's nodes; '': the site's (DATA_DIR)
    spawner: "ClusterSpawner" = dataclasses.field(default_factory=lambda: ClusterSpawner())

    def refusal(self, field: Offer, value: str) -> str:
        """Why `value` cannot be this cluster's `field` (partition, environment or runtime), or ''."""
        offered: tuple[str, ...] | None = getattr(self, f"{field}s")
        if offered is None or not value or value in offered:
            return ""
        return (f"The cluster {self.title} ({self.name}) does not offer the {field} {value!r}; "
                f"it offers: {', '.join(offered)}.")

    def partition_default(self, default: str, known: Collection[str]) -> str:
        """Where work goes that names no partition: the site's `default` where this cluster offers
        it, else the first it offers of those the site `known`s."""
        if self.partitions is None or default in self.partitions:
            return default
        return next((name for name in self.partitions if name in known), default)


@dataclass(frozen=True)
class ClusterSpawner:
    """The hub's spawner options for the cluster's sessions (its file's `[spawner]` table)."""

    prologue: tuple[str, ...] = ()  # shell lines run before the server, e.g. `module load cuda`


@dataclass(frozen=True)
class Clusters:
    all: tuple[Cluster, ...]

    @property
    def default(self) -> Cluster:
        return next(cluster for cluster in self.all if cluster.default)

    @property
    def several(self) -> bool:
        """Whether commands must name their cluster (`-M`): never on a one-cluster site."""
        return len(self.all) > 1

    def get(self, name: str | None) -> Cluster:
        """The cluster called `name`; None: the default one."""
        if name is None:
            return self.default
        for cluster in self.all:
            if cluster.name == name:
                return cluster
        raise ValueError(f"no cluster {name!r} is configured")


def clusters_load(directory: Path, fallback: Callable[[], Cluster]) -> Clusters:
    """Every `*.toml` in `directory`, validated together; none (or no folder): `fallback()` alone."""
    found = _files(str(directory))
    return Clusters(all=found) if found else Clusters(all=(fallback(),))


@functools.cache
def _files(directory: str) -> tuple[Cluster, ...]:
    """The folder's clusters, read once per process: a change takes a restart, as the settings do."""
    folder = Path(directory)
    if not folder.exists():
        return ()
    if not folder.is_dir():
        raise ClustersError(f"{folder}: not a folder")
    _not_writable_by_us(folder)
    try:  # a folder the portal cannot list is an error, never "no clusters"
        paths = sorted(path for path in folder.iterdir()
                       if path.suffix == ".toml" and not path.name.startswith("."))
    except OSError as error:
        raise ClustersError(f"{folder}: cannot be read: {error}") from error
    clusters = [cluster_read(path) for path in paths]
    names: dict[str, Path | None] = {}
    for cluster in clusters:
        if cluster.name in names:
            raise ClustersError(f"{cluster.source}: name: {cluster.name!r} is the name in "
                                f"{names[cluster.name]} too")
        names[cluster.name] = cluster.source
    if len(clusters) <= 1:
        return tuple(_with_default(cluster) for cluster in clusters)
    defaults = [cluster for cluster in clusters if cluster.default]
    if len(defaults) != 1:
        which = ", ".join(str(cluster.source) for cluster in defaults) or "none of them"
        raise ClustersError(f"{folder}: default: exactly one of {len(clusters)} cluster files must say "
                            f"default = true ({which} do)")
    return tuple(clusters)


def cluster_read(path: Path) -> Cluster:
    """One cluster file, every field checked; ClustersError names the file and the field."""
    _not_writable_by_us(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
        raise ClustersError(f"{path}: not a readable TOML file: {error}") from error
    if unknown := sorted(set(data) - _KEYS):
        raise ClustersError(f"{path}: {unknown[0]}: unknown field (known: {', '.join(sorted(_KEYS))})")

    def text(field: str, *, required: bool = True) -> str:
        value = data.get(field, "")
        if not isinstance(value, str) or (required and not value.strip()):
            raise ClustersError(f"{path}: {field}: {'required, ' if required else ''}a string")
        return value.strip()

    name = text("name")
    if not _NAME.fullmatch(name):
        raise ClustersError(f"{path}: name: {name!r} is not a Slurm ClusterName (lower-case letters, digits, "
                            "'-' and '_', starting with a letter, at most 40)")
    default = data.get("default", False)
    if not isinstance(default, bool):
        raise ClustersError(f"{path}: default: true or false")
    adapter = data.get("adapter", "sudo")
    if adapter not in ADAPTERS:
        raise ClustersError(f"{path}: adapter: {' or '.join(ADAPTERS)}, not {adapter!r}")
    rest_url, command = text("rest_url", required=adapter == "slurmrestd"), data.get("token_command", [])
    if adapter != "slurmrestd" and (given := [field for field in _REST_ONLY if field in data]):
        raise ClustersError(f"{path}: {given[0]}: only with adapter = \"slurmrestd\"")
    if rest_url and not re.fullmatch(r"https?://[^/\s]+/?", rest_url):
        raise ClustersError(f"{path}: rest_url: an http:// or https:// address, not {rest_url!r}")
    if not isinstance(command, list) or not all(isinstance(part, str) and part for part in command):
        raise ClustersError(f"{path}: token_command: a list of strings (the program and its arguments)")
    slurm_conf = text("slurm_conf", required=False)
    if slurm_conf and not (Path(slurm_conf).is_absolute() and Path(slurm_conf).is_file()):
        raise ClustersError(f"{path}: slurm_conf: {slurm_conf!r} is not the absolute path of a file")
    offers = {field: _names(path, field, data[field]) for field in _OFFER_NAMES if field in data}
    data_dir = text("data_dir", required=False)
    if data_dir and not (data_dir.startswith("/") and os.path.normpath(data_dir) == data_dir.rstrip("/")
                         and "\n" not in data_dir):
        raise ClustersError(f"{path}: data_dir: {data_dir!r} is not a plain absolute path")
    return Cluster(name=name, title=text("title"), default=default, adapter=adapter,
                   slurm_conf=Path(slurm_conf) if slurm_conf else None, rest_url=rest_url.rstrip("/"),
                   token_command=tuple(command), source=path, **offers,
                   data_dir=data_dir.rstrip("/") or data_dir, spawner=_spawner(path, data.get("spawner", {})),
                   groups=_policy_groups(path, data.get("policy", {})))


def _names(path: Path, field: str, value: object) -> tuple[str, ...]:
    """A list of what the cluster offers: names of their kind, at least one (leave the field out
    to offer them all)."""
    if not isinstance(value, list) or not value or not all(
            isinstance(name, str) and _OFFER_NAMES[field].fullmatch(name) for name in value):
        raise ClustersError(f"{path}: {field}: a non-empty list of names (leave it out to offer them all)")
    return tuple(dict.fromkeys(value))


def _spawner(path: Path, table: object) -> "ClusterSpawner":
    if not isinstance(table, dict):
        raise ClustersError(f"{path}: spawner: a table ([spawner])")
    if unknown := sorted(set(table) - _SPAWNER_KEYS):
        raise ClustersError(f"{path}: spawner.{unknown[0]}: unknown field (known: "
                            f"{', '.join(sorted(_SPAWNER_KEYS))})")
    prologue = table.get("prologue", [])
    if not isinstance(prologue, list) or not all(
            isinstance(line, str) and line.strip() and "\n" not in line for line in prologue):
        raise ClustersError(f"{path}: spawner.prologue: a list of shell lines (one line each)")
    return ClusterSpawner(prologue=tuple(prologue))


def _policy_groups(path: Path, table: object) -> dict[str, dict[str, object]] | None:
    """`[policy.groups."*"]`, `[policy.groups.NAME]`: each group's limits on this cluster, every key
    one of POLICY_GROUPS' with its type; no `[policy]`: the site's."""
    if not isinstance(table, dict) or set(table) - {"groups"}:
        raise ClustersError(f"{path}: policy: a table whose only field is groups ([policy.groups.NAME])")
    groups = table.get("groups")
    if groups is None:
        return None
    if not isinstance(groups, dict) or not groups:
        raise ClustersError(f"{path}: policy.groups: a table of LDAP groups (\"*\": anybody in none named)")
    for group, limits in groups.items():
        where = f"{path}: policy.groups.{group}"
        if not _GROUP_NAME.fullmatch(group) or not isinstance(limits, dict):
            raise ClustersError(f"{where}: an LDAP group's name (or \"*\") with a table of limits")
        for key, value in limits.items():
            if key not in _GROUP_LIMITS:
                known = ", ".join(sorted(_GROUP_LIMITS))
                raise ClustersError(f"{where}.{key}: unknown limit (known: {known})")
            kinds = _GROUP_LIMITS[key]
            if isinstance(value, bool) or not isinstance(value, kinds):
                raise ClustersError(f"{where}.{key}: {'a list of names' if list in kinds else 'a number'}")
            if list in kinds:
                if not all(isinstance(name, str) and _OFFER_NAMES[key].fullmatch(name) for name in value):
                    raise ClustersError(f"{where}.{key}: a list of names (leave it out to allow them all)")
            elif value < 0 or (key.endswith("hours") and value <= 0):
                raise ClustersError(f"{where}.{key}: more than 0")
    return {group: dict(limits) for group, limits in groups.items()}


def _with_default(cluster: Cluster) -> Cluster:
    """A site's only cluster is its default, whatever its file says."""
    return dataclasses.replace(cluster, default=True)


def _not_writable_by_us(path: Path) -> None:
    """Least privilege: the portal's own account must not be able to change which clusters it
    reaches, nor how (rest_url, token_command): the folder and its files belong to root (or another
    account) and are writable by their owner alone."""
    try:
        info = path.stat()
    except OSError as error:
        raise ClustersError(f"{path}: cannot be read: {error}") from error
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ClustersError(f"{path}: writable by its group or by anybody "
                            f"(mode {stat.S_IMODE(info.st_mode):o}): make it writable by its owner alone")
    if info.st_uid == os.geteuid() != 0:
        raise ClustersError(f"{path}: owned by the portal's own account: make root its owner")


def clusters_from_settings() -> Clusters:
    """CLUSTERS_DIR's clusters, or the one the SLURM_* settings describe; ImproperlyConfigured names
    the file and the field of a bad one."""
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured

    def from_settings() -> Cluster:
        if settings.SLURM_ADAPTER not in ADAPTERS:
            raise ImproperlyConfigured(f"SLURM_ADAPTER: sudo or slurmrestd, not {settings.SLURM_ADAPTER!r}")
        if not _NAME.fullmatch(settings.SLURM_CLUSTER_NAME):
            raise ImproperlyConfigured(f"SLURM_CLUSTER_NAME: {settings.SLURM_CLUSTER_NAME!r} is not a Slurm "
                                       "ClusterName (lower-case letters, digits, '-' and '_')")
        return Cluster(name=settings.SLURM_CLUSTER_NAME, title="Cluster", default=True,
                       adapter=settings.SLURM_ADAPTER,
                       rest_url=settings.SLURM_REST_URL.rstrip("/"))

    try:
        clusters = clusters_load(Path(settings.CLUSTERS_DIR), from_settings)
    except ClustersError as error:
        raise ImproperlyConfigured(f"CLUSTERS_DIR: {error}") from error
    known = settings.CONTAINERS_RUNTIMES
    for cluster in clusters.all:
        if unknown := [runtime for runtime in cluster.runtimes or () if runtime not in known]:
            raise ImproperlyConfigured(f"CLUSTERS_DIR: {cluster.source}: runtimes: {unknown[0]!r} is not one "
                                       f"of the site's container runtimes ({', '.join(known)})")
    return clusters

