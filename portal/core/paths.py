"""Which folders and files a user may name: their home, their scratch and the shared data mount.

One check for every path a user gives (TensorBoard's `logdir`, job template parameters of type
`path`), on the text alone: absolute (or, where allowed, relative to the home), normalised, no `..`, no
control characters, bounded, under one of those roots. The portal never looks inside users' folders
(it would have to as them, through sudo); what uses the path runs as the user, so a link inside an
allowed folder reaches nothing the user could not read anyway, and a folder that does not exist
fails that job with its own message.
"""

import posixpath
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from portal.core.errors import InvalidInput

MAX_LENGTH = 1024


@dataclass(frozen=True)
class UserRoots:
    """The folders a user's paths may lie under."""

    home: str
    data: str
    scratch: str = ""  # empty: the site has no scratch

    def __iter__(self) -> Iterator[str]:  # home first
        return iter(root.rstrip("/") or "/" for root in (self.home, self.scratch, self.data) if root)

    def __str__(self) -> str:
        scratch = f", your scratch ({self.scratch})" if self.scratch else ""
        return f"your home directory ({self.home}){scratch} or the shared data ({self.data})"


def user_roots(*, home: str, username: str) -> UserRoots:
    """The user's home, scratch (GPUPORTAL_SCRATCH_DIR, where the site has one) and the data mount."""
    home = home.rstrip("/") or "/"
    return UserRoots(home=home, data=settings.DATA_DIR.rstrip("/") or "/",
                     scratch=settings.SCRATCH_DIR.format(home=home, username=username).rstrip("/"))


def path_shape_problem(value: Any, *, relative: bool = False) -> str:
    """What is wrong with `value` as a path whoever gives it, or "" (the roots are not checked)."""
    if not isinstance(value, str) or not value:
        return "Give a path, e.g. ~/data written out in full."
    if len(value) > MAX_LENGTH:
        return f"At most {MAX_LENGTH} characters."
    if any(unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") for character in value):
        return "Must not contain control characters."
    if not relative and not value.startswith("/"):
        return "Must be an absolute path (starting with /)."
    if ".." in value.split("/"):
        return "Must not contain '..'."
    if posixpath.normpath(value) != value:
        return f"Write the path in its plain form: {posixpath.normpath(value)}."
    return ""


def path_problem(value: Any, *, roots: UserRoots, relative: bool = False) -> str:
    """What is wrong with `value` as a path of the user's, or "". `relative`: a relative path is
    taken from the home directory."""
    if problem := path_shape_problem(value, relative=relative):
        return problem
    full = value if value.startswith("/") else posixpath.join(roots.home, value)
    if not any(full == root or full.startswith(f"{root.rstrip('/')}/") for root in roots):
        return f"Must be under {roots}."
    return ""


def path_validate(*, field: str, value: Any, roots: UserRoots) -> str:
    """`value` if it is an absolute path under `roots`, else InvalidInput naming `field`."""
    if problem := path_problem(value, roots=roots):
        raise InvalidInput({field: [problem]})
    return value
