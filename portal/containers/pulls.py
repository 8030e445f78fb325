"""Pulls: a Slurm job as the user that pulls a catalog image into their own image directory.

A pull follows the rules of all the portal's Slurm work (portal.lifecycle.work, `PULL_WORK`): the
request only checks and saves it, a worker runs its sbatch, and the poll cycle follows it from its
squeue and its one sacct, reads the job's own log (as the user, keys scrubbed) when it ended and
records the outcome: the pulled copy, offered as an environment, or the readable error. Nobody has
to look for a pull to move on; a GET only reads the database.
"""

import logging
import re
import shlex
from datetime import datetime

from celery import Task
from django.conf import settings
from django.db import transaction
from django.db.models import Q, QuerySet
from django.db.models.functions import Now

from portal.accounts.models import User
from portal.cluster.selectors import slurm_known_down
from portal.containers.configured import default_binds, runtime_get
from portal.containers.models import Image, Pull, RegistryCredential
from portal.containers.references import Reference, ReferenceInvalid, reference_parse
from portal.containers.runtimes import (
    PASSWORD_VARIABLE,
    USERNAME_VARIABLE,
    Bind,
    LaunchInvalid,
    RuntimeUnavailable,
)
from portal.containers.secrets import scrub, secret_decrypt
from portal.containers.services import home_of, image_environment_sync
from portal.core.errors import Conflict, InvalidInput, PortalError, Unavailable
from portal.lifecycle.kinds import Followed
from portal.lifecycle.work import (
    Unsettled,
    WorkKind,
    cluster_configured,
    cluster_slurm,
    fenced,
    lease_claim,
    on_cluster_of,
    sbatch_answer_lost_fence,
    sbatch_attempt,
    unsettled_followed,
    work_apply_accounting,
    work_apply_queue,
    work_cluster,
    work_dispatch,
    work_hand_over,
)
from slurm import states as slurm_states
from slurm.adapter import Slurm
from slurm.clusters import clusters_from_settings
from slurm.errors import SlurmError
from slurm.parsing import AccountedJob, QueuedJob
from slurm.user_files import OutputUnsafe, job_output_dir_ensure, job_output_read

logger = logging.getLogger(__name__)

# What a pull job prints (the portal reads its own log for them).
DONE_MARKER = "gpuportal-pull: done"
EXIT_MARKER = "gpuportal-pull: exit "
_LOG_LIMIT = 64 * 1024
_ERROR_CHARS = 2000
_WAITING = Q(state=Pull.State.PENDING, slurm_job_id="")


# --- the request: check, save, hand over ----------------------------------------------------------


def pull_start(*, user: User, image: Image, cluster: str = "") -> Pull:
    """Save a pull of `image` for `user` on `cluster` (a configured cluster's name; '' for the
    default one), due at once, and hand its sbatch to a worker: Slurm is not asked here. Raises
    InvalidInput naming `image` or `cluster`, Conflict while one of the same image runs, Unavailable
    when the user's registry key cannot be decrypted."""
    if image.owner_id is not None or not image.is_registry:
        raise InvalidInput({"image": ["Only catalog images from a registry are pulled."]})
    cluster = work_cluster(cluster)
    if refused := clusters_from_settings().get(cluster).refusal("runtime", image.runtime):
        raise InvalidInput({"cluster": [refused]})
    try:
        runtime_get(image.runtime)
        reference = reference_parse(image.reference)
    except (RuntimeUnavailable, ReferenceInvalid) as error:
        raise InvalidInput({"image": [str(error)]}) from None
    _registry_secrets(user, reference)  # a key that cannot be used is said now, not by a failed pull
    with transaction.atomic():
        # One at a time per user (a row lock on the user), so two clicks make one pull.
        User.objects.select_for_update().filter(pk=user.pk).first()
        if Pull.objects.filter(user=user, image=image, state__in=Pull.ACTIVE).exists():
            raise Conflict("This image is being pulled already.", code="pull_running")
        pull = Pull.objects.create(user=user, image=image, cluster=cluster, next_attempt_at=Now(),
                                   reason="On its way to Slurm.")
        _pull_script(pull)  # the runtime's own checks of its command line (InvalidInput: nothing saved)
        work_dispatch(send=lambda: _submit_first_task().delay(pull.pk), waiting=_waiting(pull.pk))
    pull.refresh_from_db()
    return pull


def _submit_first_task() -> Task:
    from portal.containers.tasks import pull_submit_first  # tasks import services, not the reverse

    return pull_submit_first


def _waiting(pull_id: int) -> QuerySet[Pull]:
    """The pull while it is saved but not in Slurm yet: what its sbatch's writes require."""
    return Pull.objects.filter(_WAITING, pk=pull_id)


# --- a worker: the sbatch -------------------------------------------------------------------------


