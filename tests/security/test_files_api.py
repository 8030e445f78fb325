"""/api/v1/files/ through the real user-files helper, sudo and PostgreSQL (issue #37): as the portal's
account runs it, so every answer is what alice (or bob) may do, and nothing else."""

import hashlib
import io
import os
import pwd
import shutil
import socket
import zipfile
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from rest_framework.test import APIClient

from portal.accounts.services import api_token_create
from portal.audit.models import FileEvent
from tests.factories import UserFactory
from tests.security.conftest import AS_PORTAL, PORTAL_SUDO, new_uuid

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


@pytest.fixture(autouse=True)
def as_the_portal_account(settings):
    """The helper runs exactly as the portal's processes run it: their account, then sudo."""
    settings.SLURM_EXEC_PREFIX = [*AS_PORTAL, *PORTAL_SUDO]


def client_of(username: str) -> APIClient:
    _, key = api_token_create(user=UserFactory(username=username), name="test")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


@pytest.fixture
def alice(db) -> APIClient:
    return client_of("alice")


@pytest.fixture
def bob(db) -> APIClient:
    return client_of("bob")


@pytest.fixture
def folder(alice) -> Iterator[tuple[Path, str]]:
    """A fresh folder of alice's home, made through the API: (its path, its name)."""
    name = f"files-api-{new_uuid()}"
    made = alice.post("/api/v1/files/mkdir/", {"root": "home", "path": name}, format="json")
    assert made.status_code == 201, made.content
    path = Path(pwd.getpwnam("alice").pw_dir) / name
    yield path, name
    shutil.rmtree(path, ignore_errors=True)


def alice_owns(*paths: Path) -> None:
    account = pwd.getpwnam("alice")
    for path in paths:
        os.lchown(path, account.pw_uid, account.pw_gid)


def metadata(**values: str) -> str:
    return ",".join(f"{key} {b64encode(value.encode()).decode()}" for key, value in values.items())


def upload(client: APIClient, folder_name: str, filename: str, content: bytes) -> str:
    created = client.post("/api/v1/files/uploads/", HTTP_UPLOAD_LENGTH=str(len(content)), **TUS,
                          HTTP_UPLOAD_METADATA=metadata(root="home", folder=folder_name, filename=filename))
    assert created.status_code == 201, created.content
    location = urlsplit(created["Location"]).path
    patched = client.generic("PATCH", location, content, content_type="application/offset+octet-stream",
                             HTTP_UPLOAD_OFFSET="0", **TUS)
    assert patched.status_code == 204, patched.content
    return location


def test_lists_sorted_and_filtered(alice, folder):
    path, name = folder
    for file, size in (("b.txt", 3), ("a.csv", 30), ("c.log", 10)):
        (path / file).write_bytes(b"x" * size)
    (path / "sub").mkdir()
    alice_owns(*path.iterdir())
    answer = alice.get("/api/v1/files/", {"root": "home", "path": name, "sort": "size", "order": "desc"})
    assert answer.status_code == 200
    assert [entry["name"] for entry in answer.json()["entries"]] == ["sub", "a.csv", "c.log", "b.txt"]
    filtered = alice.get("/api/v1/files/", {"root": "home", "path": name, "filter": "LOG"}).json()
    assert [entry["name"] for entry in filtered["entries"]] == ["c.log"]
    unsorted = alice.get("/api/v1/files/", {"root": "home", "path": name, "sort": "colour"})
    assert unsorted.status_code == 400 and unsorted.json()["fields"]["sort"]


@pytest.mark.parametrize(("query", "field"), [
    ({"root": "home", "path": "../bob"}, "path"),
    ({"root": "home", "path": "a/../../etc"}, "path"),
    ({"root": "home", "path": "a//b"}, "path"),
    ({"root": "etc", "path": ""}, "root"),
    ({"root": "home", "path": "a\nb"}, "path"),
])
def test_traversal_is_a_400_naming_the_field(alice, query, field):
    answer = alice.get("/api/v1/files/", query)
    assert answer.status_code == 400 and field in answer.json()["fields"], answer.content


