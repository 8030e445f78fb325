"""What a TensorBoard job says about itself, and what the portal believes of it.

TensorBoard prints "TensorBoard <version> at http://HOST:PORT/<prefix>/ (Press CTRL+C to quit)" to
its stderr when it listens. That file belongs to the user, who could write any line into it, so the
line only ever yields a host that is a node of this very Slurm job and a port from 1024 to 65535:
the proxy can then reach nothing but a port on a node the user already runs jobs on.
"""

import re
import socket
from dataclasses import dataclass

STARTUP_LINE = re.compile(r"^TensorBoard \S+ at http://(?P<host>[^/\s]+?):(?P<port>\d{1,6})/", re.MULTILINE)
HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                      r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")
PORTS = range(1024, 65536)


class AddressRefused(ValueError):
    """The log names an address the portal will not connect to; the message says why."""


@dataclass(frozen=True)
class Address:
    host: str
    port: int


def startup_address(log: str, *, nodes: list[str]) -> Address | None:
    """The address in TensorBoard's first startup line, checked against the job's `nodes` (from
    Slurm); None if there is no such line yet. Raises AddressRefused for a bad one."""
    match = STARTUP_LINE.search(log)
    if match is None:
        return None
    host, port = match["host"], int(match["port"])
    if not HOSTNAME.fullmatch(host):
        raise AddressRefused(f"TensorBoard reported host {host[:80]!r}, which is not a host name.")
    if port not in PORTS:
        raise AddressRefused(f"TensorBoard reported port {port}, outside {PORTS.start}-{PORTS.stop - 1}.")
    if not host_is_node(host, nodes):
        raise AddressRefused(f"TensorBoard reported host {host!r}, which is not its node "
                             f"({', '.join(nodes) or 'none known'}).")
    return Address(host, port)


def host_is_node(host: str, nodes: list[str]) -> bool:
    """`host` is one of the job's nodes by name, or resolves to the same address as one (a node
    whose Slurm name differs from its host name)."""
    if host in nodes:
        return True
    addresses = _addresses(host)
    return bool(addresses) and any(addresses & _addresses(node) for node in nodes)


def _addresses(name: str) -> set[str]:
    try:
        return {info[4][0] for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)}
    except (OSError, UnicodeError):
        return set()
