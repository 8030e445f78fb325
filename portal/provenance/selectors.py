"""Reading provenance records: one job's (its owner only), and two runs side by side (What differs):
what made them, field by field; the facts of each run that differ by nature (times, node, ids) apart;
and what they produced (metrics' final values and curves). From the database only."""

import math
import re
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from portal.accounts.models import User
from portal.core.errors import InvalidInput, NotFound
from portal.jobs.models import Job, JobMetric
from portal.jobs.selectors import job_metrics_chart
from portal.provenance.models import Provenance, SessionProvenance
from portal.tracking.curves import Curve, job_curves

# Two final values closer than this are the same result (a faithful rerun's accuracy, issue 36).
RESULT_TOLERANCE = 1e-6
# The other runs offered to compare a job with on its page.
OTHERS_SHOWN = 20
# What stands for a job's own id in its script and paths, so that two runs' compare.
JOB_PLACEHOLDER = "{job}"
_LOCK_LINE = re.compile(r"^\s*([A-Za-z0-9_.\-\[\]]+)\s*(?:==|@|===)\s*(.+?)\s*$")


def provenance_get(*, user: User, job_id: int) -> Provenance | None:
    """The record of one of the user's own jobs; None for another user's (callers answer 404)."""
    return Provenance.objects.select_related("job").filter(job_id=job_id, job__user=user).first()


def session_provenance_get(*, user: User, name: str) -> SessionProvenance | None:
    """The record of the user's newest session of that name (an ended one too); None for another
    user's (callers answer 404)."""
    return (SessionProvenance.objects.select_related("session")
            .filter(session__user=user, session__name=name).order_by("-session__created_at").first())


def provenance_pair(*, user: User, job_id: int, other: str) -> tuple[Provenance, Provenance]:
    """This job's record and the other's, both the user's own: NotFound for another user's job
    (whatever `other` says), InvalidInput naming `other` for a value that is no job id."""
    this = provenance_get(user=user, job_id=job_id)
    if this is None:
        raise NotFound("No provenance for such a job.")
    if not other.isdigit() or len(other) > 18:
        raise InvalidInput({"other": ["The id of another job of yours."]})
    that = provenance_get(user=user, job_id=int(other))
    if that is None:
        raise NotFound("No provenance for such a job.")
    return this, that


def provenance_others(*, job: Job) -> QuerySet[Job]:
    """The owner's other jobs of the same template that have a record, newest first: what the job's
    page offers to compare it with."""
    return (Job.objects.filter(user_id=job.user_id, template=job.template, provenance__isnull=False)
            .exclude(pk=job.pk).order_by("-submitted_at", "-id").only("pk", "name", "submitted_at", "state")
            [:OTHERS_SHOWN])


@dataclass(frozen=True)
class Difference:
    field: str
    this: Any
    other: Any
    same: bool


@dataclass(frozen=True)
class PackageRow:
    name: str
    this: str | None  # the version; None: not in this run's environment
    other: str | None
    status: str  # "same", "changed", "only this", "only other"


@dataclass(frozen=True)
class InputRow:
    path: str  # a folder's files as folder/file
    this: dict | None  # size, mtime, sha256 (None when not hashed), kind; None: not an input of this run
    other: dict | None
    same: bool


@dataclass(frozen=True)
class ResultRow:
    run: str
    tag: str
    this: float | None  # the final value
    other: float | None
    same: bool


@dataclass
class Comparison:
    this: Provenance
    other: Provenance
    fields: list[Difference]  # what made the runs
    run_time: list[Difference]  # what differs by nature between two runs
    packages: list[PackageRow]
    inputs: list[InputRow]
    results: list[ResultRow]
    curves: list[dict] = field(default_factory=list)  # job, run, tag, steps, values
    chart: dict | None = None

    @property
    def provenance_same(self) -> bool:
        return all(item.same for item in self.fields)

    @property
    def results_same(self) -> bool:
        return all(item.same for item in self.results)

    @property
    def verdict(self) -> str:
        if not self.provenance_same:
            changed = ", ".join(item.field for item in self.fields if not item.same)
            return f"What made the runs differs: {changed}."
        if not self.results_same:
            return "What made the runs is the same, but their results differ."
        return "Only run-time facts differ."


def _normalised(value: Any, uuid: str) -> Any:
    """The value with the job's own id replaced (its paths name it), so two runs' values compare."""
    if isinstance(value, str):
        return value.replace(uuid, JOB_PLACEHOLDER)
    if isinstance(value, list):
        return [_normalised(item, uuid) for item in value]
    if isinstance(value, dict):
        return {key: _normalised(item, uuid) for key, item in value.items()}
    return value


