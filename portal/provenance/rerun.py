"""Re-run exactly: a new job from a job's provenance record, through the jobs app's own submit (the
same validation, policy and audit), with the same parameters and resources, the image by its
recorded digest, the environment as its recorded lock says, and the recorded code (the commit with
its diff, checked out by the job itself in a scratch work tree). Before it is submitted, the inputs
are checked against the record, as the user, through the user-files helper."""

import posixpath
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from portal.accounts.models import User
from portal.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from portal.core.paths import user_roots
from portal.environments.models import Environment
from portal.jobs.models import Job
from portal.jobs.services.prepare import CodeTree, Pin, job_prepare, unix_account
from portal.jobs.services.submission import job_create, job_submit_dispatch
from portal.provenance.models import Provenance
from portal.provenance.selectors import provenance_get
from portal.provenance.services import environment_lock
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError
from slurm.files import Root
from slurm.input_hashes import files_hash

# What a re-run's check of its inputs may hash, as the job's own record does (provenance.py).
HASH_BYTES = 2 * 1024**3


class RerunRefused(InvalidInput):
    """The inputs no longer match the record: `fields["inputs"]` names each file and why."""

    status = 409
    code = "inputs_changed"


@dataclass(frozen=True)
class InputProblem:
    path: str
    reason: str  # "changed" or "missing"


def job_rerun(*, user: User, job_id: int, run_anyway: bool = False) -> Job:
    """Submit the user's job `job_id` again, exactly; 404 for another user's, 409 with the reason
    for a record that cannot be re-run or inputs that changed (unless `run_anyway`)."""
    record = provenance_get(user=user, job_id=job_id)
    if record is None:
        raise NotFound("No provenance for such a job.")
    _complete_check(record)
    code = tuple(CodeTree(top=item["path"], commit=item["commit"], diff=item.get("diff") or "")
                 for item in record.captured.get("code", []))
    if not run_anyway and (problems := inputs_check(record, user=user, trees=code)):
        raise RerunRefused({"inputs": [{"path": p.path, "reason": p.reason} for p in problems]},
                           message="Inputs changed since the run: " + ", ".join(
                               f"{p.path} ({p.reason})" for p in problems)
                           + '. Send {"run_anyway": true} to re-run with them as they are now.')
    pin = Pin(image_digest=record.image_digest, code=code, **_environment_pin(record))
    # On the cluster it ran on (#38); with one configured, on that one, whatever an older job recorded.
    cluster = record.job.cluster if clusters_from_settings().several else ""
    draft = job_prepare(user=user, template=record.template, parameters=record.parameters,
                        name=record.job.name, pin=pin, cluster=cluster)
    with transaction.atomic():  # the job, its record and what it re-runs, or none of them
        job = job_create(user=user, draft=draft)
        # The new record names what the job runs: the recorded lock and digest, not the current ones.
        Provenance.objects.filter(job=job).update(
            rerun_of=record.job, environment_lock=record.environment_lock,
            environment_lock_source=record.environment_lock_source, environment_hash=record.environment_hash,
            image_reference=record.image_reference, image_digest=record.image_digest,
            image_status=record.image_status, image_reason=record.image_reason)
    job_submit_dispatch(job=job)
    return Job.objects.select_related("user").get(pk=job.pk)


def _complete_check(record: Provenance) -> None:
    """A record the job never finished writing cannot be re-run: 409 saying what is missing."""
    if record.capture_state != Provenance.Capture.DONE:
        why = record.capture_reason or "the job has not ended, so what it recorded of itself is not read yet"
        raise Conflict(f"This job's provenance is incomplete: {why}", code="provenance_incomplete")
    for item in record.captured.get("code", []):
        if not item.get("commit") or item.get("diff_truncated"):
            raise Conflict(f"This job's provenance is incomplete: the code in {item.get('path')} has "
                           + ("no commit" if not item.get("commit") else "a diff over the recorded bound"),
                           code="provenance_incomplete")
    if record.image_reference and record.image_status == Provenance.Image.UNRESOLVED:
        raise Conflict(f"This job's provenance is incomplete: its image's digest was not resolved "
                       f"({record.image_reason})", code="provenance_incomplete")


