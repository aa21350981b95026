"""Serve any ASGI app with uvicorn on 127.0.0.1, on a free port, from a background
thread with its own event loop, so tests on any loop can reach it over real HTTP."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

import uvicorn

__all__ = ["Lifecycle", "ThreadedServer"]


class Lifecycle:
    """``with server:`` starts it and stops it."""

    def start(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


class ThreadedServer(Lifecycle):
    """A uvicorn server in a thread; a context manager (or :meth:`start`/:meth:`stop`)."""

    def __init__(self, app: Any, *, name: str = "test-server", access_log: bool = False) -> None:
        self.app = app
        self.name = name
        self.access_log = access_log  # uvicorn's line a request (logger uvicorn.access, INFO)
        self.port = 0
        self.loop: asyncio.AbstractEventLoop | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        # proto=IPPROTO_TCP, or asyncio leaves Nagle on and every answer waits ~40ms.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="info" if self.access_log else "warning",
            access_log=self.access_log,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        server = self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._serve(server, sock)),
            name=f"{self.name}-{self.port}",
            daemon=True,
        )
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the {self.name} did not start")
            time.sleep(0.005)

    def call_soon(self, fn: Callable[[], object]) -> None:
        """Run ``fn`` on the server's event loop (thread-safe)."""
        if self.loop is not None:
            self.loop.call_soon_threadsafe(fn)

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10.0)
        self._server = self._thread = None

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self.loop = asyncio.get_running_loop()
        await server.serve(sockets=[sock])
