"""The portal's Slurm spawner: batchspawner's SlurmSpawner with server-side options and one poll.

- Every user option is validated and rebuilt here (`apply_user_options`): whatever reaches the hub
  API, only partition, GPUs, hours, nodes, a profile and the software environment survive, within
  the limits of the portal's one policy (portal/policy/rules.py), which the portal publishes as a
  file (`policy_file`) and this spawner re-reads when it changes: the same checks and messages as
  the portal's form and REST API. batchspawner merges `user_options` into the batch script's
  variables, so nothing else may stay.
- The software environment: the hub has no access to the portal's database, so the portal sends
  the environment's name, kernelspec name and prefix (`environment`, `environment_kernel`,
  `environment_path`). The spawner checks only their shape (plain names; a normalised path under
  `environments_dir`) and quotes them; the job runs as the user, so a user who calls the hub API
  directly can at most pick another folder under that root, as the user.
- A container image (an environment of kind container): the portal sends the image's runtime and
  what it runs (`container_runtime`, `container_image`); the spawner checks them (a runtime it has,
  a valid reference or a plain path under its image folders, the user's own included) and wraps the
  server's command with the containers adapter (portal/containers/runtimes.py), which binds home,
  data and the hub's own Python environment (Jupyter + batchspawner, run by the image's python3).
- One `squeue` for all servers of the hub (`QueuePoller`): polls share the latest snapshot, and a
  Slurm that does not answer means "unknown" (the server is kept), never "gone".
"""

import asyncio
import json
import logging
import math
import pwd
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

from batchspawner import JobStatus, SlurmSpawner
from batchspawner.api import BatchSpawnerAPIHandler
from jupyterhub import apihandlers
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError
from traitlets import Dict, Float, List, Unicode, default

from portal.containers.references import PATH as IMAGE_PATH
from portal.containers.references import ReferenceInvalid, reference_parse
from portal.containers.runtimes import RUNTIMES, Bind, Launch, LaunchInvalid
from portal.policy.rules import Policy, PolicyRefusal, SessionRequest, Usage, session_resolve
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.parsing import QueuedJob, first_node
from slurm.runner import SlurmRunner
from slurm.states import PENDING, RUNNING

logger = logging.getLogger(__name__)

ENVIRONMENT_KEYS = ("environment", "environment_kernel", "environment_path")
CONTAINER_KEYS = ("container_runtime", "container_image")
TOKEN_KEYS = ("report_token", "tracking_token")
OPTION_KEYS = frozenset({"partition", "gpus", "hours", "nodes", "profile", "account", *TOKEN_KEYS,
                         *ENVIRONMENT_KEYS, *CONTAINER_KEYS})
# What the MLflow client in a session's kernels needs to log to the portal (portal.tracking).
TRACKING_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_TRACKING_TOKEN", "MLFLOW_EXPERIMENT_NAME")
# What a server inside a container gets from the job's environment (Podman and enroot pass only
# what they are told): the hub's variables, the GPUs, the portal's and TensorBoard's settings.
CONTAINER_ENV = ("CUDA_VISIBLE_DEVICES", "JUPYTERHUB_*", "JPY_*", "JUPYTER_CONFIG_PATH",
                 "TENSORBOARD_PROXY_URL", "GPUPORTAL_*", *TRACKING_ENV, "HOME", "USER", "PATH", "LANG",
                 "SLURM_*")
# The portal's shapes (portal/environments/models.py); the hub cannot import the portal.
ENVIRONMENT_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
KERNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
PATH_PART = re.compile(r"^[A-Za-z0-9._+-]+$")
# The portal's per-session report and tracking tokens (portal/core/report_tokens.py,
# tracking_tokens.py): signed values, URL-safe.
REPORT_TOKEN = re.compile(r"^[A-Za-z0-9:._-]{1,200}$")
# The MLflow experiment a session's kernels log to by default (MLFLOW_EXPERIMENT_NAME): one per
# session name, so a session started again under its name goes on in the same experiment.
SESSION_EXPERIMENT = "session-{name}"
# A project's Slurm account, as the portal names them (portal/projects/models.py ACCOUNT_NAME).
ACCOUNT_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
HOSTNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$")
# The job's own reports to the portal (started on node X, exiting with code N): shared with the
# portal's batch-job scripts, included as it is.
REPORT_SH = Path(__file__).resolve().parents[1] / "templates/jobs/_common/report.sh"
# The GPU sampler of batch jobs (plain Python, standard library only), included as it is too.
GPU_SAMPLER = Path(__file__).resolve().parents[1] / "templates/jobs/_common/gpu_sampler.py"


