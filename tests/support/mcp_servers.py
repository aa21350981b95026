"""The MCP servers the tests run as real subprocesses, and what they leave behind.

``child_pids()`` reads this process's children from ``/proc`` (a stdio server is one
while it runs), so a test can check that none is left once its block ends.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runtime.tools.mcp import McpServer
from tests.support import ROOT

__all__ = ["ROOT", "child_pids", "http_test_server", "sdk_server", "time_server"]


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
    token: str, port: int | None = None, *, notes: Path | None = None
) -> Iterator[str]:
    """The test server over streamable HTTP on 127.0.0.1 (on ``port``, or a free one),
    in a subprocess: its URL. Every request must carry ``Authorization: Bearer <token>``;
    its tools that write notes write them to ``notes``."""
    if port is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_TEST_TOKEN": token}
    if notes is not None:
        env["MCP_TEST_NOTES"] = str(notes)
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.mcp_server", "--http", str(port)],
        env=env,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the HTTP test server did not start") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(10)
