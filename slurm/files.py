"""The Files page's way into a user's files: the user-files helper, run AS the user (issue #37).

deploy/libexec/user-files is installed as /usr/local/libexec/gpuportal/user-files and run through
the same exec prefix and runner as job-files (`sudo -n -u <user> --`, argv lists, never a shell), so
it reaches only what the user can, and only inside their roots (home, scratch, data). Downloads and
zips stream from its stdout; uploads stream into its stdin: nothing is held whole here.
"""

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from django.conf import settings

from slurm.errors import SlurmRejected
from slurm.runner import Output, SlurmRunner

# Fixed: deploy/sudoers.d/gpuportal names exactly this path.
USER_FILES = Path("/usr/local/libexec/gpuportal/user-files")
# A root: home, scratch, data, or project:<name> (a project's shared folder, in the folder the
# helper's root-owned configuration names; the kernel decides who may enter it).
Root = str
ROOTS: tuple[Root, ...] = ("home", "scratch", "data")
PROJECT_ROOT = re.compile(r"project:[a-z][a-z0-9_-]{0,63}")
# The helper's refusals ("user-files: <kind>: <detail>", see its header).
Kind = Literal["usage", "unsafe", "conflict", "absent", "denied", "full", "error"]
KINDS = ("usage", "unsafe", "conflict", "absent", "denied", "full", "error")
# One PATCH of an upload may take this long end to end (the client's own pace included).
APPEND_TIMEOUT_SECONDS = 3600.0