# Settings of the users' notebook servers (jupyter-server-proxy's TensorBoard): JUPYTER_CONFIG_PATH.
SINGLEUSER_CONFIG_DIR = Path(__file__).resolve().parent / "singleuser"

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


def _optional(raw: dict, key: str, parse: Callable[[object, str], Any]) -> Any:
    return None if raw.get(key) in (None, "") else parse(raw[key], key)


def rebuild_options(raw: object, *, policy: Policy, groups: list[str], usage: Usage,
                    environments_dir: str = "/opt/gpuportal/envs", container_runtimes: dict | None = None,
                    container_image_dirs: list[str] | None = None, home: str = "") -> ServerOptions:
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
    request = SessionRequest(
        partition=raw.get("partition") or None, gpus=_optional(raw, "gpus", _integer),
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
    return ServerOptions(partition=size.partition, gpus=size.gpus, hours=size.hours, nodes=size.nodes,
                         cpus=size.cpus, mem_gb=size.mem_gb,
                         environment=environment_choice(raw, environments_dir,
                                                        container=container is not None),
                         container=container, profile=size.profile, account=account, **tokens)


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


@dataclass(frozen=True)
class Snapshot:
    """Slurm's queue at `taken_at` (monotonic clock); `jobs` is None when Slurm did not answer."""

    jobs: dict[str, QueuedJob] | None
    taken_at: float


class QueuePoller:
    """One `squeue` for every server of the hub: concurrent callers share one query. With
    `shared_file`, the portal's own squeue of each poll cycle (portal.servers.services.
    servers_queue_publish) answers whoever accepts its age, and Slurm is not asked again."""

    def __init__(self, slurm: Slurm, shared_file: str = "") -> None:
        self.slurm = slurm
        self.shared_file = shared_file
        self._snapshot = Snapshot(jobs=None, taken_at=-math.inf)
        self._inflight: asyncio.Future[Snapshot] | None = None
        self._shared_seen: tuple[int, int] | None = None

    async def snapshot(self, *, max_age: float, newer_than: float = -math.inf) -> Snapshot:
        """A snapshot at most `max_age` seconds old, taken after `newer_than` (e.g. a submission)."""
        for current in (self._snapshot, self._shared()):
            if current.taken_at >= newer_than and time.monotonic() - current.taken_at <= max_age:
                return current
        while True:
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._query())
            current = await asyncio.shield(self._inflight)
            # A query already running when the caller submitted cannot know the new job: ask again.
            if current.taken_at >= newer_than:
                return current

    def _shared(self) -> Snapshot:
        """The portal's last squeue, on the monotonic clock; a file that is missing or unreadable
        counts as very old (the poller asks Slurm itself)."""
        if not self.shared_file:
            return Snapshot(jobs=None, taken_at=-math.inf)
        try:
            info = Path(self.shared_file).stat()
            if self._shared_seen == (info.st_ino, info.st_mtime_ns):
                return self._snapshot  # read already
            data = json.loads(Path(self.shared_file).read_text())
            jobs = {row["job_id"]: _queued_job(row) for row in data["jobs"]}
            taken_at = time.monotonic() - (time.time() - float(data["taken_at"]))
        except (OSError, ValueError, KeyError, TypeError) as error:
            logger.warning("shared queue %s unusable, asking Slurm: %s", self.shared_file, error)
            return Snapshot(jobs=None, taken_at=-math.inf)
        self._shared_seen = (info.st_ino, info.st_mtime_ns)
        if taken_at > self._snapshot.taken_at:
            self._snapshot = Snapshot(jobs=jobs, taken_at=taken_at)
        return self._snapshot

    async def _query(self) -> Snapshot:
        started = time.monotonic()
        try:
            queue = (await asyncio.to_thread(self.slurm.queue)).rows
            jobs: dict[str, QueuedJob] | None = {job.job_id: job for job in queue}
        except SlurmError as error:
            logger.warning("squeue failed, server states unknown: %s", error)
            jobs = None
        finally:
            self._inflight = None
        self._snapshot = Snapshot(jobs=jobs, taken_at=started)
        return self._snapshot