def test_links_devices_and_fifos_are_refused_never_followed(alice, folder):
    path, name = folder
    (path / "etc").symlink_to("/etc")
    (path / "null").symlink_to("/dev/null")
    os.mkfifo(path / "pipe")
    alice_owns(path / "etc", path / "null", path / "pipe")
    for url, query in (("/api/v1/files/", {"path": f"{name}/etc"}),
                       ("/api/v1/files/download/", {"path": f"{name}/etc/passwd"}),
                       ("/api/v1/files/download/", {"path": f"{name}/null"}),
                       ("/api/v1/files/download/", {"path": f"{name}/pipe"}),
                       ("/api/v1/files/preview/", {"path": f"{name}/pipe"}),
                       ("/api/v1/files/zip/", {"path": f"{name}/etc"})):
        answer = alice.get(url, {"root": "home", **query})
        assert answer.status_code == 403, (url, query, answer.content)
        assert answer.json()["code"] == "unsafe_path"
    assert alice.get("/api/v1/files/", {"root": "scratch"}).status_code == 404  # none on this bed


def test_an_upload_over_the_free_space_is_refused_up_front(alice, folder):
    _, name = folder
    answer = alice.post("/api/v1/files/uploads/", HTTP_UPLOAD_LENGTH=str(10**18),
                        HTTP_UPLOAD_METADATA=metadata(root="home", folder=name, filename="huge.bin"), **TUS)
    assert answer.status_code == 413 and answer.json()["code"] == "quota_exceeded"
    usage = alice.get("/api/v1/files/usage/", {"root": "home"}).json()
    assert usage["total"] >= usage["free"] > 0


def test_bob_reaches_nothing_of_alice(alice, bob, folder):
    path, name = folder
    location = upload(alice, name, "secret.txt", b"alice's secret")
    half = alice.post("/api/v1/files/uploads/", HTTP_UPLOAD_LENGTH="10",
                      HTTP_UPLOAD_METADATA=metadata(root="home", folder=name, filename="half.bin"), **TUS)
    half_location = urlsplit(half["Location"]).path
    secret = f"{name}/secret.txt"
    for method, url, data in (
            ("get", "/api/v1/files/", {"root": "home", "path": name}),
            ("get", "/api/v1/files/download/", {"root": "home", "path": secret}),
            ("get", "/api/v1/files/preview/", {"root": "home", "path": secret}),
            ("get", "/api/v1/files/stat/", {"root": "home", "path": secret}),
            ("get", "/api/v1/files/zip/", {"root": "home", "path": name}),
            ("post", "/api/v1/files/delete/", {"root": "home", "path": secret}),
            ("post", "/api/v1/files/move/", {"root": "home", "path": secret, "to_path": "mine.txt"}),
            ("post", "/api/v1/files/copy/", {"root": "home", "path": secret, "to_path": "mine.txt"})):
        answer = getattr(bob, method)(url, data, **({"format": "json"} if method == "post" else {}))
        assert answer.status_code == 404, (url, answer.content)  # bob's own home has no such thing
    for url in ("/api/v1/files/", "/api/v1/files/download/"):
        assert bob.get(url, {"root": "home", "path": f"../alice/{secret}"}).status_code == 400
    assert bob.put("/api/v1/files/edit/", {"root": "home", "path": secret, "content": "bob was here"},
                   format="json", HTTP_IF_NONE_MATCH="*").status_code == 404
    for upload_url in (location, half_location):
        assert bob.head(upload_url, **TUS).status_code == 404
        assert bob.generic("PATCH", upload_url, b"x" * 10, content_type="application/offset+octet-stream",
                           HTTP_UPLOAD_OFFSET="0", **TUS).status_code == 404
    assert (path / "secret.txt").read_bytes() == b"alice's secret"
    assert not (path / "half.bin.part").exists()


def test_an_uploaded_html_file_downloads_as_a_sandboxed_attachment(alice, folder):
    _, name = folder
    upload(alice, name, "page.html", b"<script>alert(document.cookie)</script>")
    answer = alice.get("/api/v1/files/download/", {"root": "home", "path": f"{name}/page.html"})
    assert answer.status_code == 200
    assert answer["Content-Disposition"].startswith("attachment;")
    assert answer["Content-Security-Policy"].startswith("sandbox")
    assert answer["X-Content-Type-Options"] == "nosniff"
    assert answer["Content-Type"] == "application/octet-stream"
    assert b"".join(answer.streaming_content) == b"<script>alert(document.cookie)</script>"
    inline = alice.get("/api/v1/files/content/", {"root": "home", "path": f"{name}/page.html"})
    assert inline.status_code == 400  # only raster images are ever shown inline
    preview = alice.get("/api/v1/files/preview/", {"root": "home", "path": f"{name}/page.html"}).json()
    assert preview["kind"] == "text" and preview["text"].startswith("<script>")  # JSON, never a page


