"""Expanding, validating and submitting a sweep as one Slurm job array; cancelling the rest; following
its tasks from the poll cycle's queue. Nothing reaches Slurm before every task is valid."""

import itertools
import math
import random
import re
import shlex
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Q

from portal.accounts.models import User
from portal.core.errors import InvalidInput
from portal.jobs.job_templates import ParameterInvalid
from portal.jobs.models import IN_SLURM_STATES
from portal.jobs.services.batch import jobs_store
from portal.jobs.services.prepare import JobDraft, job_prepare
from portal.jobs.services.submission import job_cancel
from portal.lifecycle.kinds import Followed
from portal.lifecycle.work import on_cluster_of
from portal.policy.services import policy_current, user_groups
from portal.sweeps.models import Direction, Method, Sweep
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.parsing import QueuedJob, array_tasks

MAX_TASKS = 1000
# A varied name becomes the script's option `--<name>`.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")
_METRIC = re.compile(r"^[A-Za-z0-9_./ :-]{1,250}$")
# Where the template's script puts each task's own arguments (templates/jobs/pytorch-train).
TASK_ARGS = "GPUPORTAL_TASK_ARGS"


@dataclass(frozen=True)
class SweepSpec:
    template: str
    parameters: dict[str, Any]
    method: str
    space: Any
    concurrency: int
    objective: str
    direction: str
    samples: int | None = None
    seed: int | None = None
    name: str = ""
    account: str = ""
    cluster: str = ""  # a configured cluster's name; '' for the default one


@dataclass(frozen=True)
class SweepDraft:
    """A validated sweep: the tasks' varied values and the job every task runs (without the array)."""

    spec: SweepSpec
    tasks: list[dict[str, Any]]
    argv: list[list[str]]  # each task's own script arguments
    job: JobDraft


def sweep_tasks(spec: SweepSpec) -> list[dict[str, Any]]:
    """The tasks' varied values: grid (every combination, in order), random (`samples` draws with
    `seed`) or list (as given). InvalidInput names the field."""
    if spec.method == Method.LIST:
        if not (isinstance(spec.space, list) and spec.space and all(isinstance(t, dict) for t in spec.space)):
            raise InvalidInput({"space": ["For a list: a non-empty list of objects, one per task."]})
        tasks = [dict(task) for task in spec.space]
    elif not isinstance(spec.space, dict) or not spec.space:
        raise InvalidInput({"space": ["An object: each name to vary and its values."]})
    elif spec.method == Method.GRID:
        if not all(isinstance(values, list) and values for values in spec.space.values()):
            raise InvalidInput({"space": ["For a grid: a non-empty list of values per name."]})
        count = math.prod(len(values) for values in spec.space.values())
        if count > MAX_TASKS:
            raise InvalidInput({"space": [f"{count} combinations; a sweep has at most {MAX_TASKS} tasks."]})
        names = list(spec.space)
        tasks = [dict(zip(names, combination, strict=True))
                 for combination in itertools.product(*spec.space.values())]
    elif spec.method == Method.RANDOM:
        tasks = _random_tasks(spec)
    else:
        raise InvalidInput({"method": ["One of: grid, random, list."]})
    if len(tasks) > MAX_TASKS:
        raise InvalidInput({"space": [f"{len(tasks)} tasks; a sweep has at most {MAX_TASKS}."]})
    return tasks