class FilesRefused(SlurmRejected):
    """The helper refused: `kind` says why (a link or device: unsafe; gone: absent; ...)."""

    def __init__(self, kind: Kind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Entry(NamedTuple):
    """One name in a folder. A tuple, not a dataclass: a listing makes 10,000 of them per request."""

    name: str
    type: Literal["file", "dir", "link", "other"]
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Listing:
    entries: list[Entry]
    truncated: bool


@dataclass(frozen=True)
class Stat:
    type: Literal["file", "dir"]
    size: int
    mtime_ns: int
    etag: str


@dataclass(frozen=True)
class Usage:
    total: int
    free: int
    used: int


def files_list(*, user: str, root: Root, path: str, limit: int) -> Listing:
    document = _document(_run(user, ["list", root, path, str(limit)]), "list")
    try:
        entries = [Entry(str(name), kind, int(size), int(mtime))
                   for name, kind, size, mtime in document["entries"]]
        return Listing(entries=entries, truncated=bool(document["truncated"]))
    except (KeyError, TypeError, ValueError) as error:
        raise SlurmRejected("user-files answered something unexpected") from error


def files_folder_json(*, user: str, root: Root, path: str, limit: int, sort: str, descending: bool,
                      contains: str) -> bytes:
    """The folder's listing, filtered and sorted by the helper, as the JSON object it wrote:
    {"entries": [{"name", "type", "size", "mtime_ns"}, ...], "truncated"} (the API's shape, passed on
    as it is: 10,000 entries cost no per-entry work here)."""
    raw = _run(user, ["folder", root, path, str(limit), sort, "desc" if descending else "asc", contains])
    header, newline, body = raw.partition(b"\n")
    if header != b"folder" or not newline or not body.startswith(b'{"entries": ['):
        raise SlurmRejected("user-files answered something unexpected")
    return body.rstrip(b"\n")


def files_stat(*, user: str, root: Root, path: str) -> Stat:
    return _stat(_document(_run(user, ["stat", root, path]), "stat"))


def files_read(*, user: str, root: Root, path: str, offset: int, limit: int) -> tuple[int, str, bytes]:
    """(the file's size, its ETag, up to `limit` bytes from `offset`): a preview or an edit."""
    header, _, data = _run(user, ["read", root, path, str(offset), str(limit)]).partition(b"\n")
    size, etag = _read_header(header)
    return size, etag, data


def files_open(*, user: str, root: Root, path: str) -> tuple[int, str, Output]:
    """(size, ETag, the whole file as it is read): a download. Close the output when done."""
    header, output = _stream(user, ["read", root, path, "0", str(2**62)])
    try:
        size, etag = _read_header(header)
    except SlurmRejected:
        output.close()
        raise
    return size, etag, output


def files_zip(*, user: str, root: Root, path: str) -> Output:
    """The folder as a zip, streamed; close it when done."""
    header, output = _stream(user, ["zip", root, path])
    if header != b"zip":
        output.close()
        raise SlurmRejected("user-files answered something unexpected")
    return output


def files_write(*, user: str, root: Root, path: str, content: str, etag: str | None) -> Stat:
    """Replace (or, with etag None, create) a file, only if it is still the version of `etag`."""
    raw = _run(user, ["write", root, path, etag or "-"], stdin=content)
    return _stat(_document(raw, "stat"))


def files_mkdir(*, user: str, root: Root, path: str) -> None:
    _run(user, ["mkdir", root, path])


def files_move(*, user: str, root: Root, path: str, to_root: Root, to_path: str) -> None:
    _run(user, ["move", root, path, to_root, to_path])


def files_copy(*, user: str, root: Root, path: str, to_root: Root, to_path: str) -> None:
    _run(user, ["copy", root, path, to_root, to_path])


def files_trash(*, user: str, root: Root, path: str) -> str:
    """Move into the user's trash; returns the name it has there."""
    return str(_document(_run(user, ["trash", root, path]), "trash").get("name", ""))


def files_trash_empty(*, user: str) -> None:
    _run(user, ["empty-trash"])


def files_append(*, user: str, root: Root, path: str, offset: int, chunks: Iterable[bytes]) -> int:
    """Append `chunks` to <path>.part, which must hold exactly `offset` bytes; returns its new size.
    A conflict's message is "offset <size>": the size it really has."""
    try:
        raw = _runner().pipe(USER_FILES.name, ["append", root, path, str(offset)], as_user=user,
                             source=chunks, timeout=APPEND_TIMEOUT_SECONDS)
    except SlurmRejected as error:
        raise _refusal(error) from error
    words = raw.split()
    if len(words) != 2 or words[0] != b"offset" or not words[1].isdigit():
        raise SlurmRejected("user-files answered something unexpected")
    return int(words[1])


def files_finish(*, user: str, root: Root, path: str, length: int) -> Stat:
    return _stat(_document(_run(user, ["finish", root, path, str(length)]), "stat"))


def files_usage(*, user: str, root: Root, path: str = "") -> Usage:
    """Space of the file system holding the folder <path> (an upload's target: it may be a mount of
    its own, e.g. a project's, with its own limit), as statvfs tells the user."""
    document = _document(_run(user, ["usage", root, path]), "usage")
    try:
        return Usage(total=int(document["total"]), free=int(document["free"]), used=int(document["used"]))
    except (KeyError, TypeError, ValueError) as error:
        raise SlurmRejected("user-files answered something unexpected") from error


def _runner() -> SlurmRunner:
    return SlurmRunner(bin_dir=USER_FILES.parent, exec_prefix=tuple(settings.SLURM_EXEC_PREFIX),
                       timeout=settings.SLURM_TIMEOUT_SECONDS)


def _run(user: str, args: list[str], *, stdin: str | None = None) -> bytes:
    try:
        return _runner().run_bytes(USER_FILES.name, args, as_user=user, stdin=stdin)
    except SlurmRejected as error:
        raise _refusal(error) from error


def _stream(user: str, args: list[str]) -> tuple[bytes, Output]:
    try:
        return _runner().stream(USER_FILES.name, args, as_user=user)
    except SlurmRejected as error:
        raise _refusal(error) from error


def _refusal(error: SlurmRejected) -> SlurmRejected:
    for line in error.message.splitlines():
        kind, _, detail = line.removeprefix("user-files: ").partition(": ")
        if line.startswith("user-files: ") and kind in KINDS:
            return FilesRefused(kind, detail)  # type: ignore[arg-type]
    return error


def _document(raw: bytes, header: str) -> dict:
    first, newline, rest = raw.partition(b"\n")
    try:
        document = json.loads(rest) if first == header.encode() and newline else None
    except ValueError:
        document = None
    if not isinstance(document, dict):
        raise SlurmRejected("user-files answered something unexpected")
    return document


def _stat(document: dict) -> Stat:
    try:
        return Stat(type=document["type"], size=int(document["size"]), mtime_ns=int(document["mtime_ns"]),
                    etag=str(document["etag"]))
    except (KeyError, TypeError, ValueError) as error:
        raise SlurmRejected("user-files answered something unexpected") from error


def _read_header(header: bytes) -> tuple[int, str]:
    words = header.split(b" ")
    if len(words) != 3 or words[0] != b"size" or not words[1].isdigit():
        raise SlurmRejected("user-files answered something unexpected")
    return int(words[1]), words[2].decode("ascii", errors="replace")
