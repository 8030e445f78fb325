"""Writes: the catalog, users' registry keys, pulls (a Slurm job as the user), and images offered
as software environments (kind container)."""

import logging
import pwd
import re
import shlex
from typing import Any

from django.conf import settings
from django.db import transaction

from portal.accounts.models import User
from portal.containers.models import Image, Pull, RegistryCredential
from portal.containers.references import ReferenceInvalid, path_check, reference_parse, registry_check
from portal.containers.runtimes import (
    PASSWORD_VARIABLE,
    USERNAME_VARIABLE,
    Bind,
    Launch,
    LaunchInvalid,
    RuntimeUnavailable,
    default_binds,
    runtime_get,
)
from portal.containers.secrets import scrub, secret_decrypt, secret_encrypt
from portal.core.errors import Conflict, InvalidInput, NotFound, Unavailable
from portal.environments.models import NAME_PATTERN, Environment
from slurm.adapter import Slurm
from slurm.errors import SlurmError
from slurm.states import is_final
from slurm.user_files import job_output_dir_create, job_output_read

logger = logging.getLogger(__name__)

KEY_MAX = 4096
USERNAME = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")  # NGC's is the literal `$oauthtoken`
# What a pull job prints (the portal reads its own log for them).
DONE_MARKER = "gpuportal-pull: done"
EXIT_MARKER = "gpuportal-pull: exit "
_LOG_LIMIT = 64 * 1024
_ERROR_CHARS = 2000


# --- the catalog ---------------------------------------------------------------------------------


def image_check(*, name: str, runtime: str, reference: str) -> dict[str, list[str]]:
    """Why an admin's catalog entry cannot be used (field -> messages); empty when it can.
    The runtime must be enabled and installed; a reference must parse; a path must lie under
    CONTAINERS_IMAGE_DIRS and be a form the runtime runs."""
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not re.fullmatch(NAME_PATTERN, name):
        errors["name"] = ["Lowercase letters, digits, _ and - (at most 64)."]
    try:
        found = runtime_get(runtime)
    except RuntimeUnavailable as error:
        errors["runtime"] = [str(error)]
        found = None
    try:
        if isinstance(reference, str) and reference.startswith("/"):
            path_check(reference, allowed=settings.CONTAINERS_IMAGE_DIRS)
            if found is not None:
                found.image(reference)  # a form this runtime runs (.sif, directory, SquashFS)
        else:
            reference_parse(reference)  # every runtime pulls from a registry into a user's own copy
    except (ReferenceInvalid, LaunchInvalid) as error:
        errors["reference"] = [str(error)]
    return errors


@transaction.atomic
def image_create(
    *,
    name: str,
    runtime: str,
    reference: str,
    title: str = "",
    description: str = "",
    frameworks: dict[str, str] | None = None,
) -> Image:
    if errors := image_check(name=name, runtime=runtime, reference=reference):
        raise InvalidInput(errors)
    if Image.objects.filter(owner=None, name=name).exists():
        raise InvalidInput({"name": [f"The catalog already has an image called {name!r}."]})
    image = Image.objects.create(
        name=name,
        runtime=runtime,
        reference=reference,
        title=title or name,
        description=description,
        frameworks=frameworks or {},
    )
    image_environment_sync(image=image)
    return image


def image_environment_sync(*, image: Image) -> Environment | None:
    """Offer a runnable image as a software environment (kind container): a catalog entry that is
    a local path, or a user's pulled copy. Registry entries are pulled first."""
    if image.owner_id is None and image.is_registry:
        return None
    name = _environment_name(image)
    environment = image.environment or Environment(name=name)
    environment.name = name
    environment.kind = Environment.Kind.CONTAINER
    environment.title = (image.title or image.name) + ("" if image.owner_id is None else " (pulled)")
    environment.path = image.runnable
    environment.frameworks = dict(image.frameworks)
    environment.description = image.description
    try:
        runtime_get(image.runtime)
        environment.healthy, environment.health_message = True, ""
    except RuntimeUnavailable as error:
        environment.healthy, environment.health_message = False, str(error)
    environment.save()
    if image.environment_id != environment.pk:
        image.environment = environment
        image.save(update_fields=["environment"])
    return environment