def _random_tasks(spec: SweepSpec) -> list[dict[str, Any]]:
    samples = spec.samples
    if isinstance(samples, bool) or not isinstance(samples, int) or not 1 <= samples <= MAX_TASKS:
        raise InvalidInput({"samples": [f"For a random sweep: 1 to {MAX_TASKS} tasks."]})
    draw = random.Random(spec.seed)  # noqa: S311 - reproducible sampling, not security
    pickers = {}
    for name, values in spec.space.items():
        if isinstance(values, list) and values:
            pickers[name] = lambda values=values: draw.choice(values)
        elif isinstance(values, dict) and _is_number(values.get("min")) and _is_number(values.get("max")) \
                and values["min"] <= values["max"]:
            low, high, log = values["min"], values["max"], bool(values.get("log"))
            if log and low <= 0:
                raise InvalidInput({"space": [f"{name}: a log range needs min > 0."]})
            if isinstance(low, int) and isinstance(high, int) and not log:
                pickers[name] = lambda low=low, high=high: draw.randint(low, high)
            elif log:
                pickers[name] = lambda low=low, high=high: float(
                    f"{math.exp(draw.uniform(math.log(low), math.log(high))):.6g}")
            else:
                pickers[name] = lambda low=low, high=high: float(f"{draw.uniform(low, high):.6g}")
        else:
            raise InvalidInput({"space": [f"{name}: a list of values, or {{min, max, log}} "
                                          "with min <= max."]})
    return [{name: pick() for name, pick in pickers.items()} for _ in range(samples)]


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def sweep_prepare(*, user: User, spec: SweepSpec) -> SweepDraft:
    """Validate everything, as a job is validated, before anything is submitted: the template's
    parameters (job_prepare: partition, walltime and the group's limits), every task's arguments
    (the template's own arguments rule), and the sweep's size against the group's GPUs."""
    errors: dict[str, list[str]] = {}
    if spec.direction not in Direction.values:
        errors["direction"] = ["One of: min, max."]
    if not isinstance(spec.objective, str) or not _METRIC.fullmatch(spec.objective):
        errors["objective"] = ["The metric to optimise, as the script logs it (e.g. test_accuracy)."]
    if isinstance(spec.concurrency, bool) or not isinstance(spec.concurrency, int) or spec.concurrency < 1:
        errors["concurrency"] = ["How many tasks may run at once: a whole number, at least 1."]
    if errors:
        raise InvalidInput(errors)
    tasks = sweep_tasks(spec)
    job = job_prepare(user=user, template=spec.template, parameters=spec.parameters,
                      name=spec.name or f"sweep-{spec.template}", account=spec.account, cluster=spec.cluster)
    if TASK_ARGS not in job.script:
        raise InvalidInput({"template": [f"The {spec.template!r} template takes no per-task arguments, so it "
                                         "cannot be swept; pytorch-train can."]})
    arguments = next(p for p in job.template.parameters if p.type == "arguments")
    argv: list[list[str]] = []
    for index, task in enumerate(tasks):
        words: list[str] = []
        for name, value in task.items():
            if not isinstance(name, str) or not _NAME.fullmatch(name):
                raise InvalidInput({"space": [f"Task {index}: {str(name)[:64]!r} is no option name "
                                              "(letters, digits, _ and -)."]})
            if name in {p.name for p in job.template.parameters}:
                raise InvalidInput({"space": [f"{name!r} is a template parameter, the same for every task; "
                                              "a sweep varies the script's arguments."]})
            words += [f"--{name}", _word(value, index=index, name=name)]
        try:  # the template's own rule for its arguments, as for a job's
            arguments.clean(shlex.join(words))
        except ParameterInvalid as error:
            raise InvalidInput({"space": [f"Task {index}: {error}"]}) from None
        argv.append(words)
    gpus = job.nodes * job.gpus_per_node
    allowed = policy_current().on(job.cluster).rules_for(user_groups(user)).max_gpus
    at_once = min(spec.concurrency, len(tasks))
    if gpus * at_once > allowed:
        raise InvalidInput({"concurrency": [f"{at_once} tasks at once of {gpus} GPU(s) each is over your "
                                            f"group's {allowed} GPUs; lower the concurrency."]})
    return SweepDraft(spec=spec, tasks=tasks, argv=argv, job=job)


def _word(value: Any, *, index: int, name: str) -> str:
    if _is_number(value):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str) and value and not value.isspace():
        return value
    raise InvalidInput({"space": [f"Task {index}: {name} must be a number or non-empty text."]})


def sweep_script(*, draft: SweepDraft, sweep_id: int) -> str:
    """The job's script as one array: `--array=0-(N-1)%K`, every task appending to the job's one log,
    then each task's arguments by SLURM_ARRAY_TASK_ID (every word shell-quoted) and its MLflow run's
    experiment, name and tags (mnist_ddp.py reads MLFLOW_RUN_NAME and MLFLOW_RUN_TAGS)."""
    lines = draft.job.script.split("\n")
    header_end = max(i for i, line in enumerate(lines) if line.startswith("#SBATCH "))
    count = len(draft.tasks)
    cases = "\n".join(f"  {index}) {TASK_ARGS}=({' '.join(shlex.quote(w) for w in words)}) ;;"
                      for index, words in enumerate(draft.argv))
    array = [
        f"#SBATCH --array=0-{count - 1}%{min(draft.spec.concurrency, count)}",
        "#SBATCH --open-mode=append",
        "",
        f"# Sweep {sweep_id}: {count} tasks, each with its own arguments.",
        f"case ${{SLURM_ARRAY_TASK_ID:?}} in\n{cases}\n  *) exit 2 ;;\nesac",
        f"export MLFLOW_EXPERIMENT_NAME=sweep-{sweep_id}",
        f"export MLFLOW_RUN_NAME=sweep-{sweep_id}-task-$SLURM_ARRAY_TASK_ID",
        # Only the sweep's id (a number) and Slurm's task id go in: nothing of the user's.
        f'export MLFLOW_RUN_TAGS="{{\\"gpuportal.sweep\\": \\"{sweep_id}\\", '
        f'\\"gpuportal.sweep_task\\": \\"$SLURM_ARRAY_TASK_ID\\"}}"',
    ]
    return "\n".join([*lines[:header_end + 1], *array, *lines[header_end + 1:]])


