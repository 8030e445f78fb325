"""The shape of a Files path, and the helper's refusals in the portal's one error hierarchy.

A path is relative to its root (home, scratch or data), as the user-files helper takes it: names
joined by "/", "" for the root itself. The helper walks it without following links; this only
turns a bad shape into a 400 naming the field before any sudo."""

import contextlib
import unicodedata
from collections.abc import Iterator

from portal.core.errors import Conflict, Forbidden, InvalidInput, NotFound, TooLarge, Unavailable
from slurm.errors import SlurmRejected, SlurmUnreachable
from slurm.files import PROJECT_ROOT, ROOTS, FilesRefused, Root

MAX_PATH = 4096
MAX_NAME = 255


def root_clean(value: object, *, field: str = "root") -> Root:
    if value not in ROOTS and not (isinstance(value, str) and PROJECT_ROOT.fullmatch(value)):
        raise InvalidInput({field: [f"Must be one of {', '.join(ROOTS)}, or project:<name>."]})
    return value  # type: ignore[return-value]


def project_root(name: str) -> Root | None:
    """A project's root, where its name can be one (the helper's shape)."""
    root = f"project:{name}"
    return root if PROJECT_ROOT.fullmatch(root) else None


def path_clean(value: object, *, field: str = "path", allow_root: bool = True) -> str:
    """The path as the helper takes it: a leading or trailing "/" is dropped, nothing else changed."""
    if not isinstance(value, str):
        raise InvalidInput({field: ["Give a path relative to the root, e.g. data/run1."]})
    path = value.strip("/")
    problem = ""
    if len(path) > MAX_PATH:
        problem = f"At most {MAX_PATH} characters."
    elif any(unicodedata.category(character) in ("Cc", "Cf", "Zl", "Zp") for character in path):
        problem = "Must not contain control characters."
    elif path and any(name in ("", ".", "..") for name in path.split("/")):
        problem = "Names joined by '/', relative to the root: no '..', '.' or empty name."
    elif any(len(name.encode()) > MAX_NAME for name in path.split("/")):
        problem = f"A name is at most {MAX_NAME} bytes."
    elif not path and not allow_root:
        problem = "Name a file or folder inside the root, not the root itself."
    if problem:
        raise InvalidInput({field: [problem]})
    return path


def name_clean(value: object, *, field: str = "name") -> str:
    """One name (a new folder's, a rename's): no "/"."""
    if not isinstance(value, str) or not value or "/" in value:
        raise InvalidInput({field: ["One name, without '/'."]})
    return path_clean(value, field=field, allow_root=False)


def joined(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


@contextlib.contextmanager
def helper_errors(*, conflict_code: str = "conflict") -> Iterator[None]:
    """The helper's refusals as the portal's errors: never a 500 for a path the user gave."""
    try:
        yield
    except FilesRefused as refused:
        if refused.kind == "usage":
            raise InvalidInput({"path": [refused.message]}) from refused
        if refused.kind == "absent":
            raise NotFound("No such file or folder.") from refused
        if refused.kind == "unsafe":
            raise Forbidden("That is a link, a device or outside your folders: it is not opened.",
                            code="unsafe_path") from refused
        if refused.kind == "denied":
            raise Forbidden("The file system refused it (permissions or read-only).",
                            code="permission_denied") from refused
        if refused.kind == "conflict":
            raise Conflict(refused.message, code=conflict_code) from refused
        if refused.kind == "full":
            raise TooLarge("No space left, or over your quota.", code="quota_exceeded") from refused
        raise Unavailable(f"The file system failed: {refused.message}", code="io_error") from refused
    except SlurmUnreachable as error:
        raise Unavailable("Your files did not answer in time; try again.",
                          code="files_unavailable") from error
    except SlurmRejected as error:
        # sudo's own refusal: an account the portal may not act as.
        raise Forbidden("The portal may not open files as you.", code="no_file_access") from error
