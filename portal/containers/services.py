"""Writes: the catalog, users' registry keys, and images offered as software environments (kind
container). Pulls (a Slurm job as the user) are in portal.containers.pulls."""

import logging
import pwd
import re
from typing import Any

from django.conf import settings
from django.db import transaction

from portal.accounts.models import User
from portal.containers.configured import default_binds, runtime_get
from portal.containers.digests import DigestUnresolved, image_digest
from portal.containers.models import Image, RegistryCredential
from portal.containers.references import ReferenceInvalid, path_check, reference_parse, registry_check
from portal.containers.runtimes import Launch, LaunchInvalid, RuntimeUnavailable
from portal.containers.secrets import secret_encrypt
from portal.core.errors import InvalidInput, NotFound
from portal.environments.models import NAME_PATTERN, Environment

logger = logging.getLogger(__name__)

KEY_MAX = 4096
# Each registry request's bound when a job's image digest is asked at submit (at most three).
DIGEST_TIMEOUT_SECONDS = 2.0
USERNAME = re.compile(r"^[^\x00-\x1f\x7f]{1,255}$")  # NGC's is the literal `$oauthtoken`


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


def container_launch(*, image: Image, user: User, workdir: str = "", digest: str = "") -> Launch:
    """How `user` runs `image` in a batch job: the site's binds for its runtime (home, data...),
    the allocated GPUs. (Notebook servers: the hub's spawner adds its Jupyter environment.)
    `digest`: a registry image is run by it (name@sha256:...), never by its tag."""
    if image.owner_id is not None and image.owner_id != user.pk:
        raise InvalidInput({"environment": ["That image is somebody else's."]})
    home = home_of(user.username)
    return Launch(
        image=image_by_digest(image, digest) if digest else image.runnable,
        binds=default_binds(image.runtime, home=home),
        workdir=workdir,
        gpus=True,
    )


def image_by_digest(image: Image, digest: str) -> str:
    """The registry image's name with `digest` in place of its tag."""
    try:
        reference = reference_parse(image.reference)
    except ReferenceInvalid as error:
        raise InvalidInput({"environment": [str(error)]}) from None
    return f"{reference.registry}/{reference.path}@{digest}"


def container_activation(*, environment: Environment, user: User, workdir: str,
                         digest: str = "") -> dict[str, Any]:
    """What a batch script's prologue needs to run the template's programs in the image: the
    runtime's exact command (shell lines setting the RUN array, every value quoted); by `digest`
    where one is given (a re-run's, as recorded)."""
    image = getattr(environment, "container_image", None)
    if image is None:
        raise InvalidInput({"environment": [f"{environment.name!r} has no container image."]})
    # A registry image the runtime runs by reference (not a pulled file) runs by the digest its tag
    # has now, never by the tag, which may move (its provenance records the same digest: digests.py).
    by_digest = image.is_registry and not image.local.startswith("/")
    if by_digest and not digest:
        try:
            digest = image_digest(image=image, user_id=user.pk, timeout=DIGEST_TIMEOUT_SECONDS)
        except DigestUnresolved as error:
            raise InvalidInput({"environment": [f"The image {image.reference} runs by its digest, which "
                                                f"could not be asked: {error}"]}) from None
    try:
        runtime = runtime_get(image.runtime)
        launch = container_launch(image=image, user=user, workdir=workdir, digest=digest if by_digest else "")
        run = runtime.shell_prefix(launch)
    except (RuntimeUnavailable, LaunchInvalid) as error:
        raise InvalidInput({"environment": [str(error)]}) from None
    return {"runtime": image.runtime, "image": launch.image, "run": run}


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
