"""alice in headless Chromium on the Files page (#37's must-show): a 2 GiB upload whose TCP connection
is cut in the middle of a chunk at about half way resumes from the byte the server really has, and
lands whole (SHA-256) and hers; an uploaded HTML file opened from Files runs no script on the
portal's origin. Through the real helper and sudo; Chromium talks to the portal through a byte relay
of the test's own, which is what cuts the connection (the server sees a body end early)."""

import contextlib
import hashlib
import os
import pwd
import shutil
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.browser.nav import go
from tests.conftest import DEMO_PASSWORDS

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.django_db(transaction=True)]
MIB = 1024 * 1024
SIZE = 2048 * MIB + 12345
CHUNK = 64 * MIB  # upload.js's


# About 25 s on the bed (the relay, Chromium, the live server and the helper share 2 cores): not a
# slow-stage test.
def write_big_file(path: Path, size: int) -> str:
    """`size` bytes, fast: one random MiB repeated, each copy stamped with its number (so no two MiB
    are alike and nothing compresses it away); returns its SHA-256."""
    block = bytearray(os.urandom(MIB))
    digest = hashlib.sha256()
    with path.open("wb") as out:
        for number in range(size // MIB + 1):
            block[:8] = number.to_bytes(8, "little")
            data = bytes(block[:min(MIB, size - number * MIB)])
            out.write(data)
            digest.update(data)
    return digest.hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as source:
        while data := source.read(8 * MIB):
            digest.update(data)
    return digest.hexdigest()


class CuttingRelay:
    """127.0.0.1:<port> relayed byte for byte to the live server; the one connection whose upload
    crosses `cut_at` bytes (counted over all connections, browser to server) is closed both ways
    right there, once."""

    def __init__(self, target: tuple[str, int], cut_at: int) -> None:
        self.target, self.cut_at = target, cut_at
        self.sent, self.cuts = 0, 0
        self.lock = threading.Lock()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.target)
                threading.Thread(target=self.pipe, args=(client, server, True), daemon=True).start()
                threading.Thread(target=self.pipe, args=(server, client, False), daemon=True).start()

    def pipe(self, source: socket.socket, sink: socket.socket, upstream: bool) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(MIB):
                if upstream:
                    with self.lock:
                        self.sent += len(data)
                        cut = self.cuts == 0 and self.sent >= self.cut_at
                        self.cuts += cut
                    if cut:
                        break
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def relay(live_server) -> Iterator[CuttingRelay]:
    host, port = live_server.url.removeprefix("http://").split(":")
    # Half way, and in the middle of a chunk (not on its boundary): the server keeps a part chunk.
    relay = CuttingRelay((host, int(port)), cut_at=SIZE // 2 + 10 * MIB)
    yield relay
    relay.close()


def log_in(page, base: str) -> None:
    page.goto(f"{base}/")
    page.fill("#id_username", "alice")
    page.fill("#id_password", DEMO_PASSWORDS["alice"])
    page.click("button[type=submit]")
    go(page, "files-link")


def new_folder(page, name: str) -> None:
    page.fill("#new-folder", name)
    page.click("#mkdir-button")
    page.click(f'tr[data-name="{name}"] a')


def test_a_2_gib_upload_cut_at_half_way_resumes_and_lands_whole_and_hers(page, relay, tmp_path):
    name = f"big-{os.urandom(4).hex()}"
    folder = Path(pwd.getpwnam("alice").pw_dir) / name
    source = tmp_path / "big.bin"
    expected = write_big_file(source, SIZE)
    patches, heads = [], []
    page.on("request", lambda request: patches.append(int(request.headers["upload-offset"]))
            if request.method == "PATCH" else None)
    page.on("response", lambda response: heads.append(int(response.headers["upload-offset"]))
            if response.request.method == "HEAD" and "upload-offset" in response.headers else None)
    try:
        log_in(page, f"http://127.0.0.1:{relay.port}")
        new_folder(page, name)
        page.set_input_files("#upload-input", str(source))
        page.click("#upload-button")
        page.wait_for_selector('tr[data-name="big.bin"]', timeout=600000)
        assert relay.cuts == 1
        # The page asked where the server was after the cut (heads[0] is the offset before the
        # first chunk), and went on from exactly there: a chunk's part, well past the start.
        assert len(heads) >= 2, heads
        resumed_at = heads[-1]
        assert SIZE // 2 - CHUNK < resumed_at < SIZE // 2 + 10 * MIB, (resumed_at, patches)
        assert resumed_at in patches, patches
        assert resumed_at % CHUNK, "the server kept none of the cut chunk's bytes"
        # Strictly rising offsets: nothing was sent twice from one offset, nothing restarted.
        assert patches[0] == 0 and patches == sorted(set(patches)), patches
        uploaded = folder / "big.bin"
        assert uploaded.stat().st_size == SIZE
        assert uploaded.stat().st_uid == pwd.getpwnam("alice").pw_uid
        assert not (folder / "big.bin.part").exists()
        assert sha256_of(uploaded) == expected
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        source.unlink(missing_ok=True)


def test_an_uploaded_html_file_opened_from_files_runs_no_script_as_the_portal(page, live_server, tmp_path):
    name = f"html-{os.urandom(4).hex()}"
    folder = Path(pwd.getpwnam("alice").pw_dir) / name
    # Were it ever run as a page of the portal, it would leave its mark in the origin's storage,
    # cookies and title.
    source = tmp_path / "page.html"
    source.write_text("<!doctype html><title>pwned</title><script>localStorage.setItem('pwned', '1');"
                      "document.cookie = 'pwned=1; path=/'; document.title = 'pwned';</script>")
    try:
        log_in(page, live_server.url)
        new_folder(page, name)
        page.set_input_files("#upload-input", str(source))
        page.click("#upload-button")
        page.wait_for_selector('tr[data-name="page.html"]')
        page.click('tr[data-name="page.html"] a')  # its view: the text, as text
        assert page.locator("#text-preview").inner_text().startswith("<!doctype html>")
        raw = page.get_attribute("#download-link", "href")
        # Opened in a tab of its own: a download, never a page.
        tab = page.context.new_page()
        with tab.expect_download() as download, contextlib.suppress(Exception):
            tab.goto(f"{live_server.url}{raw}")
        assert Path(download.value.path()).read_text().startswith("<!doctype html>")
        tab.close()
        # And framed by a page of the portal: still a download, and sandboxed were it ever shown.
        with page.expect_download():
            page.evaluate("(url) => { const frame = document.createElement('iframe'); frame.src = url;"
                          " document.body.appendChild(frame); }", raw)
        page.wait_for_timeout(1000)  # what a script would have needed to run
        page.reload()
        assert page.evaluate("localStorage.getItem('pwned')") is None
        assert "pwned" not in page.evaluate("document.cookie")
        assert all(cookie["name"] != "pwned" for cookie in page.context.cookies())
        assert page.title() != "pwned"
    finally:
        shutil.rmtree(folder, ignore_errors=True)
