"""alice in headless Chromium on the Files page (#37): an upload whose connection drops midway resumes
from the server's offset and lands whole and hers; a second tab's stale edit is refused; a folder
downloads as a zip that holds what it holds. Everything as alice, through the real helper and sudo."""

import hashlib
import io
import os
import pwd
import shutil
import zipfile
from pathlib import Path

import pytest

from tests.browser.nav import go
from tests.conftest import DEMO_PASSWORDS

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
CHUNK = 64 * 1024 * 1024  # upload.js's
SIZE = 2 * CHUNK + 12345  # three chunks; the second one's connection drops


def test_upload_resumes_edit_conflicts_and_zip(page, browser, live_server, tmp_path):
    name = f"browser-{os.urandom(4).hex()}"
    folder = Path(pwd.getpwnam("alice").pw_dir) / name
    content = os.urandom(SIZE)
    source = tmp_path / "big.bin"
    source.write_bytes(content)
    try:
        page.goto(f"{live_server.url}/")
        page.fill("#id_username", "alice")
        page.fill("#id_password", DEMO_PASSWORDS["alice"])
        page.click("button[type=submit]")
        go(page, "files-link")
        page.fill("#new-folder", name)
        page.click("#mkdir-button")
        page.click(f'tr[data-name="{name}"] a')

        patches, heads = [], []

        def drop_the_second_chunk(route, request):
            if request.method == "PATCH":
                patches.append(request.headers.get("upload-offset"))
                if len(patches) == 2:
                    route.abort("connectionreset")  # the network drops at about a third
                    return
            elif request.method == "HEAD" and len(patches) >= 2:
                heads.append(request.url)
            route.continue_()

        page.route("**/api/v1/files/uploads/**", drop_the_second_chunk)
        page.set_input_files("#upload-input", str(source))
        page.click("#upload-button")
        page.wait_for_selector('tr[data-name="big.bin"]', timeout=120000)
        assert heads, "the page did not ask the server where to resume"
        assert patches[1] == patches[2] == str(CHUNK), patches  # resumed, not restarted
        uploaded = folder / "big.bin"
        assert hashlib.sha256(uploaded.read_bytes()).hexdigest() == hashlib.sha256(content).hexdigest()
        assert uploaded.stat().st_uid == pwd.getpwnam("alice").pw_uid
        page.unroute("**/api/v1/files/uploads/**")

        # Two tabs edit the same script: the second save is over a version that is gone.
        script = folder / "run.sh"
        script.write_text("echo one\n")
        shutil.chown(script, "alice")
        edit = f"{live_server.url}/files/edit/?root=home&path={name}/run.sh"
        other = page.context.new_page()
        page.goto(edit)
        other.goto(edit)
        page.fill("#file-content", "echo two\n")
        page.click("#save-button")
        page.wait_for_selector("#text-preview")
        other.fill("#file-content", "echo three\n")
        other.click("#save-button")
        other.wait_for_selector("#edit-conflict")
        assert other.input_value("#file-content") == "echo three\n"  # the user's text is kept
        assert script.read_text() == "echo two\n"
        other.close()

        page.goto(f"{live_server.url}/files/?root=home&path={name}")
        with page.expect_download() as download:
            page.click("#zip-link")
        archive = zipfile.ZipFile(io.BytesIO(Path(download.value.path()).read_bytes()))
        assert {info.filename for info in archive.infolist()} == {"big.bin", "run.sh"}
        assert archive.read("run.sh") == b"echo two\n"
        assert hashlib.sha256(archive.read("big.bin")).hexdigest() == hashlib.sha256(content).hexdigest()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