# What a re-run's script adds to pin what its original ran with (templates/jobs/_common/prologue.sh.j2):
# its scratch work trees' block, its paths' copies, the recorder's map back to the originals, the
# environment rebuilt from the lock. The code, environment and image are compared as facts of their
# own; the job's name is the user's label.
_PIN_BLOCKS = ((re.compile(r"^# Re-run exactly: each recorded work tree"),
                re.compile(r"^# A path parameter")),
               (re.compile(r"^# Re-run exactly: the environment"), re.compile(r"^source \S+/bin/activate")))
_PIN_LINES = re.compile(r"^(#SBATCH --job-name=.*|  case \$1 in|  esac|    \S+\) copy=\S+ ;;"
                        r"|source \S+/bin/activate\"?)$")
_PIN_PREFIX = re.compile(r"^GPUPORTAL_RERUN=('[^']*'|\S+) ")


def _script(record: Provenance) -> str:
    """The rendered script less what a re-run adds to pin its original's code and environment."""
    kept, until = [], None
    for line in record.script.splitlines():
        if until is not None:
            if not until.match(line):
                continue
            until = None
        block = next((end for start, end in _PIN_BLOCKS if start.match(line)), None)
        if block is not None:
            until = block
            continue
        if not _PIN_LINES.match(line):
            kept.append(_PIN_PREFIX.sub("", line))
    return "\n".join(kept)


def provenance_facts(record: Provenance) -> dict[str, Any]:
    """What made the run, field by field (what a rerun must match), with the job's own id replaced
    in its paths; run-time facts (times, ids, node) are not among them."""
    captured = record.captured or {}
    facts = {
        "template": record.template,
        "script": _script(record),
        "parameters": record.parameters,
        "resources": record.resources,
        "image.reference": record.image_reference,
        "image.digest": record.image_digest,
        "environment.name": record.environment,
        "environment.hash": record.environment_hash,
        "code": [{key: item.get(key) for key in ("path", "commit", "remote", "diff")}
                 for item in captured.get("code", [])],
        "inputs": [{key: item.get(key) for key in ("path", "kind", "size", "sha256")}
                   for item in captured.get("inputs", [])],
        "gpu": captured.get("gpu", {}),
    }
    return _normalised(facts, str(record.job.uuid))


def _same(name: str, mine: dict[str, Any], theirs: dict[str, Any]) -> bool:
    """A run by digest is the same image whatever its tag says; an environment rebuilt from its lock
    elsewhere is the same environment whatever it is called."""
    by = {"image.reference": "image.digest", "environment.name": "environment.hash"}.get(name)
    if by and mine[by] and mine[by] == theirs[by]:
        return True
    return mine[name] == theirs[name]


def provenance_diff(this: Provenance, other: Provenance) -> list[Difference]:
    """The two records field by field, each marked same or different."""
    mine, theirs = provenance_facts(this), provenance_facts(other)
    return [Difference(field=name, this=mine[name], other=theirs[name], same=_same(name, mine, theirs))
            for name in mine]


def _run_time_facts(record: Provenance) -> dict[str, Any]:
    job, captured = record.job, record.captured or {}
    return {"job id": job.pk, "job uuid": str(job.uuid), "name": job.name, "Slurm job id": job.slurm_job_id,
            "submitted": job.submitted_at.isoformat() if job.submitted_at else None,
            "started": job.started_at.isoformat() if job.started_at else None,
            "ended": job.ended_at.isoformat() if job.ended_at else None,
            "elapsed seconds": int(job.elapsed.total_seconds()) if job.elapsed else None,
            "node": job.node_list, "state": job.state, "exit code": job.exit_code,
            "recording seconds": captured.get("seconds"), "output folder": f"{job.output_dir}/job-{job.uuid}"}


def run_time_diff(this: Provenance, other: Provenance) -> list[Difference]:
    mine, theirs = _run_time_facts(this), _run_time_facts(other)
    return [Difference(field=name, this=mine[name], other=theirs[name], same=mine[name] == theirs[name])
            for name in mine]


def _packages(lock: str) -> dict[str, str]:
    """A lock's `name==version` (or `name @ url`) lines by normalised name; a line of another shape
    (a module name) is its own name with no version."""
    found = {}
    for line in lock.splitlines():
        if not line.strip():
            continue
        match = _LOCK_LINE.match(line)
        name, version = (match.group(1), match.group(2)) if match else (line.strip(), "")
        found[re.sub(r"[-_.]+", "-", name).lower()] = version
    return found


def packages_diff(this: Provenance, other: Provenance) -> list[PackageRow]:
    """The two environments' locks package by package, changed ones first."""
    mine, theirs = _packages(this.environment_lock), _packages(other.environment_lock)
    rows = []
    for name in sorted(mine.keys() | theirs.keys()):
        left, right = mine.get(name), theirs.get(name)
        status = ("only other" if left is None else "only this" if right is None
                  else "same" if left == right else "changed")
        rows.append(PackageRow(name=name, this=left, other=right, status=status))
    return sorted(rows, key=lambda row: row.status == "same")


