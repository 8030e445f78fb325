"""The registry adapter: a tag's digest, asked of the registry (OCI distribution API) and never
pulled. Basic auth with the user's stored key, or the bearer token a registry's challenge names
(nvcr.io, Docker Hub); a registry with a private CA (the bed's) is trusted as Podman trusts it.

A job in a registry image runs it by the digest its tag has when the job is submitted
(`image_digest`), and its provenance records that same digest: asked once per submit."""

import re
import threading
import time
from pathlib import Path

import requests

from portal.containers.models import Image, RegistryCredential
from portal.containers.references import Reference, ReferenceInvalid, reference_parse
from portal.containers.secrets import secret_decrypt
from portal.core.errors import Unavailable

ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
CERTS = Path("/etc/containers/certs.d")
# How long an answer is reused for the same image and user: a submit's script and its provenance
# record (written in the same request) name one digest, asked once.
RECENT_SECONDS = 30.0
_recent: dict[tuple[str, int], tuple[float, str]] = {}
_recent_lock = threading.Lock()


class DigestUnresolved(Exception):
    """Why the digest is not known; fit to show the image's owner."""


def digest_resolve(reference: Reference, *, login: tuple[str, str] | None, timeout: float) -> str:
    """The digest the registry gives `reference`'s tag now; DigestUnresolved says why not.
    `timeout` bounds each of the (at most three) requests."""
    url = f"https://{reference.registry}/v2/{reference.path}/manifests/{reference.tag}"
    ca = CERTS / reference.registry / "ca.crt"
    verify: str | bool = str(ca) if ca.is_file() else True
    headers = {"Accept": ACCEPT}
    try:
        response = requests.head(url, headers=headers, auth=login, timeout=timeout, verify=verify)
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code == 401 and challenge.lower().startswith("bearer "):
            fields = dict(CHALLENGE.findall(challenge))
            token = requests.get(fields.get("realm", ""), auth=login, timeout=timeout, verify=verify,
                                 params={k: v for k, v in fields.items() if k in ("service", "scope")})
            if token.ok:
                body = token.json()
                headers["Authorization"] = f"Bearer {body.get('token') or body.get('access_token', '')}"
                response = requests.head(url, headers=headers, timeout=timeout, verify=verify)
    except (requests.RequestException, ValueError) as error:
        raise DigestUnresolved(f"{reference.registry} did not answer: {type(error).__name__}") from None
    if response.status_code in (401, 403):
        raise DigestUnresolved(f"{reference.registry} refused the stored key (HTTP {response.status_code})"
                               if login else f"no key stored for {reference.registry}")
    if response.status_code == 404:
        raise DigestUnresolved(f"{reference.registry} has no {reference.path}:{reference.tag}")
    digest = response.headers.get("Docker-Content-Digest", "")
    if not response.ok or not DIGEST.fullmatch(digest):
        raise DigestUnresolved(f"{reference.registry} answered HTTP {response.status_code} without a digest")
    return digest


def image_digest(*, image: Image, user_id: int, timeout: float) -> str:
    """The digest of the registry image's tag now, asked with `user_id`'s stored key for its registry
    (the one the reference names, if it names one); DigestUnresolved says why not."""
    try:
        reference = reference_parse(image.reference)
    except ReferenceInvalid as error:
        raise DigestUnresolved(str(error)) from None
    if reference.digest:
        return reference.digest
    key, now = (image.reference, user_id), time.monotonic()
    with _recent_lock:
        for stale in [k for k, (at, _) in _recent.items() if now - at > RECENT_SECONDS]:
            del _recent[stale]
        if key in _recent:
            return _recent[key][1]
    credential = RegistryCredential.objects.filter(user_id=user_id, registry=reference.registry).first()
    try:
        login = (credential.username, secret_decrypt(credential.secret)) if credential else None
    except Unavailable as error:
        raise DigestUnresolved(error.message) from None
    digest = digest_resolve(reference, login=login, timeout=timeout)
    with _recent_lock:
        _recent[key] = (time.monotonic(), digest)
    return digest