def _environment_name(image: Image) -> str:
    """The catalog image's own name, a copy's `<name>-<user>`; one another environment already
    holds gets the image's id too (environment names are unique)."""
    name = image.name if image.owner_id is None else f"{image.name}-{image.owner.username}"
    taken = Environment.objects.filter(name=name).exclude(pk=image.environment_id).exists()
    if taken or not re.fullmatch(NAME_PATTERN, name):
        name = f"{image.name[:40]}-image{image.pk}"
    return name


# --- launching images ----------------------------------------------------------------------------


def home_of(username: str) -> str:
    try:
        return pwd.getpwnam(username).pw_dir
    except KeyError:
        raise InvalidInput(
            {"non_field_errors": [f"{username} has no Unix account on the cluster."]}
        ) from None


def container_launch(*, image: Image, user: User, workdir: str = "") -> Launch:
    """How `user` runs `image` in a batch job: the site's binds for its runtime (home, data...),
    the allocated GPUs. (Notebook servers: the hub's spawner adds its Jupyter environment.)"""
    if image.owner_id is not None and image.owner_id != user.pk:
        raise InvalidInput({"environment": ["That image is somebody else's."]})
    home = home_of(user.username)
    return Launch(
        image=image.runnable,
        binds=default_binds(image.runtime, home=home),
        workdir=workdir,
        gpus=True,
    )


def container_activation(*, environment: Environment, user: User, workdir: str) -> dict[str, Any]:
    """What a batch script's prologue needs to run the template's programs in the image: the
    runtime's exact command (shell lines setting the RUN array, every value quoted)."""
    image = getattr(environment, "container_image", None)
    if image is None:
        raise InvalidInput({"environment": [f"{environment.name!r} has no container image."]})
    try:
        runtime = runtime_get(image.runtime)
        launch = container_launch(image=image, user=user, workdir=workdir)
        run = runtime.shell_prefix(launch)
    except (RuntimeUnavailable, LaunchInvalid) as error:
        raise InvalidInput({"environment": [str(error)]}) from None
    return {"runtime": image.runtime, "image": image.runnable, "run": run}


# --- registry keys -------------------------------------------------------------------------------


def credential_store(*, user: User, registry: str, username: str, key: str) -> RegistryCredential:
    """Store (or replace) the user's login and API key for `registry`, the key encrypted."""
    errors: dict[str, list[str]] = {}
    try:
        registry = registry_check(registry)
    except ReferenceInvalid as error:
        errors["registry"] = [str(error)]
    if not isinstance(username, str) or not USERNAME.fullmatch(username):
        errors["username"] = ["The registry login (NGC: $oauthtoken), 1 to 255 printable characters."]
    if (
        not isinstance(key, str)
        or not key
        or len(key) > KEY_MAX
        or not key.isprintable()
        or key != key.strip()
    ):
        errors["key"] = [f"The API key: 1 to {KEY_MAX} printable characters, no surrounding spaces."]
    if errors:
        raise InvalidInput(errors)
    credential, _ = RegistryCredential.objects.update_or_create(
        user=user, registry=registry, defaults={"username": username, "secret": secret_encrypt(key)}
    )
    logger.info("registry key stored for %s at %s", user.username, registry)
    return credential


def credential_delete(*, user: User, credential_id: int) -> None:
    deleted, _ = RegistryCredential.objects.filter(user=user, pk=credential_id).delete()
    if not deleted:
        raise NotFound("No such registry key.")


# --- pulls ---------------------------------------------------------------------------------------


