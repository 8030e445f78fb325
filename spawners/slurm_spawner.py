"""The portal's Slurm spawner: batchspawner's SlurmSpawner with server-side options and one poll.

The hub config names `spawners.slurm_spawner.PortalSlurmSpawner`. This module is the spawner itself:
its settings, and JupyterHub's protocol (start, poll, stop, progress, state) over Slurm. Each other
concern has a module of its own:

- spawners.options: what a user may ask for, rebuilt within the portal's published policy;
- spawners.batch_script: the job's script and what the server is started with;
- spawners.container_launch: a server inside a container image;
- spawners.reports: what the job and the hub tell the portal, and the session's tokens;
- spawners.queue_poller: one shared `squeue` for every server of a cluster (Slurm not answering:
  "unknown");
- spawners.port_api: the hub's API for a server's port, limited to the port.

The hub imports no Django and no Celery (tests/spawners/test_no_django.py): only plain modules of the
portal (portal.policy.rules, portal.containers.runtimes and .references) and slurm/.
"""

import asyncio
import math
import pwd
import re
import sys
import time
from pathlib import Path
from typing import Any

from batchspawner import JobStatus, SlurmSpawner
from tornado import web
from traitlets import Dict, Float, List, Unicode, default

from portal.containers.runtimes import LaunchInvalid
from portal.policy.rules import Usage
from portal.sessions.queue_file import queue_file_of
from slurm.clusters import Cluster, Clusters, ClustersError, clusters_load
from slurm.errors import SlurmError
from slurm.parsing import first_node
from slurm.states import PENDING, RUNNING
from spawners import port_api
from spawners.batch_script import (
    BATCH_SCRIPT,
    SINGLEUSER_CONFIG_DIR,
    cluster_prologue,
    default_kernel_args,
    script_prologue,
    server_command,
    site_prologue,
)
from spawners.container_launch import container_prefix
from spawners.options import (
    ContainerChoice,
    EnvironmentChoice,
    OptionError,
    ServerOptions,
    cluster_choice,
    policy_file,
    rebuild_options,
)
from spawners.queue_poller import QueuePoller, shared_poller
from spawners.reports import report_lines, report_post, token_env