def _queued_job(row: dict[str, Any]) -> QueuedJob:
    """A row of the portal's shared queue (servers_queue_publish) back as the adapter's QueuedJob."""
    limit = row["time_limit"]
    return QueuedJob(**{**row, "start_time": _time(row["start_time"]), "end_time": _time(row["end_time"]),
                        "time_limit": None if limit is None else timedelta(seconds=limit)})


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@cache
def shared_poller(bin_dir: str, timeout: float, shared_file: str = "") -> QueuePoller:
    return QueuePoller(Slurm(SlurmRunner(bin_dir=Path(bin_dir), timeout=timeout)), shared_file)


def apply_portal_options(spawner: "PortalSlurmSpawner", user_options: object) -> None:
    """`Spawner.apply_user_options` hook: errors become HTTP 400 with a message for the user."""
    try:
        spawner.apply_options(user_options)
    except OptionError as error:
        raise web.HTTPError(400, str(error)) from error


class PortalSlurmSpawner(SlurmSpawner):
    """Runs a single-user server as a Slurm job of the user, with the options the portal offers."""

    policy_file = Unicode(
        "/var/lib/gpuportal/policy/policy.json",
        help="The limits the portal publishes (its POLICY_FILE): partitions, group limits, profiles.",
    ).tag(config=True)
    queue_file = Unicode(
        "", help="The portal's squeue of each poll cycle (its SERVERS_QUEUE_FILE): routine polls that "
                 "accept its age read it instead of asking Slurm. Empty: always squeue.").tag(config=True)
    slurm_bin_dir = Unicode("/usr/bin", help="Where sbatch, squeue and scancel are.").tag(config=True)
    slurm_timeout = Float(20.0, help="An squeue slower than this counts as Slurm not answering.").tag(
        config=True)
    queue_max_age = Float(
        30.0, help="Routine polls answer from a queue snapshot at most this old (seconds): with many "
                   "servers, still one squeue per interval.").tag(config=True)
    busy_queue_max_age = Float(
        0.5, help="Snapshot age accepted while a server starts or stops (seconds); servers starting "
                  "together share one squeue.").tag(config=True)
    templates_dir = Unicode(
        "", help="Notebook templates copied into ~/templates on every start (no existing file is "
                 "overwritten). Empty: none.").tag(config=True)
    data_dir = Unicode("", help="Shared data linked as ~/data. Empty: none.").tag(config=True)
    portal_url = Unicode(
        "", help="The portal's URL as seen from compute nodes, exported as GPUPORTAL_URL for the "
                 "notebooks and the CLI. Empty: not exported.").tag(config=True)
    environments_dir = Unicode(
        "/opt/gpuportal/envs", help="The only folder software environments may live under (the "
                                    "portal's ENVIRONMENTS_DIR).").tag(config=True)

    container_runtimes = Dict(
        default_value={"charliecloud": {"binary": "/usr/bin/ch-run"},
                       "podman": {"binary": "/usr/bin/podman", "global_args": [
                           "--runtime=runc", "--cgroup-manager=cgroupfs", "--events-backend=file"]}},
        help="Container runtimes servers may run in (the portal's CONTAINERS_RUNTIMES, enabled ones): "
             "name -> binary and options.").tag(config=True)
    container_binds = List(
        Unicode(), default_value=["{home}", "/data:ro"],
        help="Binds of a server's container, 'SRC[:DST][:ro]', {home} the user's home (the portal's "
             "CONTAINERS_BINDS).").tag(config=True)
    container_image_dirs = List(
        Unicode(), default_value=["/opt/gpuportal/images", "{home}/gpuportal/images"],
        help="The only folders a container image path may lie under ({home}: the user's).").tag(config=True)

    exec_prefix = Unicode("/usr/sbin/runuser -u {username} --").tag(config=True)
    startup_check_interval = Float(
        2.0, help="While a server starts, how often its job is looked up (seconds; servers starting "
                  "together share one squeue). Its port wakes the start at once, whatever this is: "
                  "the check only notices a job that ended before its server answered.").tag(config=True)
    # The server runs in the batch step on the first node; `srun` in the notebook spans the allocation.
    req_srun = Unicode("").tag(config=True)
    req_nodes = Unicode("1")
    req_job_name = Unicode()
    req_account = Unicode("")
    batch_script = Unicode("""#!/bin/bash
#SBATCH --job-name={{job_name}}
#SBATCH --output={{homedir}}/.jupyterhub-slurm-%j.log
#SBATCH --chdir={{homedir}}
#SBATCH --export={{keepvars}}
#SBATCH --partition={{partition}}
#SBATCH --time={{runtime}}
#SBATCH --nodes={{nodes}}
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task={{nprocs}}
#SBATCH --mem={{memory}}
{% if gres %}#SBATCH --gres={{gres}}
{% endif %}{% if account %}#SBATCH --account={{account}}
{% endif %}
set -euo pipefail
{{prologue}}
{{cmd}}
""").tag(config=True)

    @default("req_job_name")
    def _job_name_default(self) -> str:
        return f"jupyterhub:{self.name or 'default'}"

    @default("batchspawner_singleuser_cmd")
    def _singleuser_cmd_default(self) -> str:
        # Our launcher hands the hub the port once the server answers (spawners/singleuser/launch.py).
        # Absolute: the job's PATH is not the hub's.
        return f"{Path(sys.prefix) / 'bin/python3'} {SINGLEUSER_CONFIG_DIR / 'launch.py'}"

    @default("cmd")
    def _cmd_default(self) -> list[str]:
        return [str(Path(sys.prefix) / "bin/jupyterhub-singleuser")]

    @default("batch_submit_cmd")
    def _submit_default(self) -> str:
        return f"{self.slurm_bin_dir}/sbatch --parsable"

    @default("batch_cancel_cmd")
    def _cancel_default(self) -> str:
        return f"{self.slurm_bin_dir}/scancel {{job_id}}"

    @default("req_prologue")
    def _prologue_default(self) -> str:
        # `%tensorboard` in a notebook shows TensorBoard through this server's jupyter-server-proxy.
        lines = ['export TENSORBOARD_PROXY_URL="${JUPYTERHUB_SERVICE_PREFIX:-/}proxy/%PORT%/"']
        if self.portal_url:
            lines.append(f"export GPUPORTAL_URL={shlex.quote(self.portal_url)}")
        if self.templates_dir:
            source = shlex.quote(f"{self.templates_dir.rstrip('/')}/.")
            lines += ['mkdir -p "$HOME/templates"', f'cp -rn {source} "$HOME/templates/" || true']
        if self.data_dir:
            data = shlex.quote(self.data_dir)
            lines.append(f'[ -e "$HOME/data" ] || ln -s {data} "$HOME/data"')
        return "\n".join(lines)

    @default("apply_user_options")
    def _apply_default(self) -> object:
        return apply_portal_options

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.software_environment: EnvironmentChoice | None = None
        self.container: ContainerChoice | None = None
        self.queue_reason = ""
        self.report_token = ""
        self.tracking_token = ""
        self._fresh_after = -math.inf
        self._busy = False
        self._port_posted = asyncio.Event()
        self._posted_node = ""
        self._posted_at = -math.inf
        self._reported_reason: str | None = None  # the last `queued` report's; None: none sent yet
        self._report_task: asyncio.Task | None = None

    # --- options -------------------------------------------------------------------------------

    def usage(self) -> Usage:
        """The user's other servers that run or are starting."""
        others = [other for other in self.user.spawners.values() if other is not self and other.active]
        return Usage(sessions=len(others), gpus=sum(
            int(o.user_options.get("gpus", 0)) * int(o.user_options.get("nodes", 1)) for o in others))

    def apply_options(self, user_options: object) -> ServerOptions:
        policy = policy_file(self.policy_file).load()
        options = rebuild_options(
            user_options, policy=policy, usage=self.usage(),
            groups=policy.groups_of(self.user.name, fallback=[group.name for group in self.user.groups]),
            environments_dir=self.environments_dir,
            container_runtimes=self.container_runtimes, container_image_dirs=self.container_image_dirs,
            home=self._home(),
        )
        self.software_environment = options.environment
        self.container = options.container
        self.report_token = options.report_token
        self.tracking_token = options.tracking_token
        self.req_partition = options.partition
        self.req_runtime = str(math.ceil(round(options.hours * 60, 6)))  # minutes; 1/60 h is 1
        self.req_nodes = str(options.nodes)
        self.req_nprocs = str(options.cpus)
        self.req_memory = f"{options.mem_gb}G"
        self.req_gres = f"gpu:{options.gpus}" if options.gpus else ""
        self.req_account = options.account
        # Only the rebuilt options reach the batch script (batchspawner merges user_options into it)
        # and the database the portal reads back.
        self.user_options = options.as_user_options()
        if self.orm_spawner is not None:
            self.orm_spawner.user_options = self.user_options
        return options

    def _home(self) -> str:
        try:
            return pwd.getpwnam(self.user.name).pw_dir
        except KeyError:
            return f"/home/{self.user.name}"

    def container_prefix(self) -> str:
        """Bash lines setting RUN to the runtime's command for the server: the containers adapter
        builds it; this hub's Python environment is bound at its own path, so the server runs from
        it with the image's python3."""
        assert self.container is not None
        home = self._home()
        config = dict(self.container_runtimes[self.container.runtime])
        runtime = RUNTIMES[self.container.runtime](binary=str(config.pop("binary")), options=config)
        env = tuple(name for name in CONTAINER_ENV if runtime.name == "podman" or "*" not in name)
        try:
            binds = tuple(Bind.parse(text, home=home) for text in self.container_binds)
            # Jupyter + batchspawner, and the servers' own settings (TensorBoard's launcher).
            jupyter = (Bind(sys.prefix, sys.prefix, read_only=True),
                       Bind(str(SINGLEUSER_CONFIG_DIR), str(SINGLEUSER_CONFIG_DIR), read_only=True))
            launch = Launch(image=self.container.image, binds=(*binds, *jupyter), env=env, workdir=home,
                            gpus=True)
            return runtime.shell_prefix(launch)
        except LaunchInvalid as error:
            raise web.HTTPError(400, f"container: {error}") from error

    def cmd_formatted_for_batch(self) -> str:
        command = super().cmd_formatted_for_batch()
        return f'"${{RUN[@]}}" {command}' if self.container is not None else command

    def get_env(self) -> dict[str, str]:
        return {**super().get_env(), **self.token_env()}

    def token_env(self) -> dict[str, str]:
        """The tokens go into the job's environment, never its script. With the tracking token, the
        MLflow client in the server's kernels logs to the portal (portal.tracking), as this session,
        into the session's experiment."""
        env = {"GPUPORTAL_REPORT_TOKEN": self.report_token} if self.report_token else {}
        if self.tracking_token and self.portal_url:
            experiment = SESSION_EXPERIMENT.format(name=self.name or "default")
            env.update(zip(TRACKING_ENV, (self.portal_url.rstrip("/"), self.tracking_token, experiment),
                           strict=True))
        return env

    def report_lines(self) -> str:
        """The job reports to the portal itself: started on this node (in the background, the
        server does not wait), and its exit code from an EXIT trap (scancel's SIGTERM included).
        "Ready" comes from the server (gpuportal_ready.py)."""
        if not self.report_token or not REPORT_SH.is_file():
            return ""
        return "\n".join([
            REPORT_SH.read_text(),
            'GPUPORTAL_NODE=${SLURMD_NODENAME:-$(hostname)}',
            'gpuportal_report "{\\"event\\":\\"started\\",\\"node\\":\\"$GPUPORTAL_NODE\\"}" &',
            'trap \'gpuportal_report "{\\"event\\":\\"exited\\",\\"exit_code\\":$?}"\' EXIT',
            "trap 'exit 143' TERM",
            *self.gpu_sampler_lines(),
        ])

    def gpu_sampler_lines(self) -> list[str]:
        """A session with GPUs: the batch jobs' GPU sampler, in the background on the host (a
        container's server too: it reads the job's GPUs with the node's nvidia-smi), pushing
        nvidia-smi's figures with the session's token, which it takes from the job's environment
        (never a command line). It stops when this script's shell is gone."""
        if not self.req_gres or not GPU_SAMPLER.is_file():
            return []
        source = GPU_SAMPLER.read_text()
        if "\nGPUPORTAL_GPU_SAMPLER_PY\n" in f"\n{source}\n":
            return []  # would end the here-document early
        return [
            'if [[ -n ${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-}} && -n ${GPUPORTAL_REPORT_TOKEN:-} ]] \\',
            "    && command -v nvidia-smi >/dev/null 2>&1 && command -v python3 >/dev/null 2>&1; then",
            "  python3 - >/dev/null 2>&1 <<'GPUPORTAL_GPU_SAMPLER_PY' &",
            source.rstrip("\n"),
            "GPUPORTAL_GPU_SAMPLER_PY",
            "fi",
        ]

    def get_req_subvars(self) -> dict[str, Any]:
        """The batch script's variables: the job's reports to the portal; the chosen environment's
        bin/ goes first on PATH, after the configured prologue (so terminals and `torchrun` find its
        programs); in a container, the runtime's command (RUN) that the server's command follows."""
        subvars = super().get_req_subvars()
        # keepvars was computed once, at the first start: this start's tokens may be new to it.
        kept = subvars["keepvars"].split(",")
        subvars["keepvars"] = ",".join([*kept, *(name for name in self.token_env() if name not in kept)])
        reports = self.report_lines()
        subvars["prologue"] = "\n".join(line for line in (subvars.get("prologue"), reports) if line)
        if self.container is not None:
            lines = [subvars.get("prologue") or "", self.container_prefix(),
                     f"export GPUPORTAL_ENVIRONMENT={shlex.quote(self.software_environment.name)}"
                     if self.software_environment else ""]
            subvars["prologue"] = "\n".join(line for line in lines if line)
        elif self.software_environment is not None:
            lines = [subvars.get("prologue") or "",
                     f'export PATH={shlex.quote(self.software_environment.path + "/bin")}:"$PATH"',
                     f"export GPUPORTAL_ENVIRONMENT={shlex.quote(self.software_environment.name)}"]
            subvars["prologue"] = "\n".join(line for line in lines if line)
        return subvars

    def get_args(self) -> list[str]:
        """The chosen environment's kernel is JupyterLab's default for new notebooks (batchspawner
        puts these words into the script as they are: quoted here)."""
        args = super().get_args()
        if self.software_environment is not None and self.software_environment.kernel:
            kernel = self.software_environment.kernel
            args.append(shlex.quote(f"--MappingKernelManager.default_kernel_name={kernel}"))
        return args

    # --- Slurm state through the shared poller --------------------------------------------------

    @property
    def poller(self) -> QueuePoller:
        return shared_poller(self.slurm_bin_dir, self.slurm_timeout, self.queue_file)

    async def submit_batch_script(self) -> str:
        await self.account_check()
        try:
            job_id = await super().submit_batch_script()
        except RuntimeError as error:
            # sbatch's own words ("Requested node configuration is not available") reach the user.
            raise web.HTTPError(400, f"Slurm refused the server: {error}") from error
        self._fresh_after = time.monotonic()
        return job_id

    async def account_check(self) -> None:
        """The portal checked the project against the user's LDAP groups; the hub has no database and
        checks Slurm's own associations (which the portal's projects_sync keeps equal to them), so a
        caller of the hub API cannot charge a project they are not in. Slurm not answering: sbatch,
        which checks the same, has the last word."""
        if not self.req_account:
            return
        try:
            members = await asyncio.to_thread(self.poller.slurm.account_members, accounts=[self.req_account])
        except SlurmError as error:
            self.log.warning("could not check account %s of %s: %s", self.req_account, self._log_name, error)
            return
        if self.user.name not in members.get(self.req_account, set()):
            raise web.HTTPError(400, f"account {self.req_account!r} is not one of your projects.")

    async def cancel_batch_job(self) -> None:
        await super().cancel_batch_job()
        self._fresh_after = time.monotonic()

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        if self.job_id and self._fresh_after > -math.inf:
            # Wall clock, to outlive the hub: see load_state.
            state["fresh_after"] = time.time() - (time.monotonic() - self._fresh_after)
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        """A restarted hub must not take a job missing from a snapshot older than its submission (the
        portal's last squeue, say) for a job that is gone."""
        super().load_state(state)
        if isinstance(state.get("fresh_after"), int | float):
            self._fresh_after = time.monotonic() - (time.time() - state["fresh_after"])

    async def query_job_status(self) -> JobStatus:
        if not self.job_id:
            self.job_status = ""
            return JobStatus.NOTFOUND
        max_age = self.busy_queue_max_age if self._busy else self.queue_max_age
        snapshot = await self.poller.snapshot(max_age=max_age, newer_than=self._fresh_after)
        if snapshot.jobs is None:
            self.job_status = "UNKNOWN"
            return JobStatus.UNKNOWN
        job = snapshot.jobs.get(self.job_id)
        if job is None:
            self.job_status = ""
            return JobStatus.NOTFOUND
        self.queue_reason = job.reason if job.state in PENDING else ""
        if job.state in RUNNING:
            self.job_status = f"{job.state} {first_node(job.nodes)}"
            return JobStatus.RUNNING
        if job.state in PENDING:
            self.job_status = f"{job.state} {job.reason}"
            self.queued_report(job.reason)
            return JobStatus.PENDING
        # SUSPENDED: still Slurm's job; keep the server.
        self.job_status = job.state
        return JobStatus.UNKNOWN

    def queued_report(self, reason: str) -> None:
        """Tell the portal that the server's job waits in Slurm's queue, and why, when that is news:
        its pages read only its database, and its next poll cycle may be a minute away. In the
        background, once: a lost report waits for that poll."""
        if not (self.report_token and self.portal_url) or reason == self._reported_reason:
            return
        self._reported_reason = reason
        body = {"event": "queued", **({"reason": reason} if reason else {})}
        self._report_task = asyncio.ensure_future(self._report(body))

    async def _report(self, body: dict[str, Any]) -> None:
        try:
            await AsyncHTTPClient().fetch(
                f"{self.portal_url.rstrip('/')}/api/v1/reports/", method="POST", body=json.dumps(body),
                request_timeout=5, headers={"Authorization": f"Report {self.report_token}",
                                            "Content-Type": "application/json"})
        except (OSError, HTTPClientError) as error:
            self.log.warning("report %s of %s to the portal failed: %s", body["event"], self._log_name,
                             error)

    async def start(self) -> tuple[str, int]:
        """Submit, then wait for the server's port, which its launcher posts once JupyterLab answers
        (the hub's first check then finds it up). No squeue per starting server: the job is looked up
        every `startup_check_interval` from the shared snapshot, only to notice one that ended."""
        self._busy = True
        self._reported_reason = None
        self.ip = self.traits()["ip"].default_value
        self.port = 0
        self._port_posted.clear()
        if self.server:
            self.server.port = self.port
        try:
            await self.submit_batch_script()
            if not self.job_id:
                raise RuntimeError("Slurm gave no job id for the server")
            while not self._port_posted.is_set():
                try:
                    await asyncio.wait_for(self._port_posted.wait(), self.startup_check_interval)
                except TimeoutError:
                    status = await self.query_job_status()
                    if status not in (JobStatus.RUNNING, JobStatus.PENDING, JobStatus.UNKNOWN):
                        message = f"Slurm job {self.job_id} ended before its server answered."
                        self.clear_state()
                        raise RuntimeError(message) from None
            self.ip = self.state_exechost_exp or await self._node_address()
            self.db.commit()
            self.log.info("Server job %s answers at %s:%s", self.job_id, self.ip, self.port)
            return self.ip, self.port
        finally:
            self._busy = False

    async def _node_address(self) -> str:
        """Where the proxy reaches the server: the first node Slurm lists for this job, from a queue
        snapshot taken after the port came. Never the callback's address, its headers (X-Real-Ip) or
        the node name it claims: a job could point its server's route at any host."""
        snapshot = await self.poller.snapshot(max_age=self.busy_queue_max_age, newer_than=self._posted_at)
        job = (snapshot.jobs or {}).get(self.job_id)
        node = first_node(job.nodes) if job is not None and job.state in RUNNING else ""
        if not node:
            raise RuntimeError(f"Slurm lists no node for job {self.job_id}, whose server posted its port.")
        if self._posted_node and self._posted_node != node:
            self.log.warning("Server job %s claims node %r; Slurm runs it on %r: routing there",
                             self.job_id, self._posted_node, node)
        return node

    def port_posted(self, port: int, node: str) -> None:
        """The server's launcher posted its port (PortOnlyAPIHandler); `node` is what it says it runs
        on, checked against Slurm's node list before anything is routed."""
        self.port = port
        self._posted_node = node
        self._posted_at = time.monotonic()
        self.job_status = f"RUNNING {node}"
        self.queue_reason = ""
        self._port_posted.set()

    async def stop(self, now: bool = False) -> None:
        self._busy = True
        try:
            await super().stop(now=now)
        finally:
            self._busy = False

    async def progress(self) -> Any:
        last = None
        while True:
            running = bool(self.state_isrunning())
            if running:
                node = self.job_status.split()[-1]
                message = f"Slurm job {self.job_id} runs on {node}: starting JupyterLab"
            elif self.state_ispending():
                message = f"Queued in Slurm (job {self.job_id}): {self.queue_reason or 'waiting'}"
            else:
                message = "Submitting the job to Slurm"
            if message != last:
                yield {"message": message}
                last = message
            if running:
                return
            await asyncio.sleep(1)


class PortOnlyAPIHandler(BatchSpawnerAPIHandler):
    """batchspawner's port hand-back, limited to the port.

    The job runs as the user with the server's token, so the stock handler would let the user set
    any spawner attribute (ip, job_id, cmd...).
    """

    @web.authenticated
    def post(self) -> None:
        token = self.get_auth_token()
        spawner = next((s for s in self.current_user.spawners.values() if s.api_token == token), None)
        body = self.get_json_body() or {}
        port, node = body.get("port"), body.get("node") or ""
        if (spawner is None or isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536
                or not isinstance(node, str) or (node and not HOSTNAME.fullmatch(node))):
            raise web.HTTPError(400, "expected {\"port\": <1-65535>, \"node\": <hostname>} from a "
                                     "server's own token")
        if isinstance(spawner, PortalSlurmSpawner):
            spawner.port_posted(port, node)
        else:
            spawner.port = port
        self.set_status(201)
        self.finish(json.dumps({"message": "BatchSpawner data configured"}))


# Importing this module is what the hub config does: swap batchspawner's handler for ours.
apihandlers.default_handlers[:] = [
    (path, PortOnlyAPIHandler if handler is BatchSpawnerAPIHandler else handler)
    for path, handler in apihandlers.default_handlers
]
