"""The user-files helper (the Files page, #37), run as the user the way the portal runs it: its
account, then sudo. Traversal, links, devices, conflicts, uploads and zips through the real helper."""

import io
import json
import os
import pwd
import shutil
import subprocess
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.security.conftest import AS_PORTAL, PORTAL_SUDO, new_uuid, run

USER_FILES = "/usr/local/libexec/gpuportal/user-files"


def user_files_as(user: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    argv = [*AS_PORTAL, *[part.format(username=user) for part in PORTAL_SUDO], USER_FILES, *args]
    return run(argv, input=stdin)


def answer(result: subprocess.CompletedProcess) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.partition(b"\n")[2])


@pytest.fixture
def alice_dir() -> Iterator[tuple[Path, str]]:
    """A fresh folder of alice's home, made as alice: (its path, its name relative to home)."""
    name = f"files-test-{new_uuid()}"
    assert user_files_as("alice", "mkdir", "home", name).returncode == 0
    path = Path(pwd.getpwnam("alice").pw_dir) / name
    yield path, name
    shutil.rmtree(path, ignore_errors=True)


def alice_owns(path: Path) -> None:
    account = pwd.getpwnam("alice")
    os.lchown(path, account.pw_uid, account.pw_gid)


@pytest.mark.parametrize("args", [
    ["list", "home", "../bob", "10"],
    ["list", "home", "/etc", "10"],
    ["list", "home", "a//b", "10"],
    ["list", "home", "./x", "10"],
    ["list", "etc", "", "10"],
    ["list", "home", "", "0"],
    ["read", "home", "../../etc/passwd", "0", "10"],
    ["read", "home", "x", "-1", "10"],
    ["write", "home", "x", "NOTANETAG"],
    ["move", "home", "a", "home", "../bob/a"],
    ["copy", "home", "a", "data", "/tmp/x"],
    ["trash", "home", ""],
    ["cat", "/etc/passwd"],
    [],
])
def test_refuses_bad_arguments(args):
    result = user_files_as("alice", *args)
    assert result.returncode == 2 and result.stdout == b"", result.stderr
    assert result.stderr.startswith(b"user-files: usage:")


def test_refuses_links_on_the_way_and_as_the_target(alice_dir):
    path, name = alice_dir
    for link, target in (("to-bob", "/home/bob"), ("to-etc", "/etc"), ("to-null", "/dev/null"),
                         ("to-self", ".")):
        (path / link).symlink_to(target)
        alice_owns(path / link)
    for args in (["list", "home", f"{name}/to-bob", "10"], ["list", "home", f"{name}/to-etc", "10"],
                 ["read", "home", f"{name}/to-etc/passwd", "0", "10"],
                 ["read", "home", f"{name}/to-null", "0", "1"], ["stat", "home", f"{name}/to-null"],
                 ["copy", "home", f"{name}/to-etc", "home", f"{name}/copy"],
                 ["trash", "home", f"{name}/to-self/x"], ["zip", "home", f"{name}/to-etc"]):
        result = user_files_as("alice", *args)
        assert result.returncode == 3, (args, result.stderr)
        assert result.stderr.startswith(b"user-files: unsafe:") and result.stdout == b""
    entries = answer(user_files_as("alice", "list", "home", name, "10"))["entries"]
    listed = {entry[0]: entry[1] for entry in entries}
    assert listed == {"to-bob": "link", "to-etc": "link", "to-null": "link", "to-self": "link"}


def test_refuses_a_fifo_without_waiting_on_it(alice_dir):
    path, name = alice_dir
    os.mkfifo(path / "pipe")
    alice_owns(path / "pipe")
    started = time.monotonic()
    for args in (["read", "home", f"{name}/pipe", "0", "10"], ["stat", "home", f"{name}/pipe"],
                 ["copy", "home", f"{name}/pipe", "home", f"{name}/copy"],
                 ["list", "home", f"{name}/pipe", "1"]):
        result = user_files_as("alice", *args)
        assert result.returncode == 3, (args, result.stderr)
    assert time.monotonic() - started < 10


def test_an_upload_part_planted_as_a_link_is_never_written_through(alice_dir):
    path, name = alice_dir
    (path / "big.bin.part").symlink_to("/home/alice/.bashrc")
    alice_owns(path / "big.bin.part")
    result = user_files_as("alice", "append", "home", f"{name}/big.bin", "0", stdin=b"x")
    assert result.returncode == 3, result.stderr


