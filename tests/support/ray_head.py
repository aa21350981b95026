"""A server on 127.0.0.1 that stands for a Ray head, or for what is no head, as far as
a driver's first look at an address goes (``honeycomb.backends._join``): a gRPC
server, Ray's GCS among them, answers an HTTP/2 client's opening with SETTINGS."""

from __future__ import annotations

import contextlib
import socketserver
import threading
from collections.abc import Iterator

SETTINGS = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""What a gRPC server answers an HTTP/2 client's opening with: an empty SETTINGS frame."""


@contextlib.contextmanager
def answering(reply: bytes = SETTINGS) -> Iterator[str]:
    """The ``host:port`` of a server on 127.0.0.1 that answers a client's first bytes
    with ``reply`` (``b""``: says nothing) and then holds the connection, while the
    block runs; stopped after it."""
    ended = threading.Event()

    class Answer(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            self.request.recv(64)
            self.request.sendall(reply)
            ended.wait(10)

    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), Answer) as server:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield f"127.0.0.1:{server.server_address[1]}"
        finally:
            ended.set()
            server.shutdown()
