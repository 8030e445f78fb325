"""A project's shared folder as a Files root (#37), through the real helper and sudo: project:<name> is
<projects>/<name> from the root-owned user-files.conf (install.sh writes projects=/srv/projects), owned
by the project's Unix group, mode 2770. A member (bob) lists, uploads and reads there, and what he
makes is the group's; alice, not a member, is not offered the root, and the kernel refuses her
every route into it; a link planted as a project never leads out."""

import grp
import os
import pwd
import shutil
import stat
import subprocess
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from rest_framework.test import APIClient

from portal.accounts.models import User
from portal.projects.models import Project
from tests.security.test_files_api import TUS, alice, alice_browser, as_the_portal_account, bob, client_of
from tests.security.test_user_files import user_files_as

__all__ = ["alice", "alice_browser", "as_the_portal_account", "bob"]  # fixtures
PROJECTS = Path("/srv/projects")


@pytest.fixture
def project(bob) -> Iterator[tuple[str, Path]]:
    """A project whose Unix group holds bob only, and its folder: (its root, the folder)."""
    name = f"files-{os.urandom(4).hex()}"
    subprocess.run(["groupadd", "--users", "bob", name], check=True, timeout=30)
    folder = PROJECTS / name
    try:
        folder.mkdir(mode=0o770)
        os.chown(folder, 0, grp.getgrnam(name).gr_gid)
        folder.chmod(0o2770)  # setgid: what members make stays the group's
        Project.objects.create(name=name, ldap_group=name, slurm_account=name.replace("-", "_"))
        User.objects.filter(username="bob").update(ldap_groups=[name])  # as his login found him
        yield f"project:{name}", folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        subprocess.run(["groupdel", name], check=True, timeout=30)


def test_a_member_works_in_the_projects_folder_and_the_group_keeps_it(bob, project):
    root, folder = project
    name = root.removeprefix("project:")
    listed = bob.get("/api/v1/files/", {"root": root})
    assert listed.status_code == 200, listed.content
    created = bob.post("/api/v1/files/mkdir/", {"root": root, "path": "shared"}, format="json")
    assert created.status_code == 201, created.content
    upload_to(bob, root, "shared", "notes.txt", b"for the team\n")
    made = folder / "shared" / "notes.txt"
    assert made.read_bytes() == b"for the team\n"
    assert made.stat().st_uid == pwd.getpwnam("bob").pw_uid
    assert made.stat().st_gid == grp.getgrnam(name).gr_gid  # the group's, through the setgid folder
    preview = bob.get("/api/v1/files/preview/", {"root": root, "path": "shared/notes.txt"})
    assert preview.json()["text"] == "for the team\n"
    usage = bob.get("/api/v1/files/usage/", {"root": root})
    assert usage.status_code == 200 and usage.json()["total"] > 0
    # The page offers it to him, and shows it.
    browser = APIClient()
    browser.force_login(User.objects.get(username="bob"))
    page = browser.get("/files/", {"root": root, "path": "shared"})
    assert page.status_code == 200
    assert f'id="root-{root}" aria-current="page"' in page.content.decode()
    assert 'data-name="notes.txt"' in page.content.decode()


def upload_to(client, root: str, folder: str, filename: str, content: bytes) -> None:
    meta = ",".join(f"{key} {b64encode(value.encode()).decode()}"
                    for key, value in {"root": root, "folder": folder, "filename": filename}.items())
    created = client.post("/api/v1/files/uploads/", HTTP_UPLOAD_LENGTH=str(len(content)), **TUS,
                          HTTP_UPLOAD_METADATA=meta)
    assert created.status_code == 201, created.content
    patched = client.generic("PATCH", urlsplit(created["Location"]).path, content,
                             content_type="application/offset+octet-stream", HTTP_UPLOAD_OFFSET="0", **TUS)
    assert patched.status_code == 204, patched.content


