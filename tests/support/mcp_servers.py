"""The MCP servers the tests run as real subprocesses, and what they leave behind.

``child_pids()`` reads this process's children from ``/proc`` (a stdio server is one
while it runs), so a test can check that none is left once its block ends.
"""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from runtime.tools.mcp import McpRun, McpServer, McpServers
from tests.support import ROOT

__all__ = [
    "ROOT",
    "child_pids",
    "forget_sessions",
    "http_test_server",
    "running",
    "sdk_server",
    "time_server",
]


@asynccontextmanager
async def running(*servers: McpServer) -> AsyncIterator[McpRun]:
    """A block with these servers, as one run."""
    async with McpServers(servers) as live:
        with live.run() as run:
            yield run


def sdk_server(name: str = "t", *, notes: Path | None = None, **options: Any) -> McpServer:
    """The SDK-written server of ``tests/support/mcp_server.py``, over stdio."""
    env = {"PYTHONPATH": str(ROOT)}
    if notes is not None:
        env["MCP_TEST_NOTES"] = str(notes)
    env.update(options.pop("env", {}))
    return McpServer(
        name=name,
        command=sys.executable,
        args=("-m", "tests.support.mcp_server", *options.pop("args", ())),
        env=env,
        **options,
    )


def time_server(name: str = "time", **options: Any) -> McpServer:
    """The third-party ``mcp-server-time``, installed from the package index."""
    return McpServer(
        name=name,
        command=sys.executable,
        args=("-m", "mcp_server_time", "--local-timezone", "UTC"),
        **options,
    )


def child_pids() -> set[int]:
    """The processes this one started that have not been reaped yet."""
    found: set[int] = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children", encoding="ascii") as listed:
                found |= {int(pid) for pid in listed.read().split()}
        except FileNotFoundError:
            continue  # a thread that ended after it was listed; its children moved on
    return found


@contextmanager
def http_test_server(
    token: str,
    port: int | None = None,
    *,
    notes: Path | None = None,
    events: bool = False,
    legacy: bool = False,
    crash_at_list: bool = False,
) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1 (on ``port``, or a free one),
    in a subprocess: its URL, once it answers. Every request must carry
    ``Authorization: Bearer <token>``; its tools that write notes write them to
    ``notes``; with ``events``, it answers with server-sent events; with ``legacy``, it
    speaks MCP as before 2026 (no ``server/discover``: a session, ended by a ``DELETE``;
    no stream of its own, a ``GET`` answered 405);
    with ``crash_at_list``, it exits as a client asks for its tools.

    The port is bound here and the listening socket handed to the server, so no other
    process can take it between its choice and the server's start."""
    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port given again
    listening.bind(("127.0.0.1", port or 0))
    listening.listen(64)
    port = listening.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_TEST_TOKEN": token}
    if notes is not None:
        env["MCP_TEST_NOTES"] = str(notes)
    served = str(listening.fileno())
    with listening:
        process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.mcp_server", "--http-fd", served]
            + (["--events"] if events else [])
            + (["--legacy"] if legacy else [])
            + (["--crash-at-list"] if crash_at_list else []),
            env=env,
            stderr=subprocess.DEVNULL,
            pass_fds=(listening.fileno(),),
        )
    # Only the server holds the socket now: if it dies, a connection is refused.
    try:
        _answers(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)


def forget_sessions(url: str, token: str, *, at_calls: bool = False) -> None:
    """Have the HTTP test server at ``url`` forget the sessions it knows, as a server
    that restarted does: it answers a request in one with 404 (``Session not found``);
    ``at_calls``: every session a call comes in from now on, as a replica behind a
    balancer that never saw the session does."""
    host, port = url.split("/")[2].split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=5)
    path = "/forget-at-calls" if at_calls else "/forget-sessions"
    try:
        connection.request("POST", path, headers={"Authorization": f"Bearer {token}"})
        assert connection.getresponse().status == 200
    finally:
        connection.close()


def _answers(port: int, process: subprocess.Popen[bytes]) -> None:
    """Return once the server on ``port`` answers an HTTP request (any status).

    Raises:
        RuntimeError: when its process ended first, or it did not answer in time.
    """
    deadline = time.monotonic() + 30  # a failsafe: the answer is the signal
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            connection.request("GET", "/")
            connection.getresponse().read()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the HTTP test server did not start") from None
        finally:
            connection.close()
