"""Which folders TensorBoard may open: checked lexically, before anything reaches a script.

A user may open any folder under their own home directory or under the read-only shared data mount.
The check is on the text alone (absolute, normalised, no `..`, no control characters, bounded): the
portal cannot look inside users' homes, and TensorBoard runs as the user, so even a link inside an
allowed folder reaches nothing the user could not read anyway.
"""

import posixpath
import unicodedata
from typing import Any

from portal.core.errors import InvalidInput

MAX_LENGTH = 1024


def logdir_validate(*, value: Any, home: str, data_dir: str) -> str:
    """`value` if it is a folder the user may open, else InvalidInput naming `logdir`."""
    problem = _problem(value, home.rstrip("/") or "/", data_dir.rstrip("/") or "/")
    if problem:
        raise InvalidInput({"logdir": [problem]})
    return value


def _problem(value: Any, home: str, data_dir: str) -> str:
    if not isinstance(value, str) or not value:
        return "Give a folder as an absolute path, e.g. ~/logs written out in full."
    if len(value) > MAX_LENGTH:
        return f"At most {MAX_LENGTH} characters."
    if any(unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") for character in value):
        return "Must not contain control characters."
    if not value.startswith("/"):
        return f"Must be an absolute path (starting with /), e.g. {home}/logs."
    if ".." in value.split("/"):
        return "Must not contain '..'."
    if posixpath.normpath(value) != value:
        return f"Write the path in its plain form: {posixpath.normpath(value)}."
    if not any(value == root or value.startswith(f"{root}/") for root in (home, data_dir)):
        return f"Must be a folder under your home directory ({home}) or the shared data ({data_dir})."
    return ""