def pull_submit_first_attempt(*, pull_id: int) -> None:
    """The first sbatch, in the worker the request dispatched, to the pull's own cluster; whatever
    goes wrong, the pull stays due and its cluster's poll cycle sends it (after looking for it in
    Slurm by its comment). While its cluster is down or no longer configured it waits in the portal."""
    cluster = _waiting(pull_id).values_list("cluster", flat=True).first()
    if cluster is None:
        return
    if not cluster_configured(cluster):
        _waiting(pull_id).update(reason=f"Its cluster {cluster!r} is no longer configured.")
        return
    if slurm_known_down(cluster):
        _waiting(pull_id).update(reason="Slurm is unreachable: it goes to Slurm when Slurm is back.")
        return
    pull_submit(pull_id=pull_id, slurm=cluster_slurm(cluster))


def pull_submit(*, pull_id: int, slurm: Slurm) -> None:
    """Claim a due pull and run its sbatch as its owner (nothing if somebody else holds it). The
    user's key for the registry reaches the job only through the job's environment."""
    # The same calls as a job's sbatch (the output folder, then sbatch): the same lease.
    lease = lease_claim(_waiting(pull_id).filter(user__is_active=True),
                        seconds=settings.JOBS_SUBMIT_LEASE_SECONDS)
    if lease is None:
        return
    pull = Pull.objects.select_related("user", "image").get(pk=pull_id)
    username = pull.user.username
    try:
        script = _pull_script(pull)
        secrets = _registry_secrets(pull.user, reference_parse(pull.image.reference))
        jobs_dir = settings.JOBS_OUTPUT_DIR.format(home=home_of(username).rstrip("/"))
    except (PortalError, ReferenceInvalid) as error:
        _fail(pull, _said(error))
        return

    def submit() -> str:
        job_output_dir_ensure(user=username, path=jobs_dir, timeout=settings.SLURM_TIMEOUT_SECONDS / 4)
        return slurm.submit(script=script, user=username, comment=pull.slurm_comment, secrets=secrets)

    sbatch = sbatch_attempt(submit=submit, waiting=_waiting(pull_id), lease=lease,
                            retry_seconds=settings.JOBS_RETRY_SECONDS)
    if sbatch.refused:
        _fail(pull, scrub(f"Slurm refused the pull: {sbatch.refused}", list(secrets.values())))
    elif sbatch.job_id:
        if not _adopt(pull, sbatch.job_id, lease=lease):  # it ended, or went on, while sbatch ran
            sbatch_answer_lost_fence(model=Pull, pk=pull.pk, job_id=sbatch.job_id, user=username,
                                     slurm=slurm)
            return
        logger.info("pull %s of %s submitted for %s as Slurm job %s", pull.pk, pull.image.name, username,
                    sbatch.job_id)


def _adopt(pull: Pull, job_id: str, lease: datetime | None = None) -> bool:
    """Record its Slurm job: found by its comment, or answered by the sbatch of the claim `lease`."""
    rows = _waiting(pull.pk) if lease is None else fenced(_waiting(pull.pk), lease)
    return bool(rows.update(slurm_job_id=job_id, submitted_at=Now(), next_attempt_at=None, reason="",
                            updated=Now()))


def _fail(pull: Pull, error: str) -> None:
    Pull.objects.filter(pk=pull.pk, state__in=Pull.ACTIVE).update(
        state=Pull.State.FAILED, error=error[:_ERROR_CHARS], next_attempt_at=None, updated=Now())


def _said(error: PortalError | ReferenceInvalid) -> str:
    if isinstance(error, InvalidInput):
        return " ".join(str(message) for messages in error.fields.values() for message in messages)
    return error.message if isinstance(error, PortalError) else str(error)


PULL_WORK = WorkKind(model=Pull, prefix=Pull.COMMENT_PREFIX, waiting=_WAITING, created="created",
                     adopt=_adopt,
                     resubmit=lambda pull_id: work_hand_over(send=lambda: _submit_first_task().delay(pull_id),
                                                             waiting=_waiting(pull_id)),
                     on_cluster=on_cluster_of)


def _registry_secrets(user: User, reference: Reference) -> dict[str, str]:
    """The user's login and key for the image's registry, for the job's environment only."""
    credential = RegistryCredential.objects.filter(user=user, registry=reference.registry).first()
    if credential is None:
        return {}
    return {USERNAME_VARIABLE: credential.username, PASSWORD_VARIABLE: secret_decrypt(credential.secret)}


def _destination(home: str, image: Image) -> tuple[str, str]:
    """The user's image directory, and where a pull of `image` leaves it."""
    images_dir = settings.CONTAINERS_USER_IMAGES_DIR.format(home=home.rstrip("/"))
    return images_dir, f"{images_dir}/{image.name}"