def _environment_pin(record: Provenance) -> dict[str, str]:
    """The same environment: the current one where its lock is still the recorded one, else rebuilt
    by the job from the recorded lock (unless the site has turned that off: 409)."""
    if not record.environment_hash:
        return {}
    environment = Environment.objects.filter(name=record.environment).first()
    current = environment_lock(environment) if environment else None
    if current is not None and current.sha256 == record.environment_hash:
        return {}
    why = (f"the environment {record.environment!r} " + ("is gone" if environment is None else
           "no longer has its recorded lock (its packages changed since the run)"))
    if not settings.PROVENANCE_REBUILD_ENVS:
        raise Conflict(f"Cannot re-run exactly: {why}, and this site does not rebuild environments from "
                       "their locks (PROVENANCE_REBUILD_ENVS).", code="environment_changed")
    rebuildable = environment is not None and environment.kind == Environment.Kind.PYTHON
    if not rebuildable or record.environment_lock_source != "pip freeze":
        raise Conflict(f"Cannot re-run exactly: {why}, and only a Python environment with a pip freeze "
                       "lock can be rebuilt.", code="environment_changed")
    return {"environment_lock": record.environment_lock, "environment_lock_sha256": record.environment_hash}


def inputs_check(record: Provenance, *, user: User, trees: tuple[CodeTree, ...] = ()) -> list[InputProblem]:
    """Each recorded input file as it is now, read as the user: changed (size or SHA-256) or missing.
    Files the recorded commit tracks are left out: the re-run takes them from the recorded code."""
    home = unix_account(user.username).pw_dir
    roots = user_roots(home=home, username=user.username)
    wanted: dict[tuple[str, str], tuple[str, dict]] = {}  # (root, relative path) -> (shown, recorded)
    problems: list[InputProblem] = []
    for item in record.captured.get("inputs", []):
        given = str(item.get("path", ""))
        full = given if given.startswith("/") else posixpath.join(home, given)
        files = ([(full, given, item)] if item.get("kind") == "file" else
                 [(posixpath.join(full, entry["path"]), posixpath.join(given, entry["path"]), entry)
                  for entry in item.get("files", [])] if item.get("kind") == "folder" else [])
        for path, shown, recorded in files:
            if recorded.get("tracked") and any(path.startswith(tree.top.rstrip("/") + "/") for tree in trees):
                continue
            located = _root_of(path, roots={"home": roots.home, "data": roots.data, "scratch": roots.scratch})
            if located is None:
                problems.append(InputProblem(shown, "missing"))
            else:
                wanted[located] = (shown, recorded)
    roots_named: tuple[Root, ...] = ("home", "data", "scratch")
    for root in roots_named:
        paths = [path for where, path in wanted if where == root]
        if not paths:
            continue
        try:
            found = files_hash(user=user.username, root=root, paths=paths, limit=HASH_BYTES)
        except SlurmError as error:
            raise Unavailable(f"Could not check the inputs as you: {error.message}",
                              code="inputs_unchecked") from None
        for path, now in zip(paths, found, strict=True):
            shown, recorded = wanted[(root, path)]
            if now.error:
                problems.append(InputProblem(shown, "missing"))
            elif now.size != recorded.get("size") or (recorded.get("sha256")
                                                      and now.sha256 != recorded["sha256"]):
                problems.append(InputProblem(shown, "changed"))
    return problems


def _root_of(path: str, *, roots: dict[str, str]) -> tuple[str, str] | None:
    """(root, path relative to it), the deepest root first (scratch may lie in home)."""
    for name, top in sorted(roots.items(), key=lambda pair: -len(pair[1])):
        if top and path.startswith(top.rstrip("/") + "/"):
            return name, path[len(top.rstrip("/")) + 1:]
    return None