def _files(record: Provenance) -> dict[str, dict]:
    """Each input file by its path; a folder's files under the folder's."""
    found: dict[str, dict] = {}
    for item in (record.captured or {}).get("inputs", []):
        path = _normalised(item.get("path", ""), str(record.job.uuid))
        if item.get("kind") == "folder":
            for inner in item.get("files", []):
                found[f"{path.rstrip('/')}/{inner.get('path')}"] = {"kind": "file", **_file(inner)}
            if not item.get("files"):
                found[path] = {"kind": "folder", "size": item.get("size"), "sha256": None}
        else:
            found[path] = {"kind": item.get("kind", "file"), **_file(item)}
    return found


def _file(item: dict) -> dict:
    return {"size": item.get("size"), "mtime": item.get("mtime"), "sha256": item.get("sha256")}


def _same_file(left: dict, right: dict) -> bool:
    """By content where both were hashed; else by kind, size and time (what a listing has)."""
    if left.get("sha256") and right.get("sha256"):
        return left["sha256"] == right["sha256"]
    return all(left.get(key) == right.get(key) for key in ("kind", "size", "mtime", "sha256"))


def inputs_diff(this: Provenance, other: Provenance) -> list[InputRow]:
    mine, theirs = _files(this), _files(other)
    return [InputRow(path=path, this=mine.get(path), other=theirs.get(path),
                     same=path in mine and path in theirs and _same_file(mine[path], theirs[path]))
            for path in sorted(mine.keys() | theirs.keys())]


def _series(job: Job) -> dict[tuple[str, str], tuple[list[int], list[float | None]]]:
    """The job's metrics by (run, key): its MLflow runs' histories, and the scalars its TensorBoard
    events gave (those of its exit hook, under "tensorboard/<run>" where a run has the same key)."""
    found: dict[tuple[str, str], tuple[list[int], list[float | None]]] = {}
    curves: list[Curve] = job_curves(job=job)
    for curve in curves:
        found[(curve.run, curve.tag)] = (curve.steps, curve.values)
    for metric in JobMetric.objects.filter(job=job).order_by("run", "tag"):
        key = (metric.run or ".", metric.tag)
        found[key if key not in found else (f"tensorboard/{key[0]}", key[1])] = (metric.steps, metric.values)
    return found


def _final(values: list[float | None]) -> float | None:
    return next((value for value in reversed(values) if value is not None), None)


def _same_result(left: float | None, right: float | None) -> bool:
    if left is None or right is None:
        return left is right
    return math.isclose(left, right, rel_tol=0.0, abs_tol=RESULT_TOLERANCE)


def results_diff(this: Provenance, other: Provenance) -> tuple[list[ResultRow], list[dict]]:
    """Final values per run name and key, and both jobs' curves (labelled by job) for one chart. Run
    names are the users' (a rerun logs under the same name); a job's run name that is its id does
    not match, so a job's single run is matched with the other's single run."""
    mine, theirs = _series(this.job), _series(other.job)
    if len({run for run, _ in mine}) == 1 and len({run for run, _ in theirs}) == 1:
        [left], [right] = {run for run, _ in mine}, {run for run, _ in theirs}
        theirs = {(left, tag): value for (_, tag), value in theirs.items()} if left != right else theirs
    rows = []
    for key in sorted(mine.keys() | theirs.keys()):
        left = _final(mine[key][1]) if key in mine else None
        right = _final(theirs[key][1]) if key in theirs else None
        rows.append(ResultRow(run=key[0], tag=key[1], this=left, other=right, same=_same_result(left, right)))
    curves = [{"job": job.pk, "run": run, "tag": tag, "steps": steps, "values": values}
              for job, series in ((this.job, mine), (other.job, theirs))
              for (run, tag), (steps, values) in series.items()]
    return rows, curves


@dataclass(frozen=True)
class _Line:
    run: str
    tag: str
    steps: list[int]
    values: list[float | None]


def provenance_compare(this: Provenance, other: Provenance) -> Comparison:
    """Two of the user's runs side by side (both records are the caller's user's: provenance_get)."""
    results, curves = results_diff(this, other)
    lines = [_Line(run=f"job {curve['job']}" + (f" {curve['run']}" if curve["run"] != "." else ""),
                   tag=curve["tag"], steps=curve["steps"], values=curve["values"]) for curve in curves]
    return Comparison(this=this, other=other, fields=provenance_diff(this, other),
                      run_time=run_time_diff(this, other), packages=packages_diff(this, other),
                      inputs=inputs_diff(this, other), results=results, curves=curves,
                      chart=job_metrics_chart(metrics=lines))