def _pull_script(pull: Pull) -> str:
    """The pull job's script; raises InvalidInput naming `image` where the runtime refuses it."""
    image, username = pull.image, pull.user.username
    try:
        runtime = runtime_get(image.runtime)
        reference = reference_parse(image.reference)
        home = home_of(username)
        images_dir, destination = _destination(home, image)
        # Charliecloud binds only onto directories that exist in the image: every bind a job or a
        # notebook server will use gets one.
        binds = default_binds(image.runtime, home=home,
                              extra=tuple(Bind(path, path) for path in settings.CONTAINERS_SERVER_MOUNTS))
        lines = runtime.pull_lines(reference=reference, destination=destination,
                                   mount_points=[bind.target for bind in binds])
    except (RuntimeUnavailable, ReferenceInvalid, LaunchInvalid) as error:
        raise InvalidInput({"image": [str(error)]}) from None
    local = runtime.local_image(reference=reference, destination=destination)
    jobs = settings.JOBS_OUTPUT_DIR.format(home=home.rstrip("/"))
    header = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote(f'pull-{image.name}')}",
        f"#SBATCH --output={jobs}/job-{pull.uuid}.out",
        f"#SBATCH --error={jobs}/job-{pull.uuid}.err",
        f"#SBATCH --time={settings.CONTAINERS_PULL_TIME_MINUTES}",
        "#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=1",
    ]
    if settings.CONTAINERS_PULL_PARTITION:
        header.append(f"#SBATCH --partition={settings.CONTAINERS_PULL_PARTITION}")
    # Only the two credential variables come from the submitter (--export): set the rest here.
    body = [
        f"# Generated by gpuportal: pull {reference} with {image.runtime} (pull {pull.uuid}).",
        "set -euo pipefail",
        f'export HOME={shlex.quote(home)} USER={shlex.quote(username)} LOGNAME="$USER"',
        "export PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
        "umask 077",
        f"trap 'echo \"{EXIT_MARKER}$?\"' EXIT",
        'cd "$HOME"',
        f"mkdir -p {shlex.quote(images_dir)}",
        f'echo gpuportal-pull: pulling {shlex.quote(str(reference))} with {image.runtime} on "$(hostname)"',
        # A subshell: the runtime's own EXIT trap (removing an auth file) leaves the marker's alone.
        "(",
        *(f"  {line}" for line in lines),
        ")",
        f"unset {USERNAME_VARIABLE} {PASSWORD_VARIABLE}",
        f"echo {shlex.quote(f'{DONE_MARKER} {local}')}",
    ]
    return "\n".join(header + body) + "\n"


# --- the poll cycle: follow, settle, retry --------------------------------------------------------