def test_an_upload_cut_midway_resumes_from_heads_offset(alice, folder, live_server):
    """The connection drops halfway through a PATCH (a real socket, closed early): HEAD says how far
    it got, the rest follows from there, and the file is whole, alice's, in place."""
    path, name = folder
    content = os.urandom(3 * 1024 * 1024 + 17)
    _, key = api_token_create(user=UserFactory(username="alice"), name="live")
    session = requests.Session()
    session.headers.update({"Authorization": f"Token {key}", "Tus-Resumable": "1.0.0"})
    created = session.post(f"{live_server.url}/api/v1/files/uploads/", headers={
        "Upload-Length": str(len(content)),
        "Upload-Metadata": metadata(root="home", folder=name, filename="d.bin")})
    assert created.status_code == 201, created.text
    location = urlsplit(created.headers["Location"]).path
    host, port = urlsplit(live_server.url).hostname, urlsplit(live_server.url).port
    cut = len(content) // 2
    with socket.create_connection((host, port)) as connection:
        connection.sendall((f"PATCH {location} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Token {key}\r\n"
                            f"Tus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\nContent-Length: {len(content)}\r\n"
                            "Content-Type: application/offset+octet-stream\r\n\r\n").encode() + content[:cut])
        connection.shutdown(socket.SHUT_WR)  # the network drops: no more bytes will come
        connection.recv(4096)
    head = session.head(f"{live_server.url}{location}")
    offset = int(head.headers["Upload-Offset"])
    assert 0 < offset <= cut and head.headers["Upload-Length"] == str(len(content))
    ahead = session.patch(f"{live_server.url}{location}", data=content[offset + 1:], headers={
        "Upload-Offset": str(offset + 1), "Content-Type": "application/offset+octet-stream"})
    assert ahead.status_code == 409
    resumed = session.patch(f"{live_server.url}{location}", data=content[offset:], headers={
        "Upload-Offset": str(offset), "Content-Type": "application/offset+octet-stream"})
    assert resumed.status_code == 204 and resumed.headers["Upload-Offset"] == str(len(content))
    assert hashlib.sha256((path / "d.bin").read_bytes()).hexdigest() == hashlib.sha256(content).hexdigest()
    assert (path / "d.bin").stat().st_uid == pwd.getpwnam("alice").pw_uid
    assert not (path / "d.bin.part").exists()
    assert FileEvent.objects.filter(action="upload", path=f"{name}/d.bin", size=len(content)).exists()


def test_an_edit_over_a_stale_etag_is_a_412(alice, folder):
    _, name = folder
    script = {"root": "home", "path": f"{name}/run.sh"}
    created = alice.put("/api/v1/files/edit/", {**script, "content": "echo one\n"}, format="json",
                        HTTP_IF_NONE_MATCH="*")
    assert created.status_code == 200, created.content
    first = created["ETag"]
    assert alice.get("/api/v1/files/stat/", script)["ETag"] == first
    saved = alice.put("/api/v1/files/edit/", {**script, "content": "echo two\n"}, format="json",
                      HTTP_IF_MATCH=first)
    assert saved.status_code == 200 and saved["ETag"] != first
    stale = alice.put("/api/v1/files/edit/", {**script, "content": "echo three\n"}, format="json",
                      HTTP_IF_MATCH=first)
    assert stale.status_code == 412 and stale.json()["code"] == "precondition_failed"
    unconditional = alice.put("/api/v1/files/edit/", {**script, "content": "x"}, format="json")
    assert unconditional.status_code == 400 and unconditional.json()["fields"]["If-Match"]
    assert alice.get("/api/v1/files/preview/", script).json()["text"] == "echo two\n"


def test_a_folder_zip_holds_its_files(alice, folder):
    path, name = folder
    files = {"a.txt": b"alpha", "sub/b.bin": os.urandom(200000)}
    (path / "sub").mkdir()
    for relative, content in files.items():
        (path / relative).write_bytes(content)
    alice_owns(path / "sub", *(path / relative for relative in files))
    answer = alice.get("/api/v1/files/zip/", {"root": "home", "path": name})
    assert answer.status_code == 200 and answer["Content-Disposition"] == f'attachment; filename="{name}.zip"'
    with zipfile.ZipFile(io.BytesIO(b"".join(answer.streaming_content))) as archive:
        found = {info.filename: archive.read(info) for info in archive.infolist() if not info.is_dir()}
    assert found == files