def pull_start(*, user: User, image: Image) -> Pull:
    """Submit a Slurm job as `user` that pulls `image` into their own image directory. The user's
    key for its registry reaches the job only through the job's environment."""
    if image.owner_id is not None or not image.is_registry:
        raise InvalidInput({"image": ["Only catalog images from a registry are pulled."]})
    try:
        runtime = runtime_get(image.runtime)
        reference = reference_parse(image.reference)
    except (RuntimeUnavailable, ReferenceInvalid) as error:
        raise InvalidInput({"image": [str(error)]}) from None
    if Pull.objects.filter(
        user=user, image=image, state__in=[Pull.State.PENDING, Pull.State.RUNNING]
    ).exists():
        raise Conflict("This image is being pulled already.", code="pull_running")
    home = home_of(user.username)
    images_dir, destination = _destination(home, image)
    secrets: dict[str, str] = {}
    if credential := RegistryCredential.objects.filter(user=user, registry=reference.registry).first():
        secrets = {
            USERNAME_VARIABLE: credential.username,
            PASSWORD_VARIABLE: secret_decrypt(credential.secret),
        }
    pull = Pull.objects.create(user=user, image=image)
    # Charliecloud binds only onto directories that exist in the image: every bind a job or a
    # notebook server will use gets one.
    launch_binds = default_binds(
        image.runtime, home=home, extra=tuple(Bind(path, path) for path in settings.CONTAINERS_SERVER_MOUNTS)
    )
    try:
        lines = runtime.pull_lines(
            reference=reference, destination=destination, mount_points=[b.target for b in launch_binds]
        )
    except LaunchInvalid as error:
        pull.delete()
        raise InvalidInput({"image": [str(error)]}) from None
    script = _pull_script(
        pull=pull,
        user=user,
        home=home,
        images_dir=images_dir,
        reference=str(reference),
        runtime=image.runtime,
        lines=lines,
        local=runtime.local_image(reference=reference, destination=destination),
    )
    slurm = Slurm.from_settings()
    try:
        job_output_dir_create(user=user.username)
        job_id = slurm.submit(
            script=script, user=user.username, comment=f"gpuportal-pull:{pull.uuid}", secrets=secrets
        )
    except SlurmError as error:
        pull.state, pull.error = (
            Pull.State.FAILED,
            scrub(error.message, list(secrets.values()))[:_ERROR_CHARS],
        )
        pull.save(update_fields=["state", "error", "updated"])
        raise Unavailable(
            f"The pull could not be submitted: {pull.error}", code="pull_not_submitted"
        ) from None
    pull.slurm_job_id = job_id
    pull.save(update_fields=["slurm_job_id", "updated"])
    logger.info("pull %s of %s submitted for %s as Slurm job %s", pull.pk, image.name, user.username, job_id)
    return pull


def _destination(home: str, image: Image) -> tuple[str, str]:
    """The user's image directory, and where a pull of `image` leaves it."""
    images_dir = settings.CONTAINERS_USER_IMAGES_DIR.format(home=home.rstrip("/"))
    return images_dir, f"{images_dir}/{image.name}"


def _pull_script(
    *,
    pull: Pull,
    user: User,
    home: str,
    images_dir: str,
    reference: str,
    runtime: str,
    lines: list[str],
    local: str,
) -> str:
    jobs = settings.JOBS_OUTPUT_DIR.format(home=home.rstrip("/"))
    header = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote(f'pull-{pull.image.name}')}",
        f"#SBATCH --output={jobs}/job-{pull.uuid}.out",
        f"#SBATCH --error={jobs}/job-{pull.uuid}.err",
        f"#SBATCH --time={settings.CONTAINERS_PULL_TIME_MINUTES}",
        "#SBATCH --nodes=1 --ntasks=1 --cpus-per-task=1",
    ]
    if settings.CONTAINERS_PULL_PARTITION:
        header.append(f"#SBATCH --partition={settings.CONTAINERS_PULL_PARTITION}")
    # Only the two credential variables come from the submitter (--export): set the rest here.
    body = [
        f"# Generated by gpuportal: pull {reference} with {runtime} (pull {pull.uuid}).",
        "set -euo pipefail",
        f'export HOME={shlex.quote(home)} USER={shlex.quote(user.username)} LOGNAME="$USER"',
        "export PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
        "umask 077",
        f"trap 'echo \"{EXIT_MARKER}$?\"' EXIT",
        'cd "$HOME"',
        f"mkdir -p {shlex.quote(images_dir)}",
        f'echo gpuportal-pull: pulling {shlex.quote(reference)} with {runtime} on "$(hostname)"',
        # A subshell: the runtime's own EXIT trap (removing an auth file) leaves the marker's alone.
        "(",
        *(f"  {line}" for line in lines),
        ")",
        f"unset {USERNAME_VARIABLE} {PASSWORD_VARIABLE}",
        f"echo {shlex.quote(f'{DONE_MARKER} {local}')}",
    ]
    return "\n".join(header + body) + "\n"


