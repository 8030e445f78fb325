"""Validating a job request and rendering its script: no Slurm call, no database write."""

import base64
import pwd
import re
import shlex
import uuid
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from django.conf import settings

from portal.accounts.models import User
from portal.containers.services import container_activation
from portal.core.errors import InvalidInput
from portal.core.paths import path_problem, user_roots
from portal.environments.models import Environment
from portal.environments.selectors import environment_get, environment_refusal
from portal.jobs.job_templates import (
    JobPaths,
    JobTemplate,
    ParameterInvalid,
    ShellWords,
    catalog,
    script_body_render,
)
from portal.jobs.selectors import PartitionLimits, partition_limits_list
from portal.lifecycle.work import cluster_unknown
from portal.policy.rules import Policy, job_limits_check
from portal.policy.services import policy_current, user_groups
from portal.projects.selectors import user_projects
from slurm.clusters import clusters_from_settings
from slurm.parsing import format_duration

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9 ._:+-]{0,63}$")
COMMENT_PREFIX = "gpuportal:"


@dataclass(frozen=True)
class JobDraft:
    """A validated, rendered job: exactly what will be stored and given to sbatch."""

    uuid: uuid.UUID
    template: JobTemplate
    name: str
    values: dict[str, Any]
    partition: PartitionLimits
    nodes: int
    gpus_per_node: int
    cpus_per_node: int
    mem_mb_per_node: int
    time_limit: timedelta
    output_dir: str
    script: str
    account: str = ""  # a project's Slurm account (#SBATCH --account); '' for the user's default
    cluster: str = ""  # the configured cluster it goes to (slurm/clusters.py), by name


@dataclass(frozen=True)
class CodeTree:
    """A git work tree as a run recorded it: the job checks `commit` out in a scratch work tree of
    its own and applies `diff` there, as its user (templates/jobs/_common/prologue.sh.j2)."""

    top: str
    commit: str
    diff: str = ""


@dataclass(frozen=True)
class Pin:
    """What a re-run fixes beyond the parameters (portal.provenance.rerun): the image by this digest,
    the environment rebuilt from this lock (pip freeze lines) when it is not the current one, and
    the code as recorded."""

    image_digest: str = ""
    environment_lock: str = ""
    environment_lock_sha256: str = ""
    code: tuple[CodeTree, ...] = ()


def job_logdir(*, home: str, job_uuid: uuid.UUID) -> str:
    """The job's TensorBoard log directory: the prologue exports it as TENSORBOARD_LOGDIR, training
    templates write their events there, and TensorBoard from the job's page opens it."""
    return settings.JOBS_TENSORBOARD_LOGDIR.format(home=home.rstrip("/"), uuid=job_uuid)


def unix_account(username: str) -> pwd.struct_passwd:
    """The cluster account jobs run as (its home and uid, not what the portal was told)."""
    try:
        return pwd.getpwnam(username)
    except KeyError:
        message = f"{username} has no Unix account on the cluster."
        raise InvalidInput({"non_field_errors": [message]}) from None


