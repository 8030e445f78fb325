"""Writing a job's provenance: the portal's part when the job is stored, the job's own part (read
as its user through job-files) once it has ended; and a session's when it is stored."""

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from portal.containers.digests import DigestUnresolved, image_digest
from portal.containers.models import Image
from portal.containers.references import ReferenceInvalid, reference_parse
from portal.environments.models import Environment
from portal.environments.services import MANIFEST
from portal.jobs.models import Job
from portal.provenance.models import Provenance, SessionProvenance
from portal.sessions.models import Session
from portal.tracking.models import Tag
from portal.tracking.services import dataset_inputs_record
from slurm.errors import SlurmError
from slurm.user_files import OutputUnsafe, job_output_read

logger = logging.getLogger(__name__)

# Written by scripts/envs/build.sh beside the manifest: `pip freeze --all` of the build.
LOCK = "gpuportal-env.lock"
# Each registry request's bound: a submit waits at most three of them per distinct image.
REGISTRY_TIMEOUT_SECONDS = 2.0
# The name of the dataset input the record is logged as on the job's MLflow runs.
DATASET_NAME = "gpuportal-provenance"
# What the job's record may weigh (a diff is capped at 1 MiB by the job itself).
CAPTURE_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class Lock:
    text: str  # name==version lines, sorted
    source: str  # "pip freeze", "manifest" or "modules"
    sha256: str


@dataclass(frozen=True)
class ImageFacts:
    reference: str = ""
    digest: str = ""
    status: str = Provenance.Image.NONE
    reason: str = ""


