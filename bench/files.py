"""Files (#37): upload throughput through the whole path against a plain `cp`, and a 10,000-entry listing.

A portal of its own (gunicorn, 2 workers x 4 threads as scripts/up.sh starts it; every file operation
goes through `sudo -u alice` and the user-files helper as deployed, from root's gunicorn here) on a
database of the bench's own. In the same run, alternating, N rounds each:
  cp       `sudo -u alice cp SRC ~alice/bench-files/cp-N.bin`, then `sync` of that file (the upload's
           finish fsyncs its file: both are timed to the data on disk, and cp also without the sync)
  upload   tus as alice over HTTP on loopback: POST /api/v1/files/uploads/, then PATCHes of --chunk MiB
           read from SRC, until the file is in place
Throughput is the file's size over the wall time. The gunicorn workers' RSS is sampled during the
uploads (it must stay flat: nothing holds a chunk whole), and again while a folder holding a copy of
SRC downloads as a zip (GET /api/v1/files/zip/, read as it streams). Then a folder of 10,000 files:
`GET /api/v1/files/?root=home&path=bench-files/many` --lists times, p50 and p99.
  python bench/files.py [--size-mib 1024] [--rounds 3] [--chunk 64] [--lists 200]
"""

import argparse
import base64
import http.client
import os
import pwd
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

from measure import django_on, percentile

USER = "alice"
HOME = Path(pwd.getpwnam(USER).pw_dir)
FOLDER = HOME / "bench-files"


def as_alice(*argv: str) -> None:
    subprocess.run(["sudo", "-n", "-u", USER, *argv], check=True, cwd="/")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def upload(url: str, token: str, source: Path, name: str, chunk: int) -> None:
    size = source.stat().st_size
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    headers = {"Authorization": f"Token {token}", "Tus-Resumable": "1.0.0"}
    connection.request("POST", "/api/v1/files/uploads/", headers={
        **headers, "Upload-Length": str(size),
        "Upload-Metadata": f"root {b64('home')},folder {b64('bench-files')},filename {b64(name)}"})
    created = connection.getresponse()
    assert created.status == 201, (created.status, created.read())
    created.read()
    location = urlsplit(created.headers["Location"]).path
    offset = 0
    with source.open("rb") as data:
        while offset < size:
            length = min(chunk, size - offset)
            connection.putrequest("PATCH", location)
            for key, value in {**headers, "Upload-Offset": str(offset), "Content-Length": str(length),
                               "Content-Type": "application/offset+octet-stream"}.items():
                connection.putheader(key, value)
            connection.endheaders()
            left = length
            while left:
                block = data.read(min(left, 1024 * 1024))
                connection.send(block)
                left -= len(block)
            answer = connection.getresponse()
            answer.read()
            assert answer.status == 204, (answer.status, answer.headers)
            offset = int(answer.headers["Upload-Offset"])
    connection.close()


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        total += next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    return total / 1024


def workers(parent: int) -> list[int]:
    found = subprocess.run(["pgrep", "-P", str(parent)], capture_output=True, text=True).stdout.split()
    return [int(pid) for pid in found]


