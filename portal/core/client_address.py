"""The client's address: REMOTE_ADDR, or what a trusted proxy (TRUSTED_PROXIES) says it is.

Behind nginx every request comes from 127.0.0.1, so keying the login lockout on REMOTE_ADDR would
lock one user's account for everybody. X-Forwarded-For and X-Real-IP are read only when REMOTE_ADDR
is a trusted proxy: from anybody else they are the client's own claim and ignored.
"""

import ipaddress
from functools import lru_cache

from django.conf import settings
from django.http import HttpRequest

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


@lru_cache(maxsize=4)
def _networks(trusted: tuple[str, ...]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    return tuple(ipaddress.ip_network(value, strict=False) for value in trusted)


def _address(value: str) -> Address | None:
    try:
        address = ipaddress.ip_address(value.strip())
    except ValueError:
        return None
    # An IPv4 client of a dual-stack socket reads ::ffff:a.b.c.d.
    return getattr(address, "ipv4_mapped", None) or address


def _trusted(address: Address) -> bool:
    return any(address in network for network in _networks(tuple(settings.TRUSTED_PROXIES)))


def client_address(request: HttpRequest) -> str:
    """The address the request came from, as seen by the first proxy we trust (django-axes'
    AXES_CLIENT_IP_CALLABLE). X-Forwarded-For is walked from the right, past trusted proxies, to the
    first address none of them is: whatever the client put to its left is its own claim."""
    remote_addr = request.META.get("REMOTE_ADDR", "")
    remote = _address(remote_addr)
    if remote is None or not _trusted(remote):
        return remote_addr
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR") or request.META.get("HTTP_X_REAL_IP") or ""
    hops = [hop for hop in forwarded.split(",") if hop.strip()]
    client = remote
    for hop in reversed(hops):
        address = _address(hop)
        if address is None:
            break  # a proxy that writes no address: stop at the last one we could read
        client = address
        if not _trusted(address):
            break
    return str(client)