def job_prepare(*, user: User, template: str, parameters: Any, name: str | None = None,
                job_uuid: uuid.UUID | None = None, account: str = "", cluster: str = "",
                policy: Policy | None = None, pin: Pin | None = None) -> JobDraft:
    """Validate everything and render the script; raises InvalidInput and never calls Slurm.

    `policy`: the one read for a whole batch (its partitions and limits), else read here. `pin`: a
    re-run's image digest, environment lock and code."""
    policy = policy or policy_current()
    found = catalog().templates.get(template)
    if found is None:
        raise InvalidInput({"template": [f"Unknown template {template!r}."]})
    errors: dict[str, Any] = {}
    name = (name or found.slug).strip()
    if not NAME.fullmatch(name):
        errors["name"] = ["1-64 letters, digits, spaces and . _ : + - (starting with a letter or digit)."]
    if not isinstance(parameters, dict):
        raise InvalidInput({**errors, "parameters": ["Must be an object."]})
    problems: dict[str, list[str]] = {}
    for unknown in sorted(set(parameters) - {p.name for p in found.parameters}):
        problems[str(unknown)[:64]] = [f"Unknown parameter for template {found.slug!r}."]
    values: dict[str, Any] = {}
    for parameter in found.parameters:
        try:
            values[parameter.name] = parameter.clean(parameters.get(parameter.name))
        except ParameterInvalid as error:
            problems[parameter.name] = [str(error)]
    clusters = clusters_from_settings()
    if problem := cluster_unknown(cluster):
        errors["cluster"] = [problem]
    chosen = None if errors.get("cluster") else clusters.get(cluster or None)
    policy = policy.on(chosen.name) if chosen else policy  # its cluster's partitions and limits (#38)
    problems.update(_paths_check(user, found, values))
    partition = None
    if "partition" in values:
        partition, message = _partition_pick(values["partition"], policy,
                                             offered=chosen.partitions if chosen else None)
        message = message or (chosen.refusal("partition", partition.name) if chosen and partition else "")
        if message:
            problems["partition"] = [message]
        else:
            values["partition"] = partition.name
    if partition is not None and not problems:
        problems.update(_limits_check(found, values, partition))
    if partition is not None and not problems:  # the user's group limits, from the one policy
        problems.update({key: [message] for key, message in job_limits_check(
            policy, groups=user_groups(user), partition=partition.name,
            minutes=values["time_limit"]).items()})
    environment = None
    if values.get("environment"):
        environment = environment_get(user=user, name=values["environment"])
        if environment is None and "environment" not in parameters:
            values["environment"] = ""  # the template's default, which this site does not have
        elif environment is None:
            problems["environment"] = [f"Unknown or unavailable environment {values['environment']!r}; "
                                       "GET /api/v1/environments/ lists those you can use."]
    if environment is not None and chosen is not None and (refused := environment_refusal(
            environment, chosen)):
        problems["environment"] = [refused]
    if account and not user_projects(user=user).filter(slurm_account=account).exists():
        errors["account"] = [f"{account!r} is not one of your projects; GET /api/v1/projects/ lists yours."]
    if problems:
        errors["parameters"] = problems
    if errors:
        raise InvalidInput(errors)
    assert partition is not None
    slurm_account, account = account, unix_account(user.username)
    job_uuid = job_uuid or uuid.uuid4()
    output_dir = settings.JOBS_OUTPUT_DIR.format(home=account.pw_dir.rstrip("/"))
    nodes, gpus = found.resource(values, "nodes"), found.resource(values, "gpus_per_node")
    draft = JobDraft(
        uuid=job_uuid, template=found, name=name, values=values, partition=partition, nodes=nodes,
        gpus_per_node=gpus, cpus_per_node=partition.cpus(gpus), mem_mb_per_node=partition.mem_mb(gpus),
        time_limit=timedelta(minutes=values["time_limit"]), output_dir=output_dir, script="",
        account=slurm_account, cluster=chosen.name if chosen else clusters.default.name,
    )
    job_dir = f"{output_dir}/job-{job_uuid}"
    inputs = _inputs(found, values)
    trees = [(tree, f"{job_dir}/code/{index}") for index, tree in enumerate(pin.code if pin else ())]
    paths = JobPaths(id=str(job_uuid), dir=job_dir,
                     stdout=f"{output_dir}/job-{job_uuid}.out", stderr=f"{output_dir}/job-{job_uuid}.err",
                     metrics=f"{output_dir}/job-{job_uuid}.metrics.json",
                     logdir=job_logdir(home=account.pw_dir, job_uuid=job_uuid),
                     templates=settings.NOTEBOOK_TEMPLATES_DIR,
                     provenance=f"{output_dir}/job-{job_uuid}.provenance.json",
                     inputs=inputs,
                     code=tuple({"top": tree.top, "commit": tree.commit, "tree": where,
                                 "diff": base64.b64encode(tree.diff.encode()).decode()}
                                for tree, where in trees),
                     paths=_paths_mapped(inputs, home=account.pw_dir, trees=trees))
    body = script_body_render(template=found, values=values, job=paths,
                              activation=_activation(environment, user=user, workdir=paths.dir, pin=pin))
    return replace(draft, script=_header(draft, paths) + "\n" + body)


def _paths_check(user: User, template: JobTemplate, values: dict[str, Any]) -> dict[str, list[str]]:
    """Each given `path` parameter, and each of the `paths` ones' (`inputs`), under the user's home,
    scratch or the shared data (lexically)."""
    given = [(p, value) for p in template.parameters if p.type in ("path", "paths") and values.get(p.name)
             for value in ([values[p.name]] if p.type == "path" else values[p.name])]
    if not given:
        return {}
    roots = user_roots(home=unix_account(user.username).pw_dir, username=user.username)
    problems: dict[str, list[str]] = {}
    for parameter, value in given:
        if problem := path_problem(value, roots=roots, relative=True):
            problems.setdefault(parameter.name, []).append(
                f"{value[:80]!r}: {problem}" if parameter.type == "paths" else problem)
    return problems


def _inputs(template: JobTemplate, values: dict[str, Any]) -> tuple[str, ...]:
    """What the job records as its inputs: its path parameters' values, the template's own `inputs`
    and the user's (`inputs` parameter), once each."""
    found = [values[p.name] for p in template.parameters if p.type == "path" and values.get(p.name)]
    found += [*template.inputs, *(values.get("inputs") or [])]
    return tuple(dict.fromkeys(found))


