"""Bad input under load (#23): oversized bodies, slowloris clients and a burst of bad tokens against the
shipped nginx site in front of a real gunicorn with only 2 threads, while a good client polls the API.
A script over the portal's own per-user limit gets its 429s too. Each kind of client comes from a
loopback address of its own, as they would from the internet.

The bad ones get 413, 429 or 401 (a slow client: 408, or its connection closed), never a 5xx; the good
client's answers stay 200 and quick. Without nginx, two slow clients would hold both gunicorn threads.
"""

import socket
import ssl
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from portal.accounts.services import api_token_create
from tests.factories import UserFactory
from tests.load.conftest import Site, SourceAddress

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

GOOD, BIG, SLOW_HEADERS, SLOW_BODIES, BAD_TOKENS, GREEDY = (f"127.0.0.{n}" for n in range(2, 8))


def _tls(site: Site, source: str) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(site.front.certificate))
    raw = socket.create_connection(("127.0.0.1", site.front.port), timeout=30, source_address=(source, 0))
    return context.wrap_socket(raw, server_hostname="localhost")


def _slow_client(site: Site, source: str, head: bytes, drip: bytes, seconds: float) -> bytes | None:
    """Sends `head`, then a byte of `drip` every 2 s for up to `seconds`; what nginx answered when it
    gave up on us (b"" for a closed connection), or None if it was still waiting at the end."""
    with _tls(site, source) as sock:
        sock.sendall(head)
        sock.settimeout(2)
        deadline, left = time.monotonic() + seconds, list(drip)
        while time.monotonic() < deadline:
            try:
                return sock.recv(4096)  # an answer, or b"": nginx closed the connection
            except TimeoutError:
                pass
            except OSError:  # closed without TLS's goodbye
                return b""
            if left:
                sock.sendall(bytes([left.pop()]))
        return None


def test_bad_clients_get_4xx_and_good_ones_stay_quick(site):
    user = UserFactory()
    _, key = api_token_create(user=user, name="good")
    auth = {"Authorization": f"Token {key}"}
    good: list[tuple[float, int]] = []
    stop = threading.Event()

    def good_client() -> None:
        with requests.Session() as session:
            session.mount("https://", SourceAddress(GOOD))
            while not stop.is_set():
                started = time.monotonic()
                response = session.get(f"{site.front.url}/api/v1/me/", headers=auth, timeout=30,
                                       verify=str(site.front.certificate))
                good.append((time.monotonic() - started, response.status_code))
                time.sleep(0.1)

    def oversized(_: int) -> requests.Response:
        with requests.Session() as session:
            session.mount("https://", SourceAddress(BIG))
            return session.post(f"{site.front.url}/api/v1/jobs/", data=b"{" + b" " * (2 * 2**20) + b"}",
                                headers={**auth, "Content-Type": "application/json"}, timeout=30,
                                verify=str(site.front.certificate))

    def bad_token(n: int) -> int:
        with requests.Session() as session:
            session.mount("https://", SourceAddress(BAD_TOKENS))
            return session.get(f"{site.front.url}/api/v1/me/", headers={"Authorization": f"Token bad{n}"},
                               timeout=30, verify=str(site.front.certificate)).status_code

    greedy_user = UserFactory()
    _, greedy_key = api_token_create(user=greedy_user, name="greedy")

    def greedy() -> list[int]:
        """A script reading job logs as fast as nginx lets one address (18/s): each read forks a
        helper, so the portal's own per-user limit (120/min) answers 429 past it."""
        with requests.Session() as session:
            session.mount("https://", SourceAddress(GREEDY))
            codes = []
            for _ in range(130):
                codes.append(session.get(f"{site.front.url}/api/v1/jobs/999999/log/?stream=stdout",
                                         headers={"Authorization": f"Token {greedy_key}"}, timeout=30,
                                         verify=str(site.front.certificate)).status_code)
                time.sleep(1 / 18)
            return codes

    if time.time() % 60 > 45:  # the portal counts in fixed minutes: all 130 reads in one
        time.sleep(61 - time.time() % 60)
    poller = threading.Thread(target=good_client)
    poller.start()
    try:
        with ThreadPoolExecutor(max_workers=32) as pool:
            # Slowloris: headers that never end, and bodies a byte every 2 s (more clients than threads).
            slow_headers = [pool.submit(_slow_client, site, SLOW_HEADERS,
                                        b"GET /api/v1/me/ HTTP/1.1\r\nHost: localhost\r\n", b"X" * 20, 16)
                            for _ in range(10)]
            body = (b"POST /api/v1/jobs/ HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 100\r\n\r\n")
            slow_bodies = [pool.submit(_slow_client, site, SLOW_BODIES, body, b"{" * 100, 8)
                           for _ in range(8)]
            silent_bodies = [pool.submit(_slow_client, site, SLOW_BODIES, body, b"", 16)]
            greedy_codes = pool.submit(greedy)
            time.sleep(1)  # the slow ones are in
            big = list(pool.map(oversized, range(5)))
            tokens = list(pool.map(bad_token, range(300)))
            headers_answers = [future.result() for future in slow_headers]
            bodies_answers = [future.result() for future in slow_bodies]
            silent_answers = [future.result() for future in silent_bodies]
            reads = greedy_codes.result()
    finally:
        stop.set()
        poller.join()

    for response in big:
        assert response.status_code == 413, response.text[:200]
        assert response.json()["code"] == "too_large"
    assert set(tokens) <= {401, 429}, sorted(set(tokens))
    assert tokens.count(429) > 100 and tokens.count(401) >= 60, (tokens.count(401), tokens.count(429))
    # nginx gives up on a header unfinished after 10 s, and on a body that stops for 10 s.
    for answer in headers_answers + silent_answers:
        assert answer is not None, "nginx still waited on a slow client after its timeout"
        assert answer == b"" or answer.startswith(b"HTTP/1.1 4"), answer[:100]
    # Bodies that keep dripping are waited for by nginx alone: gunicorn never sees them.
    assert bodies_answers == [None] * len(bodies_answers)

    # The portal's throttle: 404 (no such job) for the first 120 reads of the minute, then 429.
    assert set(reads) == {404, 429} and reads.count(404) == 120, (reads.count(404), reads.count(429))

    statuses = {status for _, status in good}
    assert statuses == {200}, statuses
    latencies = sorted(seconds for seconds, _ in good)
    assert len(latencies) > 20
    assert statistics.quantiles(latencies, n=20)[-1] < 1.0, latencies[-10:]