def test_bob_reaches_nothing_of_alice(alice_dir):
    path, name = alice_dir
    (path / "secret.txt").write_text("alice's")
    alice_owns(path / "secret.txt")
    # bob's roots are his own: alice's folder name means a folder of bob's home, which is not there.
    for args in (["list", "home", name, "10"], ["read", "home", f"{name}/secret.txt", "0", "10"],
                 ["trash", "home", f"{name}/secret.txt"]):
        result = user_files_as("bob", *args)
        assert result.returncode == 5, result.stderr
    assert (path / "secret.txt").read_text() == "alice's"


def test_write_replaces_only_the_version_that_was_read(alice_dir):
    path, name = alice_dir
    script = f"{name}/run.sh"
    first = answer(user_files_as("alice", "write", "home", script, "-", stdin=b"echo one\n"))
    assert user_files_as("alice", "write", "home", script, "-", stdin=b"x").returncode == 4
    second = answer(user_files_as("alice", "write", "home", script, first["etag"], stdin=b"echo two\n"))
    assert second["etag"] != first["etag"]
    stale = user_files_as("alice", "write", "home", script, first["etag"], stdin=b"echo three\n")
    assert stale.returncode == 4 and stale.stderr.startswith(b"user-files: conflict:")
    read = user_files_as("alice", "read", "home", f"{name}/run.sh", "0", "100")
    assert read.stdout == f"size 9 {second['etag']}\n".encode() + b"echo two\n"
    assert [child.name for child in path.iterdir()] == ["run.sh"]  # no leftovers


def test_append_resumes_at_the_exact_offset_and_finish_puts_it_in_place(alice_dir):
    path, name = alice_dir
    upload = f"{name}/d.bin"
    assert user_files_as("alice", "append", "home", upload, "0", stdin=b"a" * 1000).stdout == b"offset 1000\n"
    behind = user_files_as("alice", "append", "home", upload, "500", stdin=b"b")
    assert behind.returncode == 4 and b"offset 1000" in behind.stderr
    resumed = user_files_as("alice", "append", "home", upload, "1000", stdin=b"b" * 24)
    assert resumed.stdout == b"offset 1024\n"
    assert user_files_as("alice", "finish", "home", f"{name}/d.bin", "1023").returncode == 4
    assert answer(user_files_as("alice", "finish", "home", f"{name}/d.bin", "1024"))["size"] == 1024
    assert (path / "d.bin").read_bytes() == b"a" * 1000 + b"b" * 24
    assert (path / "d.bin").stat().st_uid == pwd.getpwnam("alice").pw_uid


def test_move_copy_trash_and_empty_trash(alice_dir):
    path, name = alice_dir
    assert user_files_as("alice", "mkdir", "home", f"{name}/src").returncode == 0
    assert user_files_as("alice", "write", "home", f"{name}/src/f.txt", "-", stdin=b"data").returncode == 0
    assert user_files_as("alice", "copy", "home", f"{name}/src", "home", f"{name}/copy").returncode == 0
    assert user_files_as("alice", "copy", "home", f"{name}/src", "home", f"{name}/src/inner").returncode == 2
    assert user_files_as("alice", "move", "home", f"{name}/copy", "home", f"{name}/src").returncode == 4
    assert user_files_as("alice", "move", "home", f"{name}/copy", "home", f"{name}/moved").returncode == 0
    assert (path / "moved/f.txt").read_bytes() == b"data" and not (path / "copy").exists()
    trashed = answer(user_files_as("alice", "trash", "home", f"{name}/moved"))
    trash = Path(pwd.getpwnam("alice").pw_dir) / ".local/share/gpuportal/trash"
    assert (trash / trashed["name"] / "f.txt").read_bytes() == b"data"
    assert user_files_as("alice", "empty-trash").returncode == 0
    assert list(trash.iterdir()) == []


def test_zip_streams_the_folder(alice_dir):
    path, name = alice_dir
    files = {"a.txt": b"alpha", "sub/b.bin": os.urandom(300000), "sub/deeper/c": b""}
    for relative, content in files.items():
        (path / relative).parent.mkdir(parents=True, exist_ok=True)
        (path / relative).write_bytes(content)
    (path / "link").symlink_to("/etc/passwd")
    subprocess.run(["chown", "-R", "-h", "alice", str(path)], check=True)
    result = user_files_as("alice", "zip", "home", name)
    assert result.returncode == 0, result.stderr
    header, _, body = result.stdout.partition(b"\n")
    assert header == b"zip"
    with zipfile.ZipFile(io.BytesIO(body)) as archive:
        found = {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
    assert found == files  # the link is left out


def test_usage_of_a_root_and_no_scratch_here():
    usage = answer(user_files_as("alice", "usage", "home"))
    assert usage["total"] >= usage["free"] > 0
    assert user_files_as("alice", "list", "scratch", "", "10").returncode == 5