def test_a_non_member_is_not_offered_it_and_the_kernel_refuses_every_route(alice, alice_browser, bob,
                                                                              project):
    root, folder = project
    (folder / "secret.txt").write_text("members only\n")
    assert root not in alice_browser.get("/files/").content.decode()
    bob_page = bob.get("/api/v1/files/", {"root": root})
    assert bob_page.status_code == 200
    location = {"root": root, "path": "secret.txt"}
    for answer in (alice.get("/api/v1/files/", {"root": root}),
                   alice.get("/api/v1/files/preview/", location),
                   alice.get("/api/v1/files/download/", location),
                   alice.get("/api/v1/files/zip/", {"root": root}),
                   alice.get("/api/v1/files/usage/", {"root": root}),
                   alice.post("/api/v1/files/mkdir/", {"root": root, "path": "x"}, format="json"),
                   alice.post("/api/v1/files/delete/", location, format="json"),
                   alice.put("/api/v1/files/edit/", {**location, "content": "mine"}, format="json",
                             HTTP_IF_NONE_MATCH="*")):
        assert answer.status_code == 403, (answer.status_code, answer.content)
        assert answer.json()["code"] == "permission_denied"
    assert (folder / "secret.txt").read_text() == "members only\n"
    assert sorted(os.listdir(folder)) == ["secret.txt"]  # noqa: PTH208
    # The helper itself, as alice: the file system's refusal (6), not a usage error.
    direct = user_files_as("alice", "list", root, "", "10")
    assert direct.returncode == 6, direct.stderr


def test_project_roots_never_leave_the_projects_folder(alice, bob):
    link = PROJECTS / f"files-link-{os.urandom(3).hex()}"
    link.symlink_to("/home/alice")
    try:
        refused = user_files_as("alice", "list", f"project:{link.name}", "", "10")
        assert refused.returncode == 3, refused.stderr  # a link: unsafe, never followed
        assert alice.get("/api/v1/files/", {"root": f"project:{link.name}"}).status_code == 403
    finally:
        link.unlink()
    for bad in ("project:../home", "project:", "project:a/b", "project:.", "project:UPPER", "projects"):
        assert alice.get("/api/v1/files/", {"root": bad}).status_code == 400, bad
        assert user_files_as("alice", "list", bad, "", "10").returncode == 2, bad
    assert alice.get("/api/v1/files/", {"root": "project:no-such"}).status_code == 404


@pytest.fixture
def mounted_project(db) -> Iterator[tuple[str, Path]]:
    """A project of bob and ada whose folder is a file system of its own (a tmpfs, as a project's
    mount on a real cluster): deletes cannot move into a home's trash there."""
    name = f"files-{os.urandom(4).hex()}"
    subprocess.run(["groupadd", "--users", "bob,ada", name], check=True, timeout=30)
    folder = PROJECTS / name
    folder.mkdir()
    try:
        subprocess.run(["sudo", "-n", "mount", "-t", "tmpfs", "-o",
                        f"size=8m,mode=2770,uid=0,gid={grp.getgrnam(name).gr_gid}", "tmpfs", str(folder)],
                       check=True, timeout=30)
        try:
            yield f"project:{name}", folder
        finally:
            subprocess.run(["sudo", "-n", "umount", str(folder)], check=True, timeout=30)
    finally:
        folder.rmdir()
        subprocess.run(["groupdel", name], check=True, timeout=30)


def test_members_trash_on_a_projects_own_file_system_each_in_their_own_folder(bob, mounted_project):
    root, folder = mounted_project
    ada = client_of("ada")
    for client, name in ((bob, "bobs.txt"), (ada, "adas.txt")):
        made = client.put("/api/v1/files/edit/", {"root": root, "path": name, "content": name}, format="json",
                          HTTP_IF_NONE_MATCH="*")
        assert made.status_code == 200, made.content
    # bob plants a folder under ada's name in the shared trash first: ada's delete is refused, not
    # handed to him.
    trash = folder / ".gpuportal-trash"
    delete = "/api/v1/files/delete/"
    assert bob.post(delete, {"root": root, "path": "bobs.txt"}, format="json").status_code == 204
    assert stat.S_IMODE(trash.stat().st_mode) == 0o1777
    (trash / "ada").mkdir()
    os.chown(trash / "ada", pwd.getpwnam("bob").pw_uid, -1)
    refused = ada.post(delete, {"root": root, "path": "adas.txt"}, format="json")
    assert refused.status_code == 403 and (folder / "adas.txt").exists()
    (trash / "ada").rmdir()
    assert ada.post(delete, {"root": root, "path": "adas.txt"}, format="json").status_code == 204
    for user, trashed in (("bob", "bobs.txt"), ("ada", "adas.txt")):
        mine = trash / user
        assert mine.stat().st_uid == pwd.getpwnam(user).pw_uid and stat.S_IMODE(mine.stat().st_mode) == 0o700
        assert [entry.name.endswith(f"-{trashed}") for entry in mine.iterdir()] == [True]
    # Emptying is each one's own.
    assert bob.post("/api/v1/files/trash/empty/").status_code == 204
    assert list((trash / "bob").iterdir()) == [] and len(list((trash / "ada").iterdir())) == 1