def pull_refresh(*, pull: Pull) -> Pull:
    """Bring a pull's state up to date from its job's own log (read as the user), and from
    accounting when the job ended without a word. On success the pulled image is recorded and
    offered as an environment."""
    if pull.is_terminal or not pull.slurm_job_id:
        return pull
    username = pull.user.username
    # Asked before the log is read: a job that ended by then has written all it will write.
    ended = _ended_in_slurm(pull)
    out = _log_tail(username, pull, "stdout")
    err = _log_tail(username, pull, "stderr")
    if out is None:
        return pull  # unreadable right now: try again on the next look
    secrets = _secrets_of(pull)
    pull.log_tail = scrub((out + err)[-_ERROR_CHARS:], secrets)
    exit_line = next((line for line in reversed(out.splitlines()) if line.startswith(EXIT_MARKER)), None)
    if exit_line is None:
        if ended is None:
            pull.state = Pull.State.RUNNING if out else pull.state
            pull.save(update_fields=["state", "log_tail", "updated"])
            return pull
        pull.state = Pull.State.FAILED
        pull.error = scrub(
            f"The pull job ended {ended} before it finished. {err.strip()[-_ERROR_CHARS:]}", secrets
        )
    elif exit_line == f"{EXIT_MARKER}0" and DONE_MARKER in out:
        # What the runtime runs is the portal's to say, not the log's (a file of the user's).
        try:
            runtime = runtime_get(pull.image.runtime, check_installed=False)
            _, destination = _destination(home_of(username), pull.image)
            local = runtime.local_image(
                reference=reference_parse(pull.image.reference), destination=destination
            )
        except (RuntimeUnavailable, ReferenceInvalid) as error:
            pull.state, pull.error = Pull.State.FAILED, f"Pulled, but it cannot be used: {error}"
        else:
            pull.state = Pull.State.SUCCEEDED
            pull.result = _copy_record(pull, local)
    else:
        pull.state = Pull.State.FAILED
        pull.error = scrub(_readable_error(err), secrets) or "The pull job failed; see its log."
    pull.save(update_fields=["state", "error", "log_tail", "result", "updated"])
    return pull


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


def _log_tail(username: str, pull: Pull, stream: str) -> str | None:
    try:
        output = job_output_read(user=username, job_uuid=pull.uuid, stream=stream, offset=0, limit=_LOG_LIMIT)
        if output.exists and output.size > _LOG_LIMIT:
            output = job_output_read(
                user=username,
                job_uuid=pull.uuid,
                stream=stream,
                offset=output.size - _LOG_LIMIT,
                limit=_LOG_LIMIT,
            )
    except SlurmError as error:
        logger.warning("pull %s: its %s cannot be read: %s", pull.pk, stream, error.message)
        return None
    return output.data.decode("utf-8", errors="replace") if output.exists else ""


def _ended_in_slurm(pull: Pull) -> str | None:
    """The job's final state if Slurm says it ended, else None (still queued, running, or unknown)."""
    try:
        rows = Slurm.from_settings().accounting(job_ids=[pull.slurm_job_id]).rows
    except SlurmError:
        return None
    for row in rows:
        if row.job_id == pull.slurm_job_id and is_final(row.state):
            return row.base_state
    return None


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