def pulls_apply_queue(*, queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Unsettled[Pull]:
    """Pulls follow this cycle's squeue (pending, running with its log's end); one that left it
    waits for the cycle's sacct. Due pulls are adopted or looked up as the engine says."""
    unsettled = work_apply_queue(kind=PULL_WORK, queue=queue, queried_at=queried_at, slurm=slurm)
    in_queue = {row.job_id: row for row in queue}
    active = Pull.objects.filter(on_cluster_of(slurm), state__in=Pull.ACTIVE)  # the cycle's cluster's
    for pull in active.exclude(slurm_job_id="").select_related("user"):
        row = in_queue.get(pull.slurm_job_id)
        if row is not None and slurm_states.is_live(row.state):
            _follow(pull, row)
        elif pull.submitted_at is not None and pull.submitted_at < queried_at:
            unsettled.left.append(pull)  # gone from the queue, or finished in it: sacct says how
    return unsettled


def pulls_follow(queue: list[QueuedJob], queried_at: datetime, slurm: Slurm) -> Followed:
    """Pulls as a kind of the poll cycle's work (portal.lifecycle.kinds)."""
    unsettled = pulls_apply_queue(queue=queue, queried_at=queried_at, slurm=slurm)
    return unsettled_followed(unsettled, settle=lambda rows: pulls_apply_accounting(unsettled=unsettled,
                                                                                    rows=rows))


def pulls_apply_accounting(*, unsettled: Unsettled[Pull], rows: list[AccountedJob]) -> None:
    """A pull whose job accounting shows ended gets its outcome from its log; then due pulls the
    queue lacked are adopted, held back (fenced) or sent again."""
    by_id = {row.job_id: row for row in rows}
    for pull in unsettled.left:
        row = by_id.get(pull.slurm_job_id)
        if row is not None and slurm_states.is_final(row.state) and row.end_time is not None:
            _settle(pull, ended=row.base_state)
    work_apply_accounting(unsettled=unsettled, rows=rows)


def _follow(pull: Pull, row: QueuedJob) -> None:
    """Pending or running, as the queue says; a running pull's progress is its log's end."""
    if slurm_states.base_state(row.state) in slurm_states.PENDING:
        Pull.objects.filter(pk=pull.pk, state__in=Pull.ACTIVE).exclude(state=Pull.State.PENDING).update(
            state=Pull.State.PENDING, updated=Now())
        return
    out, err = _log(pull, "stdout"), _log(pull, "stderr")
    changes = {}
    if out is not None and err is not None:
        changes["log_tail"] = scrub((out + err)[-_ERROR_CHARS:], _secrets_of(pull))
    Pull.objects.filter(pk=pull.pk, state__in=Pull.ACTIVE).update(state=Pull.State.RUNNING, updated=Now(),
                                                                 **changes)


def _settle(pull: Pull, *, ended: str) -> None:
    """The outcome of a pull whose job ended (`ended`: Slurm's state), from the job's own log. On
    success the pulled copy is recorded and offered as an environment."""
    out, err = _log(pull, "stdout"), _log(pull, "stderr")
    if out is None or err is None:
        return  # unreadable right now: the next cycle reads it again
    secrets = _secrets_of(pull)
    state, error, result = Pull.State.FAILED, "", None
    exit_line = next((line for line in reversed(out.splitlines()) if line.startswith(EXIT_MARKER)), None)
    if exit_line is None:
        error = f"The pull job ended {ended} before it finished. {err.strip()[-_ERROR_CHARS:]}"
    elif exit_line == f"{EXIT_MARKER}0" and DONE_MARKER in out:
        # What the runtime runs is the portal's to say, not the log's (a file of the user's).
        try:
            runtime = runtime_get(pull.image.runtime, check_installed=False)
            _, destination = _destination(home_of(pull.user.username), pull.image)
            local = runtime.local_image(reference=reference_parse(pull.image.reference),
                                        destination=destination)
        except (RuntimeUnavailable, ReferenceInvalid, InvalidInput) as problem:
            error = f"Pulled, but it cannot be used: {_said(problem)}"
        else:
            state, result = Pull.State.SUCCEEDED, _copy_record(pull, local)
    else:
        error = _readable_error(err) or "The pull job failed; see its log."
    Pull.objects.filter(pk=pull.pk, state__in=Pull.ACTIVE).update(
        state=state, error=scrub(error, secrets)[:_ERROR_CHARS], result=result, updated=Now(),
        log_tail=scrub((out + err)[-_ERROR_CHARS:], secrets))


def _copy_record(pull: Pull, local: str) -> Image:
    source = pull.image
    copy, _ = Image.objects.update_or_create(
        owner=pull.user,
        source=source,
        defaults={
            "name": source.name,
            "title": source.title,
            "runtime": source.runtime,
            "reference": source.reference,
            "frameworks": source.frameworks,
            "description": source.description,
            "local": local,
        },
    )
    image_environment_sync(image=copy)
    return copy


def _log(pull: Pull, stream: str) -> str | None:
    """The end of the job's `stream`, read as its owner; None when it cannot be read now."""
    username = pull.user.username
    try:
        output = job_output_read(user=username, job_uuid=pull.uuid, stream=stream, offset=0, limit=_LOG_LIMIT)
        if output.exists and output.size > _LOG_LIMIT:
            output = job_output_read(user=username, job_uuid=pull.uuid, stream=stream,
                                     offset=output.size - _LOG_LIMIT, limit=_LOG_LIMIT)
    except OutputUnsafe:
        return ""  # not a file the portal reads (a link, a fifo...): as if the job wrote nothing
    except SlurmError as error:
        logger.warning("pull %s: its %s cannot be read: %s", pull.pk, stream, error.message)
        return None
    return output.data.decode("utf-8", errors="replace") if output.exists else ""


def _secrets_of(pull: Pull) -> list[str]:
    """The user's keys (every registry): scrubbed from anything shown about the pull."""
    secrets = []
    for credential in RegistryCredential.objects.filter(user=pull.user):
        try:
            key = secret_decrypt(credential.secret)
        except Unavailable:
            continue
        secrets += [key, f"{credential.username}:{key}"]
    return secrets


def _readable_error(err: str) -> str:
    """The lines of stderr that say why (tools' own `error:` lines first), not the chatter; a
    refused login says so first."""
    lines = [line.strip() for line in err.splitlines() if line.strip()]
    hint = ""
    if re.search(r"authenticat|unauthori[sz]ed|\b401\b|denied", err, re.IGNORECASE):
        hint = "The registry refused the login: check the key stored on your profile.\n"
    errors = [
        line
        for line in lines
        if re.search(r"error|denied|unauthori[sz]ed|fail|not found|refused", line, re.I)
        and "shared mount" not in line
    ]
    return hint + "\n".join((errors or lines)[-8:])[-_ERROR_CHARS:]