def provenance_record(*, jobs: Sequence[Job]) -> None:
    """The portal's part of each new job's record, in the transaction that stores the jobs. An image
    digest is asked once per image and user, each request bounded: a registry that does not answer
    is recorded as such, and the submit goes on."""
    names = {job.parameters.get("environment") for job in jobs} - {None, ""}
    found = Environment.objects.filter(name__in=names).select_related("container_image")
    environments = {environment.name: environment for environment in found}
    images: dict[tuple[int, int], ImageFacts] = {}
    rows = []
    for job in jobs:
        environment = environments.get(job.parameters.get("environment") or "")
        image = getattr(environment, "container_image", None) if environment else None
        if image is not None and (image.pk, job.user_id) not in images:
            images[(image.pk, job.user_id)] = image_facts(image=image, user_id=job.user_id)
        facts = images[(image.pk, job.user_id)] if image is not None else ImageFacts()
        lock = environment_lock(environment) if environment else None
        rows.append(Provenance(
            job=job, template=job.template, script=job.script, parameters=job.parameters,
            resources={"partition": job.partition, "nodes": job.nodes, "gpus_per_node": job.gpus_per_node,
                       "cpus_per_node": job.cpus_per_node, "mem_mb_per_node": job.mem_mb_per_node,
                       "time_limit_minutes": int(job.time_limit.total_seconds() // 60)},
            image_reference=facts.reference, image_digest=facts.digest, image_status=facts.status,
            image_reason=facts.reason, environment=environment.name if environment else "",
            environment_lock=lock.text if lock else "", environment_lock_source=lock.source if lock else "",
            environment_hash=lock.sha256 if lock else ""))
    Provenance.objects.bulk_create(rows)


def session_provenance_record(*, session: Session) -> SessionProvenance:
    """A session's record, in the transaction that stores it: its environment's lock and the image's
    digest (asked of the registry as for a job, bounded), and the resources it asked for."""
    environment = (Environment.objects.filter(name=session.environment).select_related("container_image")
                   .first() if session.environment else None)
    image = getattr(environment, "container_image", None) if environment else None
    facts = image_facts(image=image, user_id=session.user_id) if image is not None else ImageFacts()
    lock = environment_lock(environment) if environment else None
    return SessionProvenance.objects.create(
        session=session, resources={"partition": session.partition, "nodes": session.nodes,
                                    "gpus_per_node": session.gpus, "hours": session.hours,
                                    "profile": session.profile, "account": session.account},
        image_reference=facts.reference, image_digest=facts.digest, image_status=facts.status,
        image_reason=facts.reason, environment=environment.name if environment else session.environment,
        environment_lock=lock.text if lock else "", environment_lock_source=lock.source if lock else "",
        environment_hash=lock.sha256 if lock else "")


def image_facts(*, image: Image, user_id: int) -> ImageFacts:
    if not image.is_registry:
        return ImageFacts(reference=image.reference, status=Provenance.Image.LOCAL)
    try:
        reference = reference_parse(image.reference)
    except ReferenceInvalid as error:
        return ImageFacts(reference=image.reference, status=Provenance.Image.UNRESOLVED, reason=str(error))
    if reference.digest:
        return ImageFacts(reference=image.reference, digest=reference.digest, status=Provenance.Image.PINNED)
    try:  # the digest the job's script runs (asked for it in the same submit)
        digest = image_digest(image=image, user_id=user_id, timeout=REGISTRY_TIMEOUT_SECONDS)
    except DigestUnresolved as error:
        return ImageFacts(reference=image.reference, status=Provenance.Image.UNRESOLVED, reason=str(error))
    return ImageFacts(reference=image.reference, digest=digest, status=Provenance.Image.RESOLVED)


def environment_lock(environment: Environment) -> Lock | None:
    """The environment's lock as its build left it: the build's `pip freeze` (LOCK), else the
    manifest's frameworks; a modules environment's module list. Read once per build (keyed on the
    files' times), never by running anything."""
    if environment.kind == Environment.Kind.MODULES:
        return _lock("\n".join(sorted(environment.modules)), "modules")
    if environment.kind != Environment.Kind.PYTHON or not environment.path:
        return None
    prefix = Path(environment.path)
    for name in (LOCK, MANIFEST):
        try:
            mtime = (prefix / name).stat().st_mtime_ns
        except OSError:
            continue
        return _lock_read(str(prefix / name), mtime)
    return None


@lru_cache(maxsize=64)
def _lock_read(path: str, mtime: int) -> Lock | None:
    try:
        text = Path(path).read_text()
        if not path.endswith(LOCK):
            frameworks = json.loads(text).get("frameworks") or {}
            return _lock("\n".join(f"{name}=={version}" for name, version in sorted(frameworks.items())),
                         "manifest")
    except (OSError, ValueError, AttributeError) as error:
        logger.warning("environment lock %s unreadable: %s", path, error)
        return None
    lines = sorted({line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")},
                   key=str.lower)
    return _lock("\n".join(lines), "pip freeze")


def _lock(text: str, source: str) -> Lock:
    return Lock(text=text, source=source, sha256=hashlib.sha256(text.encode()).hexdigest())


def provenance_capture(*, job: Job) -> Provenance | None:
    """Read what the job recorded of itself (code, inputs, GPUs), as its user, and store it."""
    record = Provenance.objects.filter(job=job, capture_state=Provenance.Capture.PENDING).first()
    if record is None:
        return None
    try:
        found = job_output_read(user=job.user.username, job_uuid=job.uuid, stream="provenance", offset=0,
                                limit=CAPTURE_MAX_BYTES)
    except OutputUnsafe as error:
        return _captured(record, Provenance.Capture.FAILED, reason=f"not read: {error.message}")
    except SlurmError as error:  # the helper did not answer: left pending, read at the next try
        logger.warning("provenance of job %s not read: %s", job.pk, error.message)
        return record
    if not found.exists:
        return _captured(record, Provenance.Capture.ABSENT, reason="The job wrote no provenance file.")
    try:
        document = json.loads(found.data) if found.size <= CAPTURE_MAX_BYTES else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return _captured(record, Provenance.Capture.FAILED, reason="The job's provenance file is not "
                         f"a JSON object of at most {CAPTURE_MAX_BYTES} bytes.")
    record = _captured(record, Provenance.Capture.DONE, captured=document)
    _run_tags(record)
    return record


def provenance_tags(record: Provenance) -> dict[str, str]:
    """The record's key facts as MLflow tags of the job's run: what to filter and compare runs on."""
    captured = record.captured or {}
    code = captured.get("code") or [{}]
    dirty = any(item.get("diff") for item in captured.get("code", []))
    inputs = json.dumps([[item.get("path"), item.get("sha256")] for item in captured.get("inputs", [])])
    tags = {
        "gpuportal.provenance.image": record.image_reference,
        "gpuportal.provenance.image_digest": record.image_digest,
        "gpuportal.provenance.environment": record.environment,
        "gpuportal.provenance.environment_hash": record.environment_hash,
        "gpuportal.provenance.git_commit": code[0].get("commit", ""),
        "gpuportal.provenance.git_remote": code[0].get("remote", ""),
        "gpuportal.provenance.git_dirty": str(dirty).lower() if captured.get("code") else "",
        "gpuportal.provenance.inputs_sha256": hashlib.sha256(inputs.encode()).hexdigest()
        if captured.get("inputs") else "",
        "gpuportal.provenance.gpu": (captured.get("gpu") or {}).get("model", ""),
    }
    return {key: str(value) for key, value in tags.items() if value}


def provenance_dataset(record: Provenance) -> dict[str, Any]:
    """The record as an MLflow dataset input of the job's run (what `mlflow.log_input` logs): its
    source the record's API address, its digest the record's, its profile the key facts."""
    tags = provenance_tags(record)
    document = json.dumps({"tags": tags, "captured": record.captured, "script": record.script,
                           "parameters": record.parameters, "resources": record.resources}, sort_keys=True)
    url = settings.PORTAL_URL.rstrip("/") + reverse("api:job-provenance", args=[record.job_id])
    return {"name": DATASET_NAME, "digest": hashlib.sha256(document.encode()).hexdigest()[:32],
            "source_type": "http", "source": json.dumps({"url": url}), "schema": "",
            "profile": json.dumps(tags, sort_keys=True), "tags": [{"key": "mlflow.data.context",
                                                                  "value": "provenance"}]}


def _run_tags(record: Provenance) -> None:
    """The record's key facts as the job's runs' tags, and the record as their dataset input."""
    tags = provenance_tags(record)
    runs = list(record.job.runs.all())
    Tag.objects.bulk_create([Tag(run=run, key=key, value=value)
                             for run in runs for key, value in tags.items()],
                            update_conflicts=True, unique_fields=["run", "key"], update_fields=["value"])
    dataset = provenance_dataset(record)
    for run in runs:
        dataset_inputs_record(run=run, inputs=[dataset])


def _captured(record: Provenance, state: str, *, reason: str = "",
              captured: dict | None = None) -> Provenance:
    record.capture_state, record.capture_reason, record.captured_at = state, reason, timezone.now()
    record.captured = captured or {}
    Provenance.objects.filter(pk=record.pk, capture_state=Provenance.Capture.PENDING).update(
        capture_state=state, capture_reason=reason, captured_at=record.captured_at, captured=record.captured)
    return record
