"""Reading a user's files, always as the user through the user-files helper (slurm.files)."""

import csv
import io
import json
import posixpath
import uuid
from dataclasses import dataclass
from typing import Literal

from portal.accounts.models import User
from portal.core.errors import InvalidInput, NotFound
from portal.files.models import Upload
from portal.files.paths import helper_errors, project_root
from portal.projects.selectors import user_projects
from slurm import files
from slurm.files import ROOTS, Entry, Root, Stat, Usage
from slurm.runner import Output

LIST_LIMIT = 20000  # entries one listing brings back
PREVIEW_BYTES = 256 * 1024
CSV_ROWS = 50
# Served inline (image previews) only as these types, never SVG (a document that runs script).
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp"}
Sort = Literal["name", "size", "mtime", "type"]
SORTS = ("name", "size", "mtime", "type")


@dataclass(frozen=True)
class Folder:
    entries: list[Entry]
    truncated: bool


def folder_list(*, user: User, root: Root, path: str, sort: Sort = "name", descending: bool = False,
                contains: str = "") -> Folder:
    """The folder's entries, folders first, then by `sort`; only names containing `contains` (any
    case)."""
    with helper_errors():
        listing = files.files_list(user=user.username, root=root, path=path, limit=LIST_LIMIT)
    entries = listing.entries
    if contains:
        needle = contains.casefold()
        entries = [entry for entry in entries if needle in entry.name.casefold()]
    key = {"name": lambda e: e.name.casefold(), "size": lambda e: e.size, "mtime": lambda e: e.mtime_ns,
           "type": lambda e: (e.type, e.name.casefold())}[sort]
    entries.sort(key=key, reverse=descending)
    entries.sort(key=lambda e: e.type != "dir")  # stable: folders first, each part in its order
    return Folder(entries=entries, truncated=listing.truncated)


def folder_json(*, user: User, root: Root, path: str, sort: Sort = "name", descending: bool = False,
                contains: str = "") -> bytes:
    """folder_list's answer as the helper wrote it, a JSON object: for the API, which passes it on."""
    with helper_errors():
        return files.files_folder_json(user=user.username, root=root, path=path, limit=LIST_LIMIT, sort=sort,
                                       descending=descending, contains=contains)


def file_stat(*, user: User, root: Root, path: str) -> Stat:
    with helper_errors():
        return files.files_stat(user=user.username, root=root, path=path)


@dataclass(frozen=True)
class Preview:
    kind: Literal["text", "csv", "notebook", "image", "binary"]
    size: int
    etag: str
    text: str = ""  # text, or a notebook's cells as text
    rows: list[list[str]] | None = None  # a CSV's first rows
    truncated: bool = False  # more than was read


def file_preview(*, user: User, root: Root, path: str) -> Preview:
    """What the page shows of a file without ever serving it as a page: text, a CSV's head, a
    notebook's cells as text; an image only by its type (GET .../content/ serves it)."""
    extension = posixpath.splitext(path)[1].lower()
    with helper_errors():
        if extension in IMAGE_TYPES:
            stat = files.files_stat(user=user.username, root=root, path=path)
            return Preview(kind="image", size=stat.size, etag=stat.etag)
        limit = PREVIEW_BYTES * (8 if extension == ".ipynb" else 1)
        size, etag, data = files.files_read(user=user.username, root=root, path=path, offset=0, limit=limit)
    truncated = size > len(data)
    if b"\0" in data[:8192]:
        return Preview(kind="binary", size=size, etag=etag, truncated=truncated)
    text = data.decode("utf-8", errors="replace")
    if extension in (".csv", ".tsv"):
        dialect = "excel-tab" if extension == ".tsv" else "excel"
        rows = [row for _, row in zip(range(CSV_ROWS), csv.reader(io.StringIO(text), dialect), strict=False)]
        return Preview(kind="csv", size=size, etag=etag, rows=rows, truncated=True)
    if extension == ".ipynb" and not truncated:
        notebook = notebook_text(text)
        if notebook is not None:
            return Preview(kind="notebook", size=size, etag=etag, text=notebook)
    return Preview(kind="text", size=size, etag=etag, text=text, truncated=truncated)


def notebook_text(text: str) -> str | None:
    """A notebook's cells as plain text (read-only: markdown and code as written, outputs' text)."""
    try:
        cells = json.loads(text).get("cells", [])
        parts = []
        for number, cell in enumerate(cells, 1):
            source = "".join(cell.get("source", []))
            parts.append(f"# [{number}] {cell.get('cell_type', 'cell')}\n{source}")
            for output in cell.get("outputs", []):
                shown = output.get("text") or output.get("data", {}).get("text/plain")
                if shown:
                    parts.append("# out:\n" + "".join(shown))
        return "\n\n".join(parts)
    except (ValueError, AttributeError, TypeError):
        return None


def file_text(*, user: User, root: Root, path: str) -> tuple[int, str, str]:
    """(size, ETag, the whole text) of a file small enough to edit in a form."""
    with helper_errors():
        size, etag, data = files.files_read(user=user.username, root=root, path=path, offset=0,
                                            limit=PREVIEW_BYTES)
    if size > len(data) or b"\0" in data:
        raise InvalidInput({"path": [f"Only text files up to {PREVIEW_BYTES // 1024} KiB are edited here."]})
    try:
        return size, etag, data.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidInput({"path": ["Not UTF-8 text: download it to edit it."]}) from None


def file_open(*, user: User, root: Root, path: str) -> tuple[int, str, Output]:
    """(size, ETag, the bytes as they are read): a download, streamed."""
    with helper_errors():
        return files.files_open(user=user.username, root=root, path=path)


def folder_zip(*, user: User, root: Root, path: str) -> Output:
    with helper_errors():
        return files.files_zip(user=user.username, root=root, path=path)


def user_roots(*, user: User) -> list[Root]:
    """The roots the Files page offers the user: theirs, and the shared folder of each project they
    are a member of (whether it exists, and who may enter it, is the file system's to say)."""
    projects = [project_root(project.name) for project in user_projects(user=user)]
    return [*ROOTS, *(root for root in projects if root)]


def root_usage(*, user: User, root: Root, path: str = "") -> Usage:
    """Space of the file system holding that folder of the root (the root itself by default)."""
    with helper_errors():
        return files.files_usage(user=user.username, root=root, path=path)


def upload_get(*, user: User, upload_id: uuid.UUID) -> Upload:
    upload = Upload.objects.filter(pk=upload_id, user=user).first()
    if upload is None:
        raise NotFound("No such upload.")
    return upload


def upload_offset(*, upload: Upload) -> int:
    """How many bytes of it are in place: its .part's size (the length once finished)."""
    if upload.finished_at is not None:
        return upload.length
    try:
        with helper_errors():
            part = files.files_stat(user=upload.user.username, root=upload.root, path=upload.path + ".part")
            return part.size
    except NotFound:
        return 0


def sort_clean(value: str) -> Sort:
    if value not in SORTS:
        raise InvalidInput({"sort": [f"Must be one of {', '.join(SORTS)}."]})
    return value  # type: ignore[return-value]