# Slurm's ClusterName (slurm/clusters.py): a state saved by another version is never put on a command line.
CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
_CLUSTER_OPTION = "{% if cluster %} -M {{cluster}}{% endif %}"


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
    clusters_dir = Unicode(
        "", help="The portal's CLUSTERS_DIR: the clusters a server may run on (the `cluster` option; "
                 "#38). Empty: the one cluster `cluster_name`.").tag(config=True)
    cluster_name = Unicode(
        "gpuportal", help="The one cluster's name where CLUSTERS_DIR holds no file (the portal's "
                          "SLURM_CLUSTER_NAME).").tag(config=True)

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
    req_comment = Unicode("")  # the portal's key for the session: its job is found by it
    batch_script = Unicode(BATCH_SCRIPT).tag(config=True)

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

    # Jinja (batchspawner's format_template): `-M <cluster>` only where the server names one, which it
    # does only where several clusters are configured; otherwise the commands are as before #38.
    @default("batch_submit_cmd")
    def _submit_default(self) -> str:
        return f"{self.slurm_bin_dir}/sbatch --parsable{_CLUSTER_OPTION}"

    @default("batch_cancel_cmd")
    def _cancel_default(self) -> str:
        return f"{self.slurm_bin_dir}/scancel{_CLUSTER_OPTION} {{{{job_id}}}}"

    @default("req_prologue")
    def _prologue_default(self) -> str:
        return site_prologue(portal_url=self.portal_url, templates_dir=self.templates_dir,
                             data_dir=self.data_dir)

    @default("apply_user_options")
    def _apply_default(self) -> object:
        return apply_portal_options

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.software_environment: EnvironmentChoice | None = None
        self.container: ContainerChoice | None = None
        self.cluster = ""  # the server's cluster where several are configured (#38); '': the only one
        self.cluster_file: Cluster | None = None  # the server's cluster as its file gives it
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

    def usage(self, options: object) -> Usage:
        """The user's other servers that run or are starting on the cluster `options` ask for: each
        cluster's limits count its own (#38)."""
        clusters = self.clusters()

        def cluster_of(options: object) -> str | None:
            try:
                return cluster_choice(options.get("cluster") if isinstance(options, dict) else None, clusters)
            except OptionError:  # refused by rebuild_options, naming it
                return None

        asked = cluster_of(options)
        others = [other for other in self.user.spawners.values()
                  if other is not self and other.active and cluster_of(other.user_options) == asked]
        return Usage(sessions=len(others), gpus=sum(
            int(o.user_options.get("gpus", 0)) * int(o.user_options.get("nodes", 1)) for o in others))

    def clusters(self) -> Clusters:
        """The portal's clusters, from the same folder (read once per process, as the portal does)."""
        def only() -> Cluster:
            return Cluster(name=self.cluster_name, title="Cluster", default=True, adapter="sudo")

        if not self.clusters_dir:
            return Clusters(all=(only(),))
        try:
            return clusters_load(Path(self.clusters_dir), only)
        except ClustersError as error:
            raise OptionError(f"cluster: the hub cannot use its cluster files: {error}") from None

    def apply_options(self, user_options: object) -> ServerOptions:
        policy = policy_file(self.policy_file).load()
        options = rebuild_options(
            user_options, policy=policy, usage=self.usage(user_options),
            groups=policy.groups_of(self.user.name, fallback=[group.name for group in self.user.groups]),
            environments_dir=self.environments_dir,
            container_runtimes=self.container_runtimes, container_image_dirs=self.container_image_dirs,
            home=self._home(), clusters=self.clusters(),
        )
        self.cluster = options.cluster
        self.cluster_file = self.clusters().get(options.cluster or None)
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
        self.req_comment = options.comment
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

    # --- the batch script (spawners.batch_script, .reports, .container_launch) ------------------

    def container_prefix(self) -> str:
        """Bash lines setting RUN to the container runtime's command for the server."""
        assert self.container is not None
        try:
            return container_prefix(self.container, runtimes=self.container_runtimes,
                                    binds=self.binds(), home=self._home())
        except LaunchInvalid as error:
            raise web.HTTPError(400, f"container: {error}") from error

    def data_dir_here(self) -> str:
        """The shared data on the server's cluster: its file's `data_dir`, else the site's."""
        return (self.cluster_file.data_dir if self.cluster_file else "") or self.data_dir

    def binds(self) -> list[str]:
        """The container's binds, the site's data mount (a bind of `data_dir`) made the cluster's."""
        site, here = self.data_dir.rstrip("/"), self.data_dir_here()
        if not site or here == self.data_dir:
            return list(self.container_binds)
        return [here + bind[len(site):] if bind.split(":")[0] == site else bind
                for bind in self.container_binds]

    def cmd_formatted_for_batch(self) -> str:
        return server_command(super().cmd_formatted_for_batch(), in_container=self.container is not None)

    def get_env(self) -> dict[str, str]:
        return {**super().get_env(), **self.token_env()}

    def token_env(self) -> dict[str, str]:
        """The session's tokens, for the job's environment (never its script)."""
        return token_env(report_token=self.report_token, tracking_token=self.tracking_token,
                         portal_url=self.portal_url, name=self.name)

    def get_req_subvars(self) -> dict[str, Any]:
        """The batch script's variables: the job's reports to the portal and the chosen environment or
        container in the prologue (spawners.batch_script.script_prologue)."""
        subvars = super().get_req_subvars()
        # keepvars was computed once, at the first start: this start's tokens may be new to it.
        kept = subvars["keepvars"].split(",")
        subvars["keepvars"] = ",".join([*kept, *(name for name in self.token_env() if name not in kept)])
        subvars["cluster"] = self.cluster
        reports = report_lines(report_token=self.report_token, gres=self.req_gres)
        subvars["prologue"] = script_prologue(
            cluster_prologue(subvars.get("prologue") or "", cluster=self.cluster_file,
                             site_data_dir=self.data_dir), reports=reports,
            run_prefix=self.container_prefix() if self.container is not None else None,
            environment=self.software_environment)
        return subvars

    def get_args(self) -> list[str]:
        return [*super().get_args(), *default_kernel_args(self.software_environment)]

    # --- Slurm state through the shared poller --------------------------------------------------

    @property
    def poller(self) -> QueuePoller:
        """The server's cluster's poller, which reads the portal's queue file of that cluster."""
        if not self.cluster:
            return shared_poller(self.slurm_bin_dir, self.slurm_timeout, self.queue_file)
        try:
            chosen: Cluster | None = next(
                (cluster for cluster in self.clusters().all if cluster.name == self.cluster), None)
        except OptionError:
            chosen = None
        # One no longer configured is still asked by its name (no file of the portal's), never taken for gone.
        shared_file = queue_file_of(self.queue_file, "" if chosen.default else chosen.name) if chosen else ""
        slurm_conf = str(chosen.slurm_conf) if chosen is not None and chosen.slurm_conf else ""
        return shared_poller(self.slurm_bin_dir, self.slurm_timeout, shared_file, self.cluster, slurm_conf)

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
        if self.job_id and self.cluster:
            state["cluster"] = self.cluster  # a restarted hub polls and cancels it there
        return state

    def load_state(self, state: dict[str, Any]) -> None:
        """A restarted hub must not take a job missing from a snapshot older than its submission (the
        portal's last squeue, say) for a job that is gone."""
        super().load_state(state)
        if isinstance(state.get("cluster"), str) and CLUSTER_NAME.fullmatch(state["cluster"]):
            self.cluster = state["cluster"]
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
        self._report_task = asyncio.ensure_future(report_post(
            portal_url=self.portal_url, report_token=self.report_token, body=body, log=self.log,
            who=self._log_name))

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


# Importing this module is what the hub config does: swap batchspawner's port handler for ours.
port_api.handler_install()
