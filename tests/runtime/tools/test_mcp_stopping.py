"""How an MCP server stops (``runtime.tools.mcp``, ``runtime.tools._mcp_stdio``): one
still starting is killed at once, by a cancellation, by the end of its block, or by
its ``start_timeout``; one that started is stopped gracefully. Against the SDK-written
test server (``tests/support/mcp_server.py``), run as a real subprocess that takes a
minute to start when told to; a streamable-HTTP server's session ends within a grace."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

import runtime.tools._mcp_sdk  # loaded before any clock starts: it takes a while
from runtime import McpServer, McpServerError, McpServers
from tests.support import ROOT
from tests.support.mcp_servers import child_pids, http_test_server, sdk_server

pytestmark = pytest.mark.timeout(90)

GRACE_S = 2.0
"""The grace of the MCP shutdown (stdin closed, then SIGTERM): a server that did not
start is not given it."""

SLOW_START = ("--start-delay", "60")
"""A server that would take a minute to start: it reads no stdin meanwhile."""


async def started_process(before: set[int]) -> int:
    """The pid of the server process started since ``before`` was counted, once there
    is one (the server is then starting: its start delay has begun)."""
    while not (started := child_pids() - before):  # noqa: ASYNC110 - a spawn has no event
        await asyncio.sleep(0.01)
    (pid,) = started
    return pid


def gone(pid: int) -> bool:
    """Whether process ``pid`` has ended and been reaped (no zombie, no orphan)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.both_loops  # the block ends as the process starts, on uvloop
async def test_cancelling_a_block_whose_server_is_starting_kills_it_at_once() -> None:
    before = child_pids()
    server = sdk_server(args=SLOW_START, start_timeout=10)

    async def start() -> None:
        async with McpServers([server]) as live:
            await live.session("t", set())

    task = asyncio.create_task(start())
    pid = await started_process(before)
    cancelled = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    waited = time.perf_counter() - cancelled
    assert gone(pid)
    assert child_pids() - before == set()
    # Not its start_timeout (10 s), nor the grace of a server that started.
    assert waited < GRACE_S / 2


@pytest.mark.both_loops  # the block ends as the process starts, on uvloop
async def test_a_block_that_ends_while_its_server_starts_kills_it_at_once() -> None:
    before = child_pids()
    server = sdk_server(args=SLOW_START, start_timeout=10)

    async with McpServers([server]) as live:
        starting = asyncio.create_task(live.session("t", set()))
        pid = await started_process(before)
        ended = time.perf_counter()
    waited = time.perf_counter() - ended
    assert gone(pid)
    assert waited < GRACE_S / 2
    with pytest.raises(McpServerError, match="stopped as it started"):  # its caller is told
        await starting


async def test_a_server_that_does_not_start_in_time_is_killed_at_its_start_timeout() -> None:
    before = child_pids()
    start_timeout = 1.0
    async with McpServers([sdk_server(args=SLOW_START, start_timeout=start_timeout)]) as live:
        began = time.perf_counter()
        with pytest.raises(McpServerError) as info:
            await live.session("t", set())
        waited = time.perf_counter() - began
        assert child_pids() - before == set()  # killed and reaped as its start failed
    assert "did not start and list its tools within 1s" in str(info.value)
    # Its start_timeout, and not the grace of a server that started after it.
    assert start_timeout <= waited < start_timeout + GRACE_S / 2


def noting_server(note: Path, *, then: str = "") -> McpServer:
    """The test server, which writes ``stopped serving`` to ``note`` once its input has
    ended (it has stopped serving), then runs ``then`` (Python)."""
    script = (
        "import pathlib, runpy, signal, sys, time; note = pathlib.Path(sys.argv.pop()); "
        "runpy.run_module('tests.support.mcp_server', run_name='__main__'); "
        f"note.write_text('stopped serving'); {then}"
    )
    return McpServer(
        name="t",
        command=sys.executable,
        args=("-c", script, str(note)),
        env={"PYTHONPATH": str(ROOT)},
    )


async def test_a_server_that_started_stops_on_its_own_as_its_stdin_closes(tmp_path: Path) -> None:
    """The MCP shutdown: a server that started is not killed, it ends as its input
    does (and may do what it must first: here, write a note)."""
    note = tmp_path / "note.txt"
    before = child_pids()
    async with McpServers([noting_server(note)]) as live:
        session = await live.session("t", set())
        assert "lookup" in {tool.name for tool in session.tools}
    assert child_pids() - before == set()
    assert note.read_text() == "stopped serving"


async def test_a_graceful_stop_cut_short_kills_the_server_at_once(tmp_path: Path) -> None:
    """A server that will not exit (it ignores SIGTERM) gets the grace, unless its
    stop is itself cancelled: then it is killed there and then."""
    note = tmp_path / "note.txt"
    stubborn = noting_server(
        note, then="signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    )
    before = child_pids()
    started = asyncio.Event()

    async def start_then_stop() -> None:
        async with McpServers([stubborn]) as live:
            await live.session("t", set())
            started.set()
        # The block's end waits here while the server has its grace.

    task = asyncio.create_task(start_then_stop())
    await started.wait()
    while not note.exists():  # noqa: ASYNC110 - its stdin closed, it stopped serving
        await asyncio.sleep(0.01)
    cancelled = time.perf_counter()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    waited = time.perf_counter() - cancelled
    assert child_pids() - before == set()
    assert waited < GRACE_S / 2


async def test_runs_that_need_a_server_as_it_starts_share_that_start() -> None:
    """Runs that need a server while it starts wait for that one start and are told how
    it went: three runs waiting on a server that hangs wait its start_timeout once, not
    once each in turn (each took its own start after the one before failed). A run
    after the start failed tries again."""
    start_timeout = 1.5
    before = child_pids()
    async with McpServers([sdk_server(args=SLOW_START, start_timeout=start_timeout)]) as live:

        async def needs_it() -> McpServerError:
            with live.run() as run, pytest.raises(McpServerError) as info:
                await run.listed("t")
            return info.value

        began = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            runs = [group.create_task(needs_it()) for _ in range(3)]
        waited = time.perf_counter() - began
        assert child_pids() - before == set()
        for run in runs:
            assert "did not start and list its tools within 1.5s" in str(run.result())
        assert waited < 2 * start_timeout  # one start's time, not three (4.5 s)

        began = time.perf_counter()
        later = asyncio.create_task(needs_it())
        await started_process(before)  # it starts the server again
        assert "did not start and list its tools within 1.5s" in str(await later)
        assert time.perf_counter() - began >= start_timeout


async def test_a_streamable_http_server_that_hangs_as_its_session_ends_holds_no_block(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A streamable-HTTP server's session ends with a request (an HTTP ``DELETE``) that a
    hung server never answers: it has its grace, then is left, and the block ends (it
    waited for the client's read timeout, five minutes)."""
    monkeypatch.setattr(runtime.tools._mcp_sdk, "_END_S", 0.2)
    token = "hung-session-token"
    with http_test_server(token, legacy=True) as url:  # a session, ended by a DELETE
        server = McpServer(name="h", url=url, headers={"Authorization": f"Bearer {token}"})
        async with McpServers([server]) as live:
            with live.run() as run:
                pid = int(await run.call("h", "pid", {}))
                os.kill(pid, signal.SIGSTOP)  # hung: it takes connections, answers none
            began = time.monotonic()
        try:
            assert time.monotonic() - began < 5.0  # its grace, not the client's timeout
        finally:
            os.kill(pid, signal.SIGCONT)  # for its own stop
