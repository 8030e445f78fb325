"""The registry adapter: a tag's digest, asked of the registry (OCI distribution API) and never
pulled. Basic auth with the user's stored key, or the bearer token a registry's challenge names
(nvcr.io, Docker Hub); a registry with a private CA (the bed's) is trusted as Podman trusts it."""

import re
from pathlib import Path

import requests

from portal.containers.references import Reference

ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json", "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
])
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
CERTS = Path("/etc/containers/certs.d")


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
