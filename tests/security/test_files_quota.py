"""Quotas on the Files page (#37), through the real helper, sudo and a real small file system: a
tmpfs of 8 MiB mounted in alice's home stands for a quota'd project folder. Its usage is what the
page and the API show; an upload that cannot fit is refused up front (413 naming the sizes), and
one the file system fills meanwhile ends in a 413, never a 5xx."""

import os
import pwd
import subprocess
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.security.test_files_api import TUS, alice, alice_browser, as_the_portal_account, folder, metadata

__all__ = ["alice", "alice_browser", "as_the_portal_account", "folder"]  # fixtures
MIB = 1024 * 1024
LIMIT = 8 * MIB


@pytest.fixture
def small(folder) -> Iterator[tuple[Path, str]]:
    """An 8 MiB tmpfs of alice's, mounted at <folder>/small: (its path, its path in her home)."""
    path, name = folder
    account = pwd.getpwnam("alice")
    (path / "small").mkdir()
    subprocess.run(["sudo", "-n", "mount", "-t", "tmpfs", "-o",
                    f"size={LIMIT},mode=0700,uid={account.pw_uid},gid={account.pw_gid}", "tmpfs",
                    str(path / "small")], check=True, timeout=30)
    try:
        yield path / "small", f"{name}/small"
    finally:
        subprocess.run(["sudo", "-n", "umount", str(path / "small")], check=True, timeout=30)


def start(client, folder: str, filename: str, length: int):
    return client.post("/api/v1/files/uploads/", HTTP_UPLOAD_LENGTH=str(length), **TUS,
                       HTTP_UPLOAD_METADATA=metadata(root="home", folder=folder, filename=filename))


def patch(client, created, content: bytes, offset: int = 0):
    return client.generic("PATCH", urlsplit(created["Location"]).path, content,
                          content_type="application/offset+octet-stream", HTTP_UPLOAD_OFFSET=str(offset),
                          **TUS)


def test_usage_is_the_folders_file_system_and_an_upload_over_it_is_refused_up_front(alice, alice_browser,
                                                                                     small):
    path, where = small
    usage = alice.get("/api/v1/files/usage/", {"root": "home", "path": where})
    assert usage.status_code == 200, usage.content
    assert usage.json()["total"] == LIMIT and usage.json()["free"] == LIMIT
    home = alice.get("/api/v1/files/usage/", {"root": "home"}).json()
    assert home["total"] > LIMIT  # the home's own file system, not the mount's
    page = alice_browser.get("/files/", {"root": "home", "path": where}).content.decode()
    assert "8.0\xa0MB free of 8.0\xa0MB" in page

    too_big = start(alice, where, "big.bin", LIMIT + 1)
    assert too_big.status_code == 413, too_big.content
    assert too_big.json()["code"] == "quota_exceeded"
    assert f"{LIMIT + 1} bytes" in too_big.json()["detail"] and f"{LIMIT} bytes" in too_big.json()["detail"]
    assert list(path.iterdir()) == []  # refused before a byte was written

    content = os.urandom(3 * MIB)
    created = start(alice, where, "fits.bin", len(content))
    assert created.status_code == 201, created.content
    assert patch(alice, created, content).status_code == 204
    assert (path / "fits.bin").read_bytes() == content
    assert (path / "fits.bin").stat().st_uid == pwd.getpwnam("alice").pw_uid
    assert alice.get("/api/v1/files/usage/", {"root": "home", "path": where}).json()["free"] == 5 * MIB


def test_an_upload_the_file_system_fills_meanwhile_ends_in_413_not_5xx(alice, small):
    path, where = small
    created = start(alice, where, "late.bin", 6 * MIB)
    assert created.status_code == 201, created.content  # 6 of 8 MiB fit when it starts
    filler = path / "filler.bin"
    filler.write_bytes(b"\0" * 4 * MIB)  # a job writes meanwhile
    full = patch(alice, created, os.urandom(6 * MIB))
    assert full.status_code == 413, full.content
    assert full.json()["code"] == "quota_exceeded"
    assert not (path / "late.bin").exists()