def sweep_submit(*, user: User, spec: SweepSpec) -> Sweep:
    """Validate every task, store the sweep and its array job, and hand the one sbatch to a worker
    once stored (the batch path, portal.jobs.services.batch; the jobs' exactly-once rules:
    portal.jobs.services.submission)."""
    draft = sweep_prepare(user=user, spec=spec)
    with transaction.atomic():
        sweep = Sweep.objects.create(
            user=user, name=draft.job.name, cluster=draft.job.cluster, template=spec.template,
            parameters=draft.job.values,
            method=spec.method, space=spec.space, seed=spec.seed, tasks=draft.tasks,
            concurrency=min(spec.concurrency, len(draft.tasks)), objective=spec.objective,
            direction=spec.direction)
        script = sweep_script(draft=draft, sweep_id=sweep.pk)
        # A sweep is one item that is an array: stored and queued as a batch's jobs are.
        [sweep.job] = jobs_store(user=user, drafts=[(replace(draft.job, script=script), None)])
        sweep.save(update_fields=["job"])
    return sweep


def sweep_cancel(*, sweep: Sweep) -> Sweep:
    """Cancel the rest: one scancel of the array job ends its running tasks and the ones not started."""
    assert sweep.job is not None
    job_cancel(job=sweep.job)
    sweep.refresh_from_db()
    return sweep


def sweeps_follow_queue(queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Followed:
    """Sweeps as the first kind the poll cycle follows (portal.lifecycle.kinds): each array task's
    state, before the jobs fold an array into one row; nothing for sacct. Each cluster's cycle
    follows the sweeps on its cluster (Slurm ids may coincide)."""
    return Followed(report=sweeps_follow(queue=queue, on_cluster=on_cluster_of(slurm)))


def sweeps_follow(*, queue: list[QueuedJob], on_cluster: Q | None = None) -> int:
    """Each live sweep (of the cluster `on_cluster` names) with its tasks as this cycle's squeue (all
    states: a task that ended lately is still there) lists them; the array's own end is the jobs'
    state machine's. Returns the sweeps written."""
    seen: dict[str, dict[str, str]] = {}
    for row in queue:
        if (parts := array_tasks(row.job_id)) is not None:
            state = slurm_states.base_state(row.state)
            seen.setdefault(parts[0], {}).update({str(task): state for task in parts[1]})
    if not seen:
        return 0
    written = 0
    live = Sweep.objects.filter(on_cluster or Q(), job__slurm_job_id__in=list(seen),
                                job__state__in=IN_SLURM_STATES)
    for sweep in live.select_related("job").only(
            "task_states", "job__slurm_job_id"):
        states = {**sweep.task_states, **seen[sweep.job.slurm_job_id]}
        if states != sweep.task_states:
            written += Sweep.objects.filter(pk=sweep.pk).update(task_states=states)
    return written


def space_parse(text: str) -> dict[str, Any]:
    """The composer's lines, as the CLI's --vary: `lr=0.001,0.01` (a list) or `lr=1e-4:1e-1:log` (a
    range, for a random sweep). Numbers stay numbers."""
    space: dict[str, Any] = {}
    for number, line in enumerate(text.strip().splitlines(), start=1):
        name, sep, raw = line.strip().partition("=")
        if not sep or not name.strip() or not raw.strip():
            raise InvalidInput({"space": [f"Line {number}: NAME=V1,V2,... or NAME=MIN:MAX[:log]."]})
        parts = raw.strip().split(":")
        if len(parts) in (2, 3) and "," not in raw and (len(parts) == 2 or parts[2] == "log"):
            space[name.strip()] = {"min": _number(parts[0]), "max": _number(parts[1]), "log": len(parts) == 3}
        else:
            space[name.strip()] = [_number(item.strip()) for item in raw.split(",")]
    return space


def _number(text: str) -> int | float | str:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text
