"""Changing a user's files, always as the user through the user-files helper (slurm.files); deletes,
moves and finished uploads leave a FileAction, which the audit trail records."""

import uuid
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone

from portal.accounts.models import User
from portal.core.errors import Conflict, InvalidInput, NotFound, PreconditionFailed, TooLarge
from portal.files.models import FileAction, Upload
from portal.files.paths import helper_errors
from portal.files.selectors import upload_offset
from slurm import files
from slurm.files import Root, Stat

MAX_UPLOAD_NAME = 250  # the helper's limit less ".part"


def folder_create(*, user: User, root: Root, path: str) -> None:
    with helper_errors(conflict_code="exists"):
        files.files_mkdir(user=user.username, root=root, path=path)


def file_move(*, user: User, root: Root, path: str, to_root: Root, to_path: str) -> None:
    """Rename or move; the destination must not exist."""
    with helper_errors(conflict_code="exists"):
        files.files_move(user=user.username, root=root, path=path, to_root=to_root, to_path=to_path)
    FileAction.objects.create(user=user, action=FileAction.Action.MOVE, root=root, path=path,
                              to_root=to_root, to_path=to_path)


def file_copy(*, user: User, root: Root, path: str, to_root: Root, to_path: str) -> None:
    with helper_errors(conflict_code="exists"):
        files.files_copy(user=user.username, root=root, path=path, to_root=to_root, to_path=to_path)


def file_delete(*, user: User, root: Root, path: str) -> str:
    """Into the user's trash (they may empty it); returns the name it has there."""
    with helper_errors():
        name = files.files_trash(user=user.username, root=root, path=path)
    FileAction.objects.create(user=user, action=FileAction.Action.DELETE, root=root, path=path,
                              to_path=name)
    return name


def trash_empty(*, user: User) -> None:
    with helper_errors():
        files.files_trash_empty(user=user.username)
    FileAction.objects.create(user=user, action=FileAction.Action.EMPTY_TRASH)


def file_write(*, user: User, root: Root, path: str, content: str, etag: str | None) -> Stat:
    """Save an edit only over the version whose ETag the editor read (None: a new file)."""
    try:
        with helper_errors():
            return files.files_write(user=user.username, root=root, path=path, content=content, etag=etag)
    except Conflict as error:
        raise PreconditionFailed("The file changed since you opened it (another tab, a job?): reload it, "
                                 "then make your change again.") from error


def upload_create(*, user: User, root: Root, folder: str, filename: str, length: int) -> Upload:
    """A tus upload of `length` bytes to <folder>/<filename>, refused up front where it cannot fit
    (the free space the file system reports for the user: their quota where one applies)."""
    if len(filename.encode()) > MAX_UPLOAD_NAME:
        raise InvalidInput({"filename": [f"At most {MAX_UPLOAD_NAME} bytes."]})
    path = f"{folder}/{filename}" if folder else filename
    with helper_errors():
        usage = files.files_usage(user=user.username, root=root, path=folder)
    if length > usage.free:
        raise TooLarge(f"{length} bytes do not fit: {usage.free} bytes are free for you there.",
                       code="quota_exceeded")
    try:
        with helper_errors():
            files.files_stat(user=user.username, root=root, path=path)
    except NotFound:
        pass
    else:
        raise Conflict(f"{path} exists already: rename or delete it first.", code="exists")
    return Upload.objects.create(user=user, root=root, path=path, length=length)


def upload_append(*, upload: Upload, offset: int, size: int, chunks: Iterable[bytes]) -> int:
    """Append `size` bytes at exactly `offset` (tus PATCH); the last byte puts the file in place.
    Returns the new offset. A wrong offset is a Conflict naming the real one."""
    if upload.finished_at is not None:
        raise Conflict("This upload is complete.", code="upload_complete")
    if offset + size > upload.length:
        left = max(0, upload.length - offset)
        raise InvalidInput({"Content-Length": [f"The upload is {upload.length} bytes: at most {left} more "
                                               f"from offset {offset}."]})
    user = upload.user.username
    with helper_errors(conflict_code="offset_mismatch"):
        if offset == upload.length:  # an empty file, or a retry of the last PATCH's finish
            new = offset
        else:
            new = files.files_append(user=user, root=upload.root, path=upload.path, offset=offset,
                                     chunks=chunks)
    if new == upload.length:
        upload_finish(upload=upload)
    return new


def upload_finish(*, upload: Upload) -> None:
    if upload_offset(upload=upload) != upload.length and upload.length:
        raise Conflict("The upload is not complete.", code="offset_mismatch")
    with helper_errors(conflict_code="exists"):
        if upload.length == 0:
            files.files_write(user=upload.user.username, root=upload.root, path=upload.path, content="",
                              etag=None)
        else:
            files.files_finish(user=upload.user.username, root=upload.root, path=upload.path,
                               length=upload.length)
    with transaction.atomic():
        Upload.objects.filter(pk=upload.pk).update(finished_at=timezone.now())
        FileAction.objects.create(user=upload.user, action=FileAction.Action.UPLOAD, root=upload.root,
                                  path=upload.path, size=upload.length)
    upload.finished_at = timezone.now()


def upload_id_clean(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound("No such upload.") from None