class Portal:
    """gunicorn serving the bench database, 2 workers x 4 threads as scripts/up.sh starts the portal."""

    def __init__(self) -> None:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings.base"}
        self.process = subprocess.Popen(
            [str(Path(sys.executable).with_name("gunicorn")), "portal.wsgi",
             "--bind", f"127.0.0.1:{self.port}", "--workers", "2", "--threads", "4", "--timeout", "600",
             "--log-level", "warning", "--no-control-socket"],
            cwd=Path(__file__).resolve().parents[1], env=env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/accounts/login/", timeout=2).close()
                return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the bench portal did not start")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


class RssSampler:
    """The gunicorn workers' RSS every 0.2 s while in its `with` block."""

    def __init__(self, parent: int) -> None:
        self.pids, self.samples, self.done = workers(parent), [], threading.Event()
        self.thread = threading.Thread(target=self.sample, daemon=True)

    def sample(self) -> None:
        while not self.done.is_set():
            self.samples.append(rss_mib(self.pids))
            time.sleep(0.2)

    def __enter__(self) -> "RssSampler":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()


def zip_download(url: str, token: str) -> int:
    """GET the folder bench-files/zip as a zip, read 1 MiB at a time; returns its size in bytes."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    connection.request("GET", "/api/v1/files/zip/?root=home&path=bench-files/zip",
                       headers={"Authorization": f"Token {token}"})
    answer = connection.getresponse()
    assert answer.status == 200, answer.status
    total = 0
    while block := answer.read(1024 * 1024):
        total += len(block)
    connection.close()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=64, help="MiB per PATCH")
    parser.add_argument("--lists", type=int, default=200)
    args = parser.parse_args()
    django_on("bench_gpuportal_files")
    from portal.accounts.models import User
    from portal.accounts.services import api_token_create

    user, _ = User.objects.get_or_create(username=USER, defaults={"home_directory": str(HOME)})
    _, token = api_token_create(user=user, name="bench-files")
    source = Path("/tmp/bench-files-src.bin")
    with source.open("wb") as out:
        for _ in range(args.size_mib):
            out.write(os.urandom(1024 * 1024))
    source.chmod(0o644)
    shutil.rmtree(FOLDER, ignore_errors=True)
    as_alice("mkdir", "-p", str(FOLDER))
    portal = Portal()
    time.sleep(1)
    size = source.stat().st_size
    results: dict[str, list[float]] = {"cp": [], "cp+sync": [], "upload": []}
    rss: list[float] = []
    try:
        for round_ in range(args.rounds):
            started = time.monotonic()
            as_alice("cp", str(source), str(FOLDER / f"cp-{round_}.bin"))
            copied = time.monotonic()
            as_alice("sync", str(FOLDER / f"cp-{round_}.bin"))
            results["cp"].append(size / (copied - started))
            results["cp+sync"].append(size / (time.monotonic() - started))

            with RssSampler(portal.process.pid) as sampler:
                started = time.monotonic()
                upload(portal.url, token, source, f"up-{round_}.bin", args.chunk * 1024 * 1024)
                results["upload"].append(size / (time.monotonic() - started))
            rss += sampler.samples
            assert (FOLDER / f"up-{round_}.bin").stat().st_size == size
            for name in (f"cp-{round_}.bin", f"up-{round_}.bin"):
                (FOLDER / name).unlink()

        as_alice("mkdir", str(FOLDER / "zip"))
        as_alice("cp", str(source), str(FOLDER / "zip" / "data.bin"))
        with RssSampler(portal.process.pid) as sampler:
            started = time.monotonic()
            zip_size = zip_download(portal.url, token)
            zip_rate = zip_size / (time.monotonic() - started)
        zipped = sampler.samples
        assert zip_size > size
        (FOLDER / "zip" / "data.bin").unlink()

        many = FOLDER / "many"
        many.mkdir()
        for i in range(10000):
            (many / f"file-{i:05d}.txt").write_bytes(b"x" * (i % 100))
        subprocess.run(["chown", "-R", USER, str(many)], check=True)
        connection = http.client.HTTPConnection("127.0.0.1", portal.port, timeout=60)
        times = []
        for _ in range(args.lists + 5):
            started = time.monotonic()
            connection.request("GET", "/api/v1/files/?root=home&path=bench-files/many",
                               headers={"Authorization": f"Token {token}"})
            answer = connection.getresponse()
            body = answer.read()
            times.append((time.monotonic() - started) * 1000)
            assert answer.status == 200 and body.count(b'"name"') == 10000
        times = times[5:]  # warm-up
    finally:
        portal.stop()
        shutil.rmtree(FOLDER, ignore_errors=True)
        source.unlink(missing_ok=True)
    mib = 1024 * 1024
    print(f"file {args.size_mib} MiB, {args.rounds} rounds, PATCH chunks of {args.chunk} MiB")
    for name, values in results.items():
        print(f"  {name:8} median {statistics.median(values) / mib:7.1f} MiB/s  "
              f"(each: {', '.join(f'{v / mib:.1f}' for v in values)})")
    upload_rate = statistics.median(results["upload"])
    print(f"  upload / cp:      {upload_rate / statistics.median(results['cp']):.2f}x")
    print(f"  upload / cp+sync: {upload_rate / statistics.median(results['cp+sync']):.2f}x")
    print(f"  gunicorn workers' RSS during uploads: min {min(rss):.0f} MiB, max {max(rss):.0f} MiB")
    print(f"zip download of a folder holding the file: {zip_rate / mib:.1f} MiB/s; workers' RSS during it: "
          f"min {min(zipped):.0f} MiB, max {max(zipped):.0f} MiB")
    print(f"listing 10,000 entries, {args.lists} requests: p50 {percentile(times, 50):.0f} ms, "
          f"p99 {percentile(times, 99):.0f} ms, max {max(times):.0f} ms")


if __name__ == "__main__":
    sys.exit(main())
