"""What a user may start a server with: every option rebuilt from scratch, within the portal's policy.

Whatever reaches the hub API, only partition, GPUs, hours, nodes, a profile, a project's account,
the software environment (or a container image) and the portal's tokens survive, within the limits
of the portal's one policy (portal/policy/rules.py), which the portal publishes as a file
(`PolicyFile`) and the hub re-reads when it changes: the same checks and messages as the portal's
form and REST API. batchspawner merges `user_options` into the batch script's variables, so nothing
else may stay.

- The software environment: the hub has no access to the portal's database, so the portal sends
  the environment's name, kernelspec name and prefix (`environment`, `environment_kernel`,
  `environment_path`). Only their shape is checked here (plain names; a normalised path under
  `environments_dir`); the job runs as the user, so a user who calls the hub API directly can at
  most pick another folder under that root, as the user.
- A container image: the image's runtime and what it runs (`container_runtime`, `container_image`):
  a runtime the hub has, a valid reference or a plain path under its image folders.
- The cluster (#38): one of those the hub loads from the portal's CLUSTERS_DIR (slurm/clusters.py);
  none, the default one. Kept only where several are configured: a one-cluster site's options and
  commands are as before. A partition, environment or container runtime its file does not offer is
  refused, as the portal refuses it.
"""

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from portal.containers.references import PATH as IMAGE_PATH
from portal.containers.references import ReferenceInvalid, reference_parse
from portal.containers.runtimes import RUNTIMES
from portal.policy.rules import Policy, PolicyRefusal, SessionRequest, Usage, session_resolve
from slurm.clusters import Cluster, Clusters

logger = logging.getLogger(__name__)

ENVIRONMENT_KEYS = ("environment", "environment_kernel", "environment_path")
CONTAINER_KEYS = ("container_runtime", "container_image")
TOKEN_KEYS = ("report_token", "tracking_token")
OPTION_KEYS = frozenset({"partition", "gpus", "hours", "nodes", "profile", "account", "comment", "cluster",
                         *TOKEN_KEYS, *ENVIRONMENT_KEYS, *CONTAINER_KEYS})
