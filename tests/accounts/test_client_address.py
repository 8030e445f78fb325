"""Which address a request comes from: REMOTE_ADDR, or what a trusted proxy forwards (no database)."""

import pytest
from django.test import RequestFactory

from portal.core.client_address import client_address


@pytest.fixture(autouse=True)
def _proxies(settings):
    settings.TRUSTED_PROXIES = ["127.0.0.1", "::1", "10.1.0.0/16"]


def _address(remote: str, **headers: str) -> str:
    return client_address(RequestFactory().get("/", REMOTE_ADDR=remote, **headers))


@pytest.mark.parametrize(("remote", "headers", "expected"), [
    ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}, "198.51.100.7"),
    ("::1", {"HTTP_X_REAL_IP": "2001:db8::5"}, "2001:db8::5"),
    ("::ffff:127.0.0.1", {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}, "198.51.100.7"),
    # The client's own claim is to the left of what the proxies appended: walked from the right.
    ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "1.2.3.4, 198.51.100.7"}, "198.51.100.7"),
    ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "1.2.3.4, 198.51.100.7, 10.1.2.3"}, "198.51.100.7"),
    ("127.0.0.1", {"HTTP_X_FORWARDED_FOR": "not-an-address"}, "127.0.0.1"),
    ("127.0.0.1", {}, "127.0.0.1"),
    # Not a trusted proxy: its headers are the client's own claim.
    ("192.0.2.50", {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}, "192.0.2.50"),
    ("192.0.2.50", {"HTTP_X_REAL_IP": "127.0.0.1"}, "192.0.2.50"),
    ("10.2.0.1", {"HTTP_X_FORWARDED_FOR": "198.51.100.7"}, "10.2.0.1"),
])
def test_client_address(remote, headers, expected):
    assert _address(remote, **headers) == expected


def test_nobody_is_trusted_by_default(settings):
    settings.TRUSTED_PROXIES = []
    assert _address("127.0.0.1", HTTP_X_FORWARDED_FOR="198.51.100.7") == "127.0.0.1"