def _paths_mapped(inputs: tuple[str, ...], *, home: str, trees: list[tuple[CodeTree, str]]) -> tuple[
        tuple[str, str], ...]:
    """Each path parameter's value that lies in a re-run's recorded work tree, with the same file
    in the job's scratch work tree: the job runs (and records) that one."""
    mapped = []
    for given in inputs:
        full = given if given.startswith("/") else f"{home.rstrip('/')}/{given}"
        for tree, where in trees:
            if full == tree.top or full.startswith(tree.top.rstrip("/") + "/"):
                mapped.append((given, where + full[len(tree.top.rstrip("/")):]))
                break
    return tuple(mapped)


def _activation(environment: Environment | None, *, user: User, workdir: str,
                pin: Pin | None = None) -> dict[str, Any] | None:
    """What the script's prologue needs to activate the environment (templates/jobs/_common)."""
    if environment is None:
        return None
    if environment.kind == Environment.Kind.CONTAINER:
        # The template's programs run inside the image: the prologue sets RUN to the runtime's
        # exact command, which the containers adapter built and quoted.
        try:
            container = container_activation(environment=environment, user=user, workdir=workdir,
                                              digest=pin.image_digest if pin else "")
        except InvalidInput as error:
            raise InvalidInput({"parameters": error.fields}) from None
        return {"name": environment.name, "kind": environment.kind, "runtime": container["runtime"],
                "image": container["image"], "run": ShellWords(container["run"])}
    # A re-run whose lock is not the environment's current one: the job rebuilds it from the lock.
    lock = pin.environment_lock if pin and pin.environment_lock_sha256 else ""
    return {"name": environment.name, "kind": environment.kind, "path": environment.path,
            "modules": list(environment.modules), "lock": lock,
            "lock_sha256": pin.environment_lock_sha256 if lock and pin else ""}


def _partition_pick(name: str, policy: Policy, *,
                    offered: tuple[str, ...] | None = None) -> tuple[PartitionLimits | None, str]:
    """The partition asked for; none: the default one, or the first the cluster offers (`offered`)
    where it does not offer the default."""
    partitions = partition_limits_list(policy)
    if not partitions:
        return None, "The portal has no partition data from Slurm yet; try again in a few seconds."
    usable = [p for p in partitions if offered is None or p.name in offered] or partitions
    chosen = next((p for p in partitions if p.name == name), None) if name else next(
        (p for p in usable if p.is_default), usable[0])
    if chosen is None:
        return None, f"Unknown partition {name!r}; choose one of: {', '.join(p.name for p in partitions)}."
    return chosen, ""


def _limits_check(template: JobTemplate, values: dict[str, Any],
                  partition: PartitionLimits) -> dict[str, list[str]]:
    problems: dict[str, list[str]] = {}
    limit = partition.max_time_minutes
    if limit is not None and values["time_limit"] > limit:
        problems["time_limit"] = [f"Partition {partition.name!r} allows at most {limit} minutes "
                                  f"({partition.max_time}); you asked for {values['time_limit']}."]
    nodes, gpus = template.resource(values, "nodes"), template.resource(values, "gpus_per_node")
    if nodes > partition.max_nodes:
        where = template.nodes if isinstance(template.nodes, str) else "non_field_errors"
        problems[where] = [f"Partition {partition.name!r} has {partition.max_nodes} node(s)."]
    if gpus > partition.max_gpus_per_node:
        where = template.gpus_per_node if isinstance(template.gpus_per_node, str) else "non_field_errors"
        problems[where] = [f"Partition {partition.name!r} has at most {partition.max_gpus_per_node} "
                           "GPU(s) per node."]
    elif partition.cpus(gpus) > partition.cpus_per_node > 0:
        where = template.gpus_per_node if isinstance(template.gpus_per_node, str) else "non_field_errors"
        problems[where] = [f"{partition.cpus(gpus)} CPUs would be needed; nodes of "
                           f"{partition.name!r} have {partition.cpus_per_node}."]
    return problems


def _header(draft: JobDraft, paths: JobPaths) -> str:
    options = [
        ("job-name", draft.name), ("comment", f"{COMMENT_PREFIX}{draft.uuid}"),
        ("partition", draft.partition.name), ("nodes", draft.nodes), ("ntasks-per-node", 1),
        ("cpus-per-task", draft.cpus_per_node), ("mem", f"{draft.mem_mb_per_node}M"),
    ]
    if draft.account:
        options.append(("account", draft.account))
    if draft.gpus_per_node:
        options.append(("gres", f"gpu:{draft.gpus_per_node}"))
    options += [("time", format_duration(draft.time_limit)), ("chdir", draft.output_dir),
                ("output", paths.stdout), ("error", paths.stderr)]
    lines = ["#!/bin/bash"] + [f"#SBATCH --{key}={shlex.quote(str(value))}" for key, value in options]
    return "\n".join(lines) + "\n"


