"""Image references and image paths: checked before anything reaches a command line.

The reference grammar is the OCI distribution one (distribution/reference's regexp.go): an
optional registry host[:port], slash-separated lowercase path components, then :tag and/or
@digest. Paths are absolute, normalised, of plain characters (no `:` or `,`, which runtimes use
as separators in their bind and mount options) and inside an allowed image directory.
"""

import posixpath
import re
from dataclasses import dataclass

_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|-+)"
_COMPONENT = f"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_LABEL = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"{_DOMAIN_LABEL}(?:\.{_DOMAIN_LABEL})*(?::[0-9]{{1,5}})?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
REFERENCE = re.compile(
    rf"^(?:(?P<domain>{_DOMAIN})/)?(?P<path>{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
REGISTRY = re.compile(rf"^{_DOMAIN}$")
PATH = re.compile(r"^(/[A-Za-z0-9._+@-]+)+$")
NAME_MAX = 255
DEFAULT_REGISTRY = "docker.io"


class ReferenceInvalid(ValueError):
    """The message is fit to show a user."""


@dataclass(frozen=True)
class Reference:
    registry: str  # host[:port]; docker.io when the reference names none
    path: str
    tag: str
    digest: str

    def __str__(self) -> str:
        text = f"{self.registry}/{self.path}"
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def reference_parse(text: object) -> Reference:
    """A registry reference such as nvcr.io/nvidia/pytorch:24.05-py3, or ReferenceInvalid."""
    if not isinstance(text, str) or not text or len(text) > NAME_MAX + 200:
        raise ReferenceInvalid("An image reference such as nvcr.io/nvidia/pytorch:24.05-py3.")
    match = REFERENCE.fullmatch(text)
    if match is None:
        raise ReferenceInvalid(f"{text[:100]!r} is not a valid image reference (registry/name:tag).")
    domain, path = match["domain"], match["path"]
    # The first component is a registry only if it looks like a host: a dot, a port, or localhost
    # (the grammar's own rule); else it is part of the name (library/python on docker.io).
    if domain and not ("." in domain or ":" in domain or domain == "localhost"):
        if domain != domain.lower():
            raise ReferenceInvalid(f"{text[:100]!r} is not a valid image reference (lowercase names).")
        path, domain = f"{domain}/{path}", None
    if len(path) + len(domain or "") > NAME_MAX:
        raise ReferenceInvalid(f"The image name is longer than {NAME_MAX} characters.")
    if not match["tag"] and not match["digest"]:
        raise ReferenceInvalid("Name a tag or a digest (e.g. :24.05-py3): `latest` is not assumed.")
    return Reference(
        registry=domain or DEFAULT_REGISTRY, path=path, tag=match["tag"] or "", digest=match["digest"] or ""
    )


def registry_check(text: object) -> str:
    """A registry host[:port] (what a stored key is for), or ReferenceInvalid."""
    if not isinstance(text, str) or not REGISTRY.fullmatch(text) or len(text) > 255:
        raise ReferenceInvalid("A registry host name with an optional port, e.g. nvcr.io or 127.0.0.1:5000.")
    return text.lower()


def path_check(path: object, *, allowed: list[str]) -> str:
    """An absolute, normalised path inside one of the `allowed` directories, or ReferenceInvalid."""
    if (
        not isinstance(path, str)
        or not PATH.fullmatch(path)
        or posixpath.normpath(path) != path
        or len(path) > 1024
    ):
        raise ReferenceInvalid("An absolute, normalised path of letters, digits and . _ + @ -.")
    roots = [root.rstrip("/") for root in allowed if root]
    if not any(path.startswith(f"{root}/") for root in roots):
        raise ReferenceInvalid(
            f"Images live under {' or '.join(r + '/' for r in roots) or 'no allowed directory'}."
        )
    return path
