"""MCP tools where they meet the rest: a real server's long answers and floods of
stderr, what it leaves running, its last words, calls it does not give up when told
to, and a server that hangs, against the SDK-written test server run as a subprocess.
Calls go through the real dispatcher."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import time
from pathlib import Path

import httpx2
import pytest

import runtime.tools._mcp_sdk
from runtime import McpServer, McpToolSettings, ModelRetry, ToolCall, ToolRegistry
from runtime.concurrency import within
from runtime.tools.mcp import mcp_tools
from tests.support.dispatching import layered
from tests.support.mcp_servers import child_pids, http_test_server, running, sdk_server

pytestmark = pytest.mark.timeout(120)


async def test_a_long_answer_is_read_in_time_linear_in_its_length() -> None:
    """A result of many megabytes is one line of the server's output: reading it takes
    about as long again per megabyte, not ever longer (it was joined anew with every
    chunk read)."""
    server = sdk_server()
    async with running(server) as run:
        tools = ToolRegistry(mcp_tools(server, await run.listed(server.name)).values())
        dispatcher = layered(tools)

        async def timed(chars: int) -> float:
            asked = ToolCall(id="c", name="long", arguments=f'{{"chars": {chars}}}')
            started = time.perf_counter()
            (seen,) = await dispatcher.dispatch([asked])
            took = time.perf_counter() - started
            assert seen.status == "ok"
            assert seen.content.startswith("b")  # cut to what the model reads
            return took

        await timed(1)  # the first call's own costs are not a megabyte's
        small = min([await timed(2_000_000) for _ in range(3)])
        large = min([await timed(24_000_000) for _ in range(2)])  # a busy machine's pause aside
    # Twelve times the length: some twelve times the time when linear (up to forty and
    # more as a loaded machine pages the large one in), a hundred and forty and more
    # when every chunk joins the line anew.
    assert large < 70 * small, (small, large)


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie no longer does)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def wait_until_gone(pid: int) -> None:
    while alive(pid):  # noqa: ASYNC110 (a process's end has no event to wait on)
        await asyncio.sleep(0.01)


async def test_what_a_server_started_ends_with_it_stopped_or_dead() -> None:
    """A process a server started (a helper, in its process group) does not outlive it:
    not once its block stops it as MCP says (it exits as its stdin closes), nor when it
    dies as it runs, before the run calls it again."""
    async with running(sdk_server()) as run:
        stopped = int(await run.call("t", "spawn", {}))
        assert alive(stopped)
    with within(10):
        await wait_until_gone(stopped)
    async with running(sdk_server()) as run:
        orphan = int(await run.call("t", "spawn", {}))
        with pytest.raises(ModelRetry, match="stopped during the call"):
            await run.call("t", "die", {})
        with within(10):
            await wait_until_gone(orphan)  # as it died: not once the block ends


async def test_a_side_effecting_call_past_its_time_is_not_said_to_be_cancelled(
    tmp_path: Path,
) -> None:
    """Cancelling an MCP call only asks its server to stop: a server that carries the
    call out regardless has its effect after the call's time ran out, so the model is
    told that the effect is unknown, not that the call was cancelled (and so did
    nothing, to be made again)."""
    notes = tmp_path / "notes.txt"
    server = sdk_server(notes=notes, tools={"append_note": McpToolSettings(timeout=0.3)})
    async with running(server) as run:
        tools = ToolRegistry(mcp_tools(server, await run.listed(server.name)).values())
        arguments = '{"text": "once", "delay": 1.0, "heedless": true}'
        (seen,) = await layered(tools).dispatch(
            [ToolCall(id="c", name="append_note", arguments=arguments)]
        )
        assert seen.status == "timeout"
        assert "was cancelled" not in seen.content
        assert "whether it had any effect is unknown" in seen.content
        with within(10):
            while "end once" not in notes.read_text():  # noqa: ASYNC110 (a file, no event)
                await asyncio.sleep(0.01)


async def test_a_dying_server_s_last_words_are_told_whatever_they_are_written_in() -> None:
    """What a server wrote to stderr as it died is read from its end wherever that end
    cuts a character (a traceback drawn in box characters, a message not in English):
    the error says it, not nothing."""
    words = "─" * 1000 + " could not reach the bank"  # its last 2,400 bytes: a cut "─"
    async with running(sdk_server()) as run:
        with pytest.raises(ModelRetry) as died:
            await run.call("t", "die", {"say": words})
    assert "stopped during the call to 'die'" in died.value.message
    assert "could not reach the bank)" in died.value.message  # (it said: ...)


async def test_a_server_that_reads_no_more_is_stopped_all_the_same() -> None:
    """A hung server (here: stopped) leaves what was sent to it unread once its pipe is
    full: a call that times out ends at its time (where the notice of its cancellation
    waited seconds to be sent), and its block still ends, the server with it (where the
    close of its stdin waited for those bytes to go out, forever)."""
    before = child_pids()
    server = sdk_server(tools={"lookup": McpToolSettings(timeout=0.5)})
    pid = 0
    try:
        with within(30):  # its stop takes seconds (graces, then SIGKILL): not for ever
            async with running(server) as run:
                tools = ToolRegistry(mcp_tools(server, await run.listed(server.name)).values())
                pid = int(await run.call("t", "pid", {}))
                os.kill(pid, signal.SIGSTOP)
                word = "x" * 300_000  # more than its pipe holds
                asked = ToolCall(id="c", name="lookup", arguments=f'{{"word": "{word}"}}')
                started = time.perf_counter()
                (seen,) = await layered(tools).dispatch([asked])
                assert seen.status == "timeout"
                assert time.perf_counter() - started < 3  # its 0.5 s, not 5.5 s
    finally:
        if pid and alive(pid):  # a block that hung left it: not past the test
            os.kill(pid, signal.SIGKILL)
    assert child_pids() - before == set()


async def test_a_server_that_floods_its_stderr_fills_no_disk_and_its_last_words_are_told() -> None:
    """What a server writes to stderr is read as it comes and only its end kept: a
    server that logs megabytes fills no file with them (its stderr is a pipe, read),
    and what it says as it dies is still told."""
    async with running(sdk_server()) as run:
        pid = int(await run.call("t", "pid", {}))
        await run.call("t", "lookup", {"word": "bee", "chatter": 24})
        written = os.stat(f"/proc/{pid}/fd/2")
        kept_on_disk = written.st_size if stat.S_ISREG(written.st_mode) else 0
        with pytest.raises(ModelRetry) as died:
            await run.call("t", "die", {"say": "the end"})
    assert kept_on_disk < 1_000_000
    assert "stopped during the call to 'die' (it said: the end);" in died.value.message


async def test_a_server_whose_line_never_ends_is_stopped_at_its_limit_and_others_go_on() -> None:
    """A server that writes one line and never ends it is not read into memory without
    end: past its ``max_message_mb`` it is killed as broken, the call under way says so
    (naming the server and the limit), a call of another server made with it goes on,
    and the next call starts the broken one again."""
    broken, other = sdk_server(max_message_mb=1), sdk_server("u")
    async with running(broken, other) as run:
        pid = int(await run.call("t", "pid", {}))
        endless = mcp_tools(broken, await run.listed("t"))["long"]
        lookup = mcp_tools(other, await run.listed("u"))["lookup"]
        asked = [  # 256 KB of a line every 10 ms
            ToolCall(id="a", name="long", arguments='{"chars": 262144, "forever": true}'),
            ToolCall(id="b", name="lookup", arguments='{"word": "bee"}'),
        ]
        with within(10):  # a failsafe: 25 MB a second, read for ever without a limit
            flooded, looked_up = await layered(ToolRegistry([endless, lookup])).dispatch(asked)
            await wait_until_gone(pid)
        assert flooded.status == "error"
        assert (
            "MCP server 't' wrote a message longer than 1 MB (its max_message_mb), and was "
            "stopped as broken during the call to 'long'"
        ) in flooded.content
        assert (looked_up.status, looked_up.content) == ("ok", "an insect that makes honey")
        assert await run.call("t", "lookup", {"word": "hive"}) == "where bees live"


async def test_a_streamable_http_answer_that_never_ends_is_cut_at_its_limit() -> None:
    """An HTTP server's answer whose line never ends is not read into memory without
    end either: past ``max_message_mb`` the call says so (naming the server and the
    limit), and the next call reaches the server on a new connection."""
    with http_test_server("s3cret-token") as url:
        server = McpServer(
            name="h", url=url, headers={"Authorization": "Bearer s3cret-token"}, max_message_mb=1
        )
        async with running(server) as run:
            with within(10), pytest.raises(ModelRetry) as broken:  # a failsafe: 25 MB a second
                await run.call("h", "long", {"chars": 1, "forever": True})
            assert await run.call("h", "lookup", {"word": "bee"}) == "an insect that makes honey"
    assert broken.value.message.startswith(
        "MCP server 'h' sent a message longer than 1 MB (its max_message_mb), and its "
        "connection was dropped as broken during the call to 'long'"
    )


async def test_an_answer_sent_as_a_server_sent_event_may_be_as_long_as_any_other() -> None:
    """An HTTP server that answers with server-sent events may send as long an answer
    as one that answers in JSON (``max_message_mb``): the SDK held an event to 1 MB of
    its own, and a call whose answer was longer was said to have stopped the server."""
    with http_test_server("s3cret-token", events=True) as url:
        server = McpServer(name="h", url=url, headers={"Authorization": "Bearer s3cret-token"})
        async with running(server) as run:
            answer = await run.call("h", "long", {"chars": 3_000_000})
    assert answer == "b" * 3_000_000


async def test_an_http_call_takes_as_long_as_its_tool_s_time_not_the_connection_s(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An HTTP call's answer is waited for as long as its tool's time limit lets it: the
    client's read timeout (five minutes) cut a longer call off, said to have stopped
    the server, which went on serving. Here the connection's timeouts are 0.3 seconds,
    and the call takes 0.6."""
    monkeypatch.setattr(runtime.tools._mcp_sdk, "_HTTP_TIMEOUT", httpx2.Timeout(0.3))
    with http_test_server("s3cret-token") as url:
        server = McpServer(name="h", url=url, headers={"Authorization": "Bearer s3cret-token"})
        async with running(server) as run:
            assert await run.call("h", "slow", {"seconds": 0.6}) == "slept 0.6s"


async def test_an_http_servers_calls_past_its_max_connections_wait_for_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Many workers (or runs of one Executor) calling one streamable-HTTP server: each
    call under way held a connection, a file of the process's, and a few thousand at
    once ran out of them (past `ulimit -n`: every call under way said to have lost its
    connection, whether it did anything unknown, and the run's one restart of the
    server spent). The server has its max_connections calls under way at once (here
    3, never the 4 that would meet); the calls past them wait for one to end, longer
    than the pool's timeout of a connection (30 seconds; here a tenth of one) that once
    ended the session, and each has its answer."""
    monkeypatch.setattr(runtime.tools._mcp_sdk, "_HTTP_TIMEOUT", httpx2.Timeout(30, pool=0.1))
    with http_test_server("s3cret-token") as url:
        server = McpServer(
            name="h", url=url, headers={"Authorization": "Bearer s3cret-token"}, max_connections=3
        )
        async with running(server) as run, asyncio.TaskGroup() as group:
            calls = [
                group.create_task(run.call("h", "gather", {"count": 4, "limit": 0.3}))
                for _ in range(7)
            ]
    assert [call.result() for call in calls] == ["alone after 0.3s"] * 7