def test_move_copy_delete_and_trash_are_audited(alice, folder):
    path, name = folder
    upload(alice, name, "f.txt", b"data")
    move = {"root": "home", "path": f"{name}/f.txt", "to_path": f"{name}/g.txt"}
    assert alice.post("/api/v1/files/move/", move, format="json").status_code == 204
    copy = {"root": "home", "path": f"{name}/g.txt", "to_path": f"{name}/h.txt"}
    assert alice.post("/api/v1/files/copy/", copy, format="json").status_code == 204
    assert alice.post("/api/v1/files/copy/", copy, format="json").status_code == 409
    assert alice.post("/api/v1/files/delete/", {"root": "home", "path": f"{name}/g.txt"},
                      format="json").status_code == 204
    assert alice.post("/api/v1/files/delete/", {"root": "home", "path": ""}, format="json").status_code == 400
    assert sorted(child.name for child in path.iterdir()) == ["h.txt"]
    assert alice.post("/api/v1/files/trash/empty/").status_code == 204
    events = FileEvent.objects.filter(path__startswith=name).order_by("pgh_id")
    actions = list(events.values_list("action", flat=True))
    assert actions == ["upload", "move", "delete"]
    assert FileEvent.objects.filter(action="empty_trash").exists()


# --- the pages (/files/) ---

@pytest.fixture
def alice_browser(db) -> APIClient:
    client = APIClient()
    client.force_login(UserFactory(username="alice"))
    return client


def test_the_page_lists_renames_deletes_and_escapes(alice_browser, folder):
    path, name = folder
    (path / "<em>x<em>.html").write_text("<script>alert(1)</script>")
    alice_owns(path / "<em>x<em>.html")
    page = alice_browser.get("/files/", {"root": "home", "path": name})
    assert page.status_code == 200
    html = page.content.decode()
    assert "&lt;em&gt;x&lt;em&gt;.html" in html and "<em>x<em>" not in html
    assert 'id="files-link"' in html and 'aria-current="page"' in html
    view = alice_browser.get("/files/view/", {"root": "home", "path": f"{name}/<em>x<em>.html"})
    view = view.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in view and "<script>alert(1)" not in view
    moved = alice_browser.post("/files/action/", {"root": "home", "path": name, "action": "rename",
                                                  "old": "<em>x<em>.html", "name": "page.html"})
    assert moved.status_code == 302 and (path / "page.html").exists()
    assert alice_browser.post("/files/action/", {"root": "home", "path": name, "action": "delete",
                                                 "name": "page.html"}).status_code == 302
    assert list(path.iterdir()) == []
    bad = alice_browser.post("/files/action/", {"root": "home", "path": name, "action": "mkdir",
                                                "name": "a/b"}, follow=True)
    assert "name: One name" in bad.content.decode()
    assert alice_browser.get("/files/", {"root": "home", "path": "../bob"}).status_code == 400


def test_the_editor_refuses_a_stale_save(alice_browser, folder):
    path, name = folder
    (path / "run.sh").write_text("echo one\n")
    alice_owns(path / "run.sh")
    script = {"root": "home", "path": f"{name}/run.sh"}
    form = alice_browser.get("/files/edit/", script)
    etag = form.context["etag"]
    assert form.context["content"] == "echo one\n"
    first = alice_browser.post("/files/edit/", {**script, "etag": etag, "content": "echo two\r\n"})
    assert first.status_code == 302 and (path / "run.sh").read_text() == "echo two\n"
    second = alice_browser.post("/files/edit/", {**script, "etag": etag, "content": "echo three\n"})
    assert second.status_code == 412 and 'id="edit-conflict"' in second.content.decode()
    assert "echo three" in second.content.decode()  # the user's text is kept
    assert (path / "run.sh").read_text() == "echo two\n"


def test_the_editor_keeps_a_leading_blank_line(alice_browser, folder):
    path, name = folder
    (path / "notes.txt").write_text("\nsecond line\n")
    alice_owns(path / "notes.txt")
    form = alice_browser.get("/files/edit/", {"root": "home", "path": f"{name}/notes.txt"}).content.decode()
    assert '">\n\nsecond line\n</textarea>' in form  # HTML drops one newline after <textarea>: the one added