# The portal's shapes (portal/environments/models.py); the hub cannot import the portal's models.
ENVIRONMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
KERNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PATH_PART = re.compile(r"^[A-Za-z0-9._+-]+$")
# The portal's per-session report and tracking tokens (portal/tokens/report.py,
# tracking.py): signed values, URL-safe.
REPORT_TOKEN = re.compile(r"^[A-Za-z0-9:._-]{1,200}$")
# The session's key in its Slurm job's comment (portal/sessions/models.py slurm_comment).
COMMENT = re.compile(r"^gpuportal-session:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
# A project's Slurm account, as the portal names them (portal/projects/models.py ACCOUNT_NAME).
ACCOUNT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class OptionError(ValueError):
    """A user option the hub refuses; the message is shown to the user."""


@dataclass(frozen=True)
class EnvironmentChoice:
    """A software environment: its name, Jupyter kernelspec and prefix (with bin/python)."""

    name: str
    kernel: str
    path: str


@dataclass(frozen=True)
class ContainerChoice:
    """A container image to run the server in: the runtime's name and the image it runs."""

    runtime: str
    image: str


@dataclass(frozen=True)
class ServerOptions:
    """The only options a server is started with; CPUs and memory are per node, derived."""

    partition: str
    gpus: int
    hours: float
    nodes: int
    cpus: int
    mem_gb: int
    environment: EnvironmentChoice | None = None
    container: ContainerChoice | None = None
    profile: str = ""
    account: str = ""  # a project's Slurm account (sbatch --account); '' the user's default
    comment: str = ""  # the portal's key for the session (sbatch --comment); '': started at the hub
    cluster: str = ""  # the cluster it runs on (`-M`) where several are configured; '' on a one-cluster site
    # Not kept in user_options (the hub's database, its API): they go to the job's environment.
    report_token: str = ""
    tracking_token: str = ""

    def as_user_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {"partition": self.partition, "gpus": self.gpus, "hours": self.hours,
                                   "nodes": self.nodes}
        if self.profile:
            options["profile"] = self.profile
        if self.account:
            options["account"] = self.account
        if self.cluster:
            options["cluster"] = self.cluster
        if self.container is not None:
            options.update(environment=self.environment.name if self.environment else "",
                           container_runtime=self.container.runtime, container_image=self.container.image)
        elif self.environment is not None:
            options.update(environment=self.environment.name, environment_kernel=self.environment.kernel,
                           environment_path=self.environment.path)
        return options


def _integer(value: object, name: str) -> int:
    # bool is an int in Python; "2" comes from query strings and forms.
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise OptionError(f"{name} must be a whole number.")
    if isinstance(value, str):
        if not value.strip().isdigit():
            raise OptionError(f"{name} must be a whole number.")
        value = int(value)
    return value


def _number(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise OptionError(f"{name} must be a number.")
    try:
        number = float(value)
    except ValueError as error:
        raise OptionError(f"{name} must be a number.") from error
    if not math.isfinite(number):
        raise OptionError(f"{name} must be a number.")
    return number


def container_choice(raw: dict, *, runtimes: dict[str, dict], image_dirs: list[str],
                     home: str) -> ContainerChoice | None:
    """The container options' shape: a runtime this hub runs, and a registry reference or a plain
    path under one of `image_dirs` (`{home}`: the user's home). The portal checked the rest."""
    runtime, image = (raw.get(key) or "" for key in CONTAINER_KEYS)
    if not runtime and not image:
        return None
    if not isinstance(runtime, str) or runtime not in runtimes or runtime not in RUNTIMES:
        raise OptionError(f"container_runtime must be one of {', '.join(sorted(runtimes)) or 'none here'}.")
    if not isinstance(image, str) or not image:
        raise OptionError("container_image must be an image reference or path.")
    if image.startswith("/"):
        roots = [d.replace("{home}", home).rstrip("/") for d in image_dirs]
        if not IMAGE_PATH.fullmatch(image) or ".." in image.split("/") or not any(
                image.startswith(f"{root}/") for root in roots):
            raise OptionError("container_image must be a plain path under the image folders.")
    else:
        try:
            reference_parse(image)
        except ReferenceInvalid as error:
            raise OptionError(f"container_image: {error}") from None
    return ContainerChoice(runtime=runtime, image=image)


def environment_choice(raw: dict, environments_dir: str, *,
                       container: bool = False) -> EnvironmentChoice | None:
    """The environment options' shape (the portal checked that the environment exists and works).
    A container environment comes with its name only."""
    name, kernel, path = (raw.get(key) or "" for key in ENVIRONMENT_KEYS)
    if container:
        if kernel or path:
            raise OptionError("A container environment comes without environment_kernel and "
                              "environment_path.")
        if name and (not isinstance(name, str) or not ENVIRONMENT_NAME.fullmatch(name)):
            raise OptionError("environment must be a plain name (lowercase letters, digits, _ and -).")
        return EnvironmentChoice(name=name, kernel="", path="") if name else None
    if not name:
        if kernel or path:
            raise OptionError("environment_kernel and environment_path come with an environment.")
        return None
    if not isinstance(name, str) or not ENVIRONMENT_NAME.fullmatch(name):
        raise OptionError("environment must be a plain name (lowercase letters, digits, _ and -).")
    if not isinstance(kernel, str) or not KERNEL_NAME.fullmatch(kernel):
        raise OptionError("environment_kernel must be a kernelspec name (letters, digits, . _ -).")
    root = environments_dir.rstrip("/")
    parts = path[len(root) + 1:].split("/") if isinstance(path, str) and path.startswith(f"{root}/") else []
    if not parts or not all(PATH_PART.fullmatch(part) and part not in (".", "..") for part in parts):
        raise OptionError(f"environment_path must be a folder under {root}/.")
    return EnvironmentChoice(name=name, kernel=kernel, path=path)


def cluster_choice(value: object, clusters: Clusters | None) -> str:
    """The cluster asked for, by name: one of `clusters`, none the default one; '' on a one-cluster
    site (its commands name no cluster)."""
    names = [cluster.name for cluster in clusters.all] if clusters is not None else []
    if value in (None, ""):
        return clusters.default.name if clusters is not None and clusters.several else ""
    if not isinstance(value, str) or value not in names:
        raise OptionError(f"cluster must be one of the configured clusters ({', '.join(names) or 'none'}), "
                          f"not {value!r}.")
    return value if clusters is not None and clusters.several else ""


def offered_check(cluster: Cluster, *, partition: str, environment: EnvironmentChoice | None,
                  container: ContainerChoice | None) -> None:
    """What the server's cluster file does not offer (slurm/clusters.py) is refused, naming the field."""
    for field, value in (("partition", partition), ("environment", environment.name if environment else ""),
                         ("runtime", container.runtime if container else "")):
        if refused := cluster.refusal(field, value):
            raise OptionError(f"{'container_runtime' if field == 'runtime' else field}: {refused}")


def _optional(raw: dict, key: str, parse: Callable[[object, str], Any]) -> Any:
    return None if raw.get(key) in (None, "") else parse(raw[key], key)


def rebuild_options(raw: object, *, policy: Policy, groups: list[str], usage: Usage,
                    environments_dir: str = "/opt/gpuportal/envs", container_runtimes: dict | None = None,
                    container_image_dirs: list[str] | None = None, home: str = "",
                    clusters: Clusters | None = None) -> ServerOptions:
    """Validate what a caller asked for and rebuild the options from scratch, or raise OptionError.
    The shape is checked here; the limits are the portal's policy (`session_resolve`)."""
    if not isinstance(raw, dict):
        raise OptionError("Options must be an object.")
    unknown = sorted(set(raw) - OPTION_KEYS)
    if unknown:
        raise OptionError(f"Unknown option(s): {', '.join(unknown)}. Allowed: "
                          f"{', '.join(sorted(OPTION_KEYS))}.")
    for key in ("partition", "profile", "account"):
        if not isinstance(raw.get(key) or "", str):
            raise OptionError(f"{key} must be a name.")
    account = raw.get("account") or ""
    if account and not ACCOUNT_NAME.fullmatch(account):
        raise OptionError("account must be a project's Slurm account (GET /api/v1/projects/ lists yours).")
    cluster = cluster_choice(raw.get("cluster"), clusters)
    chosen = clusters.get(cluster or None) if clusters is not None else None
    policy = policy.on(cluster)  # its cluster's partitions, limits and profiles (#38)
    partition = raw.get("partition") or None
    if chosen is not None and chosen.partitions is not None and not partition and not raw.get("profile"):
        partition = chosen.partition_default(policy.default_partition, policy.partitions)
    request = SessionRequest(
        partition=partition, gpus=_optional(raw, "gpus", _integer),
        hours=_optional(raw, "hours", _number), nodes=_optional(raw, "nodes", _integer),
        environment=raw.get("environment") if isinstance(raw.get("environment"), str) else "",
        profile=raw.get("profile") or "")
    try:
        size = session_resolve(policy, groups=groups, request=request, usage=usage)
    except PolicyRefusal as refusal:
        raise OptionError(str(refusal)) from None
    container = container_choice(raw, runtimes=container_runtimes or {},
                                 image_dirs=container_image_dirs or [], home=home)
    tokens = {key: raw.get(key) or "" for key in TOKEN_KEYS}
    for key, token in tokens.items():
        if not isinstance(token, str) or (token and not REPORT_TOKEN.fullmatch(token)):
            raise OptionError(f"{key} must be the portal's token for this session.")
    comment = raw.get("comment") or ""
    if not isinstance(comment, str) or (comment and not COMMENT.fullmatch(comment)):
        raise OptionError("comment must be the portal's key for this session.")
    environment = environment_choice(raw, environments_dir, container=container is not None)
    if chosen is not None:
        offered_check(chosen, partition=size.partition, environment=environment, container=container)
    return ServerOptions(partition=size.partition, gpus=size.gpus, hours=size.hours, nodes=size.nodes,
                         cpus=size.cpus, mem_gb=size.mem_gb,
                         environment=environment, container=container, profile=size.profile,
                         account=account, comment=comment, cluster=cluster, **tokens)


class PolicyFile:
    """The policy the portal publishes (portal.policy.services.policy_publish), re-read when the
    file changes; without one the hub starts nothing (it has no limits of its own)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._seen: tuple[int, int, int] | None = None
        self._policy: Policy | None = None

    def load(self) -> Policy:
        try:
            info = Path(self.path).stat()
            seen = (info.st_ino, info.st_mtime_ns, info.st_size)  # replaced, not rewritten in place
            if self._policy is None or self._seen != seen:
                self._policy = Policy.from_json(Path(self.path).read_text())
                self._seen = seen
        except (OSError, ValueError, KeyError, TypeError) as error:
            if self._policy is None:
                logger.error("no usable policy file %s: %s", self.path, error)
                raise OptionError("The portal has not published its limits yet; try again in a "
                                  "minute.") from None
            logger.warning("policy file %s unreadable, keeping the last one: %s", self.path, error)
        return self._policy


@cache
def policy_file(path: str) -> PolicyFile:
    return PolicyFile(path)
