"""Free loopback ports for the servers tests start (hubs, proxies, SMTP, rendezvous)."""

import random
import socket


def free_ports(count: int) -> list[int]:
    """Ports below the kernel's ephemeral range (32768 up): one picked there could become a client
    socket's before the server binds it (a hub's proxy starts minutes after its port is picked)."""
    ports: list[int] = []
    while len(ports) < count:
        port = random.randrange(20000, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in ports:
            ports.append(port)
    return ports


def free_port() -> int:
    return free_ports(1)[0]
