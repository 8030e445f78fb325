"""A hub that takes connections and never answers (a hung hub, not a stopped one), counting them."""

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class HungHub:
    url: str
    connections: list[socket.socket] = field(default_factory=list)


@contextmanager
def hung_hub() -> Iterator[HungHub]:
    listener = socket.create_server(("127.0.0.1", 0))
    hub = HungHub(f"http://127.0.0.1:{listener.getsockname()[1]}/hub/api")

    def accept() -> None:
        while True:
            try:
                hub.connections.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield hub
    finally:
        listener.close()
        for connection in hub.connections:
            connection.close()
