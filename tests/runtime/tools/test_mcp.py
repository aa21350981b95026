"""Tools from MCP servers (``runtime.tools.mcp``), against real servers run as subprocesses:
the SDK-written server of ``tests/support/mcp_server.py`` and the third-party
``mcp-server-time``. Calls go through the real dispatcher."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog

from runtime import (
    ConfigError,
    Dispatcher,
    DispatchPolicy,
    McpServer,
    McpServerError,
    McpServers,
    McpToolSettings,
    MemoryJournal,
    ModelRetry,
    ToolCall,
    ToolMessage,
    ToolRegistry,
)
from runtime.secrets import masked
from runtime.tools.mcp import McpRun, mcp_ref, mcp_tools
from tests.support.concurrency import MEET_LIMIT_S
from tests.support.dispatching import layered
from tests.support.mcp_servers import (
    child_pids,
    forget_sessions,
    http_test_server,
    running,
    sdk_server,
    time_server,
)

pytestmark = pytest.mark.timeout(90)


async def registry(run: McpRun, server: McpServer) -> ToolRegistry:
    return ToolRegistry(mcp_tools(server, await run.listed(server.name)).values())


def calls(*specs: tuple[str, str]) -> list[ToolCall]:
    return [ToolCall(id=f"c{i}", name=name, arguments=args) for i, (name, args) in enumerate(specs)]


async def one(dispatcher: Dispatcher, name: str, arguments: str = "{}") -> ToolMessage:
    (observation,) = await dispatcher.dispatch(calls((name, arguments)))
    return observation


# --- the server's list: schemas and how each tool is run ------------------------------


async def test_tools_come_from_the_list_with_their_schemas_and_hints(tmp_path: Path) -> None:
    server = sdk_server(tools={"lookup": McpToolSettings(side_effects=True, timeout=2.5)})
    async with running(server) as run:
        tools = mcp_tools(server, await run.listed("t"))
    lookup, note, flag, refuse, slow = (
        tools[n] for n in ("lookup", "append_note", "set_flag", "refuse", "slow")
    )
    assert lookup.schema.parameters["required"] == ["word"]
    assert lookup.schema.description == "Look a word up in a tiny dictionary."
    assert (lookup.side_effects, lookup.timeout) == (True, 2.5)  # the override wins
    assert not slow.side_effects  # readOnlyHint: parallel-safe
    assert note.side_effects
    assert not note.idempotent
    assert flag.side_effects
    assert flag.idempotent
    assert refuse.side_effects
    assert not refuse.idempotent


async def test_the_third_party_time_server_is_listed_and_called() -> None:
    server = time_server()
    async with running(server) as run:
        dispatcher = Dispatcher(await registry(run, server))
        assert set(dispatcher.tools.names) == {"convert_time", "get_current_time"}
        assert not dispatcher.tools["get_current_time"].side_effects  # it says read-only
        now = await one(dispatcher, "get_current_time", '{"timezone": "Europe/Lisbon"}')
        assert now.status == "ok"
        assert '"timezone": "Europe/Lisbon"' in now.content
        bad = await one(dispatcher, "get_current_time", '{"timezone": "Mars/Olympus"}')
    assert bad.status == "error"
    assert "tool 'get_current_time' of MCP server 'time' reported an error" in bad.content
    assert "Mars/Olympus" in bad.content


# --- results and errors as observations ----------------------------------------------


async def test_results_errors_and_bad_arguments_become_observations() -> None:
    server = sdk_server()
    async with running(server) as run:
        dispatcher = Dispatcher(await registry(run, server))
        looked, picture, refused, missing = await dispatcher.dispatch(
            calls(
                ("lookup", '{"word": "bee"}'),
                ("picture", "{}"),
                ("refuse", '{"reason": "closed on Sundays"}'),
                ("lookup", '{"wrd": "bee"}'),
            )
        )
    assert (looked.status, looked.content) == ("ok", "an insect that makes honey")
    assert picture.status == "ok"
    assert picture.content.splitlines() == [
        "a picture of a bee:",
        "[image of type image/png, 8 bytes: not shown]",
        "[resource file:///bee.txt]",
        "bees are insects",
    ]
    assert refused.status == "error"
    assert refused.content == (
        "Error: tool 'refuse' of MCP server 't' reported an error: "
        "Error executing tool refuse: refused: closed on Sundays"
    )
    # Checked before the call: the schema's required argument is missing.
    assert missing.status == "error"
    assert "argument 'word': Field required" in missing.content


async def test_a_protocol_error_is_the_call_s_error_observation() -> None:
    server = time_server()
    async with running(server) as run:
        with pytest.raises(ModelRetry) as info:  # the message the observation carries
            await run.call("time", "no_such_tool", {})
    assert str(info.value) == (
        "MCP server 'time' refused the call to 'no_such_tool': Unknown tool: no_such_tool "
        "(error -32602)"
    )


# --- dispatch's semantics hold: timeouts, ordering, parallelism, the journal ---------


async def test_a_slow_call_times_out_is_cancelled_and_the_server_goes_on() -> None:
    server = sdk_server(tools={"slow": McpToolSettings(timeout=0.3)})
    async with running(server) as run:
        dispatcher = Dispatcher(await registry(run, server))
        began = time.perf_counter()
        timed_out = await one(dispatcher, "slow", '{"seconds": 30}')
        waited = time.perf_counter() - began
        after = await one(dispatcher, "lookup", '{"word": "hive"}')
    assert timed_out.status == "timeout"
    assert timed_out.content == "Error: tool 'slow' timed out after 0.3s and was cancelled."
    assert waited < 5  # not the 30 s the server would have slept
    assert (after.status, after.content) == ("ok", "where bees live")


async def test_a_call_past_its_time_is_stopped_in_its_server_which_goes_on(
    tmp_path: Path,
) -> None:
    """The server is asked to cancel the call (MCP's ``notifications/cancelled``), and
    does: the call never ends there. A call trusted as read-only does not retire its
    server: the next calls go to the same process."""
    notes = tmp_path / "notes.txt"
    trusted = McpToolSettings(timeout=0.3, side_effects=False)
    server = sdk_server(notes=notes, tools={"append_note": trusted})
    async with running(server) as run:
        pid = await run.call("t", "pid", {})
        dispatcher = Dispatcher(await registry(run, server))
        cut = await one(dispatcher, "append_note", '{"text": "cut", "delay": 1.0}')
        # Longer than the call cut off would have taken, had its server gone on with it.
        assert await run.call("t", "slow", {"seconds": 1.2}) == "slept 1.2s"
        assert await run.call("t", "pid", {}) == pid
    assert cut.status == "timeout"
    assert [line.split()[:2] for line in notes.read_text().splitlines()] == [
        ["start", "cut"],
        ["slow", "1.2"],
    ]


async def test_side_effects_run_one_at_a_time_in_order_and_reads_together(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    server = sdk_server(notes=notes)
    async with running(server) as run:
        dispatcher = Dispatcher(await registry(run, server))
        observations = await dispatcher.dispatch(
            calls(
                ("append_note", '{"text": "first", "delay": 0.2}'),
                ("gather", '{"count": 2}'),
                ("append_note", '{"text": "second", "delay": 0.2}'),
                ("gather", '{"count": 2}'),
            )
        )
    assert [o.status for o in observations] == ["ok"] * 4
    assert [o.tool_call_id for o in observations] == ["c0", "c1", "c2", "c3"]
    events = [line.split()[:2] for line in notes.read_text().splitlines()]
    assert events == [["start", "first"], ["end", "first"], ["start", "second"], ["end", "second"]]
    # The two reads were in the server at once: one after the other, neither meets.
    assert [observations[1].content, observations[3].content] == ["met 2"] * 2


async def test_side_effecting_calls_are_journaled_and_reads_are_not(tmp_path: Path) -> None:
    server = sdk_server(notes=tmp_path / "notes.txt")
    journal = MemoryJournal()
    async with running(server) as run:
        dispatcher = layered(await registry(run, server), journal=journal)
        await dispatcher.dispatch(
            calls(("set_flag", '{"name": "ready"}'), ("lookup", '{"word": "bee"}')), turn=1
        )
    kept = journal.recorded(1, "c0")
    assert kept is not None
    assert kept.tool == "set_flag"
    assert kept.status == "ok"
    assert journal.recorded(1, "c1") is None


# --- a server that dies --------------------------------------------------------------


async def test_a_dead_server_is_started_again_once_a_run_then_said_to_be_down() -> None:
    server = sdk_server()
    async with McpServers([server]) as live:
        with live.run() as run:
            dispatcher = Dispatcher(await registry(run, server))
            first = (await one(dispatcher, "pid")).content
            died = await one(dispatcher, "die")
            second = await one(dispatcher, "pid")
            died_again = await one(dispatcher, "die")
            down = await one(dispatcher, "lookup", '{"word": "bee"}')
        with live.run():  # another run may start it again
            third = await one(dispatcher, "pid")
    assert died.status == "error"
    assert died.content == (
        "Error: MCP server 't' stopped during the call to 'die'; whether the call did "
        "anything is unknown; it is started again for the next call"
    )
    assert second.status == "ok"
    assert second.content != first
    assert died_again.content.endswith("it stays down for the rest of this run")
    assert down.status == "error"
    assert down.content.startswith(
        "Error: cannot call 'lookup': MCP server 't' is down for the rest of this run: it exited"
    )
    assert third.status == "ok"
    assert third.content not in (first, second.content)


async def test_a_call_to_a_server_found_dead_goes_to_it_started_again() -> None:
    """A server that died between calls never got the next one: it is sent to the
    server started again, not reported as lost."""
    server = sdk_server()
    async with running(server) as run:
        dispatcher = Dispatcher(await registry(run, server))
        pid = int((await one(dispatcher, "pid")).content)
        session = await run.servers.session("t", run.restarted)
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(MEET_LIMIT_S):
            while not session.ended:  # noqa: ASYNC110 - its end is seen
                await asyncio.sleep(0.01)
        after = await one(dispatcher, "pid")
    assert after.status == "ok"
    assert int(after.content) != pid


# --- starting: failures, timeouts, HTTP ----------------------------------------------


@pytest.mark.parametrize(
    ("server", "expected"),
    [
        (
            McpServer(name="t", command="no-such-mcp-server-command"),
            "MCP server 't' cannot be started: [Errno 2] No such file or directory: "
            "'no-such-mcp-server-command'",
        ),
        (  # it said 'No such file or directory: 'python -m mcp_server_time''
            McpServer(name="t", command="python -m mcp_server_time"),
            "MCP server 't' cannot be started: [Errno 2] no such command (a program and its "
            "arguments go apart: 'python', args ['-m', 'mcp_server_time']): 'python -m "
            "mcp_server_time'",
        ),
        (
            sdk_server(args=("--fail-at-start",)),
            "MCP server 't' could not be started: it exited with status 1 before it listed "
            "its tools (it said: the test server was told to fail at start)",
        ),
        (
            McpServer(
                name="t", command=sys.executable,
                args=("-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"),
            ),
            "MCP server 't' could not be started: it ended by signal SIGTERM before it "
            "listed its tools",
        ),
        (
            McpServer(
                name="t", command=sys.executable, args=("-c", "import time; time.sleep(60)"),
                start_timeout=0.5,
            ),
            "MCP server 't' did not start and list its tools within 0.5s, its start_timeout",
        ),
        (  # it said 'No such file or directory: ...', as for a command not found
            sdk_server(cwd="/no-such-folder-for-mcp"),
            "MCP server 't' cannot be started: [Errno 2] no such folder to run in (its cwd): "
            "'/no-such-folder-for-mcp'",
        ),
    ],
    ids=[
        "no such command", "arguments in the command", "exits at start", "killed at start",
        "never answers", "no folder",
    ],
)  # fmt: skip
@pytest.mark.both_loops  # uvloop's error names neither the command nor the folder
async def test_a_server_that_does_not_start_says_why_and_leaves_nothing(
    server: McpServer, expected: str
) -> None:
    before = child_pids()
    async with running(server) as run:
        with pytest.raises(McpServerError) as info:
            await run.listed("t")
        assert expected in str(info.value)
        assert child_pids() - before == set()


async def test_a_server_that_does_not_start_is_logged_once_whoever_waited_on_it() -> None:
    """A planner that goes on without a role's tools, its server down, left no word of
    why (the role's workers say it, when it plans one)."""
    server = McpServer(name="t", command="no-such-mcp-server-command")
    with structlog.testing.capture_logs() as entries:
        async with running(server) as run:
            tried = await asyncio.gather(run.listed("t"), run.listed("t"), return_exceptions=True)
    assert all(isinstance(each, McpServerError) for each in tried)
    [entry] = [e for e in entries if e["event"] == "mcp.server_not_started"]
    assert (entry["server"], entry["log_level"]) == ("t", "warning")
    assert entry["error"].startswith("cannot be started: [Errno 2] No such file or directory")


def test_counting_child_processes_passes_over_a_thread_that_ended_after_it_was_listed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    listed: list[str] = []
    ended = threading.Thread(target=lambda: listed.extend(os.listdir("/proc/self/task")))
    ended.start()
    ended.join()
    assert str(ended.native_id) in listed  # the listing names a thread that is gone now
    monkeypatch.setattr(os, "listdir", lambda path: listed)
    counted = child_pids()
    monkeypatch.undo()
    assert counted <= child_pids()


@pytest.fixture(scope="module")
def web_url() -> Iterator[str]:
    """The URL of one HTTP test server (its token ``s3cret``) for the tests that neither
    stop it nor leave anything in it: a server of their own would be no better."""
    with http_test_server("s3cret") as url:
        yield url


async def test_a_streamable_http_server_gets_its_headers(web_url: str) -> None:
    good = McpServer(name="web", url=web_url, headers={"Authorization": "Bearer s3cret"})
    bad = McpServer(name="nope", url=web_url, headers={"Authorization": "Bearer wrong"})
    async with running(good, bad) as run:
        dispatcher = Dispatcher(await registry(run, good))
        looked = await one(dispatcher, "lookup", '{"word": "hive"}')
        with pytest.raises(McpServerError) as info:
            await run.listed("nope")
    assert (looked.status, looked.content) == ("ok", "where bees live")
    assert str(info.value) == (
        "MCP server 'nope' could not be started: Server returned an error response "
        "(HTTP 401 Unauthorized)"
    )


async def test_a_streamable_http_server_that_went_away_is_reached_again_once() -> None:
    """The connection to a server that went away is made again once a run: it says
    the server cannot be reached, and then that it is down; never that it will be
    started again while the same dead connection is used."""
    with http_test_server("s3cret") as url:
        web = McpServer(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            dispatcher = Dispatcher(await registry(run, web))
            died = await one(dispatcher, "die")
            unreachable = await one(dispatcher, "lookup", '{"word": "bee"}')
            down = await one(dispatcher, "lookup", '{"word": "bee"}')
    assert died.content == (  # not 'stopped': a connection may go while its server runs on
        "Error: MCP server 'web' lost its connection during the call to 'die'; whether the "
        "call did anything is unknown; it is started again for the next call"
    )
    assert unreachable.content == (
        f"Error: cannot call 'lookup': MCP server 'web' could not be started: cannot connect "
        f"to {url} (ConnectError: All connection attempts failed)"
    )
    assert down.content.startswith(
        "Error: cannot call 'lookup': MCP server 'web' is down for the rest of this run"
    )


async def test_a_streamable_http_server_back_after_going_away_is_reached_again() -> None:
    with http_test_server("s3cret") as url:
        web = McpServer(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            dispatcher = Dispatcher(await registry(run, web))
            await one(dispatcher, "die")
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            # Gone before it comes back: a dying server still listening would take the
            # new one's connection test, and the new one would find the port in use.
            await asyncio.to_thread(_closed, port)
            with http_test_server("s3cret", port=port):  # back, at the same address
                back = await one(dispatcher, "lookup", '{"word": "hive"}')
                await one(dispatcher, "die")
            down = await one(dispatcher, "lookup", '{"word": "hive"}')
    assert (back.status, back.content) == ("ok", "where bees live")
    assert down.content == (
        "Error: cannot call 'lookup': MCP server 'web' is down for the rest of this run: "
        "its connection was lost, and was started again once already"
    )


async def test_a_call_no_connection_could_take_was_not_run_and_is_told_so() -> None:
    """A server gone between two calls: the next call's message could not be connected
    to it, so it was not run (it was told 'whether the call did anything is unknown'):
    it goes again in a new connection, whose start says why it cannot be made."""
    with http_test_server("s3cret") as url:
        web = McpServer(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            pid = int(await run.call("web", "pid", {}))
            os.kill(pid, signal.SIGKILL)
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            await asyncio.to_thread(_closed, port)
            with pytest.raises(ModelRetry) as unsent:
                await run.call("web", "append_note", {"text": "x"})
    assert unsent.value.message == (
        f"cannot call 'append_note': MCP server 'web' could not be started: cannot connect "
        f"to {url} (ConnectError: All connection attempts failed)"
    )


@pytest.mark.parametrize("variable", ["HTTP_PROXY", "ALL_PROXY"])
async def test_a_streamable_http_server_is_reached_through_the_environment_s_proxy(
    monkeypatch: pytest.MonkeyPatch, variable: str, web_url: str
) -> None:
    """The proxy ``HTTP_PROXY`` (or ``ALL_PROXY``) names is what a connection goes
    through, as the SDK's own client does: here nothing listens there, so the server
    cannot be reached. (The transport that tells a call never sent was mounted for
    every URL, in ALL_PROXY's place: that proxy went unused.)"""
    with socket.socket() as spare:  # a port nothing listens on
        spare.bind(("127.0.0.1", 0))
        proxy = f"http://127.0.0.1:{spare.getsockname()[1]}"
    for name in ("HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    monkeypatch.setenv(variable, proxy)
    web = McpServer(name="web", url=web_url, headers={"Authorization": "Bearer s3cret"})
    async with running(web) as run:
        with pytest.raises(ModelRetry) as through_it:
            await run.call("web", "lookup", {"word": "bee"})
    assert through_it.value.message == (
        f"cannot call 'lookup': MCP server 'web' could not be started: cannot connect to "
        f"{web_url} (ConnectError: All connection attempts failed)"
    )


async def test_a_call_in_a_session_its_server_forgot_goes_again_in_a_new_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A server that no longer knows the session (it restarted, between two calls)
    answers a call in it 404, which MCP says is a call not run and a session to start
    anew: the call goes again in a new session, once (it was told 'whether the call did
    anything is unknown'), a side-effecting one run once. Forgotten again, the run's
    one start again spent, a call says it was not run. The session lost is not ended
    (the SDK's end of it logged a warning, 'Session termination failed: ...', which a
    program without logging configured prints)."""
    notes = tmp_path / "notes.txt"
    with http_test_server("s3cret", legacy=True, notes=notes) as url:  # sessions, as before 2026
        web = McpServer(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            assert await run.call("web", "lookup", {"word": "bee"}) == "an insect that makes honey"
            await asyncio.to_thread(forget_sessions, url, "s3cret")
            assert await run.call("web", "append_note", {"text": "once"}) == "noted once"
            assert await run.call("web", "lookup", {"word": "hive"}) == "where bees live"
            await asyncio.to_thread(forget_sessions, url, "s3cret")
            with pytest.raises(ModelRetry) as forgotten:
                await run.call("web", "append_note", {"text": "never"})
    assert [line.split()[:2] for line in notes.read_text().splitlines()] == [
        ["start", "once"],
        ["end", "once"],
    ]
    assert forgotten.value.message == (
        "cannot call 'append_note': MCP server 'web' is down for the rest of this run: it "
        "no longer knew its session (it answered HTTP 404: it restarted, or ended it), "
        "and was started again once already"
    )
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


async def test_a_call_its_server_forgets_in_a_new_session_too_says_it_was_not_run() -> None:
    """A server that knows no session a call comes in (a replica behind a balancer that
    never saw it) answers the call 404 in its new session too: it was not run, and the
    server, started again once, stays down for the run."""
    with http_test_server("s3cret", legacy=True) as url:  # sessions, as before 2026
        web = McpServer(name="web", url=url, headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            await run.call("web", "pid", {})
            await asyncio.to_thread(forget_sessions, url, "s3cret", at_calls=True)
            with pytest.raises(ModelRetry) as twice:
                await run.call("web", "append_note", {"text": "x"})
    assert twice.value.message == (
        "MCP server 'web' no longer knew its session (it answered HTTP 404: it restarted, "
        "or ended it) as it was sent the call to 'append_note'; the call was not run; it "
        "stays down for the rest of this run"
    )


async def test_a_session_is_ended_where_its_messages_went_past_a_redirect(
    tmp_path: Path,
) -> None:
    """A url the server redirects within its origin (``/mcp/`` to ``/mcp``, as the SDK's
    server app does), which the SDK follows for every message: the session's end (an
    HTTP ``DELETE``) goes where the messages went (it went to the url, was answered 307,
    and the session was left open in the server)."""
    notes = tmp_path / "notes.txt"
    with http_test_server("s3cret", legacy=True, notes=notes) as url:  # a session
        web = McpServer(name="web", url=url + "/", headers={"Authorization": "Bearer s3cret"})
        async with running(web) as run:
            assert await run.call("web", "lookup", {"word": "bee"}) == "an insect that makes honey"
    assert notes.read_text().splitlines() == ["delete /mcp"]


def _closed(port: int) -> None:
    """Wait until nothing listens on ``port`` of 127.0.0.1 any more."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        except OSError:
            return
        time.sleep(0.05)
    raise AssertionError(f"something still listens on port {port}")


# --- nothing keeps running ---------------------------------------------------------


async def test_the_processes_end_with_the_block_after_cancellation_and_errors() -> None:
    before = child_pids()
    server = sdk_server()

    async def hold(started: asyncio.Event) -> None:
        async with running(server) as run:
            dispatcher = Dispatcher(await registry(run, server))
            started.set()
            await one(dispatcher, "slow", '{"seconds": 60}')

    started = asyncio.Event()
    task = asyncio.create_task(hold(started))
    await started.wait()
    assert len(child_pids() - before) == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert child_pids() - before == set()

    class Boom(Exception):
        pass

    async def fail() -> None:
        async with running(server) as run:
            await run.listed("t")
            assert len(child_pids() - before) == 1
            raise Boom

    with pytest.raises(Boom):  # itself, not wrapped in the block's task group
        await fail()
    assert child_pids() - before == set()


async def test_an_mcp_tool_called_outside_a_run_is_an_error_observation() -> None:
    server = sdk_server()
    async with McpServers([server]) as live:
        with live.run() as run:
            tools = await registry(run, server)
        observation = await one(Dispatcher(tools, policy=DispatchPolicy()), "pid")
    assert observation.status == "error"
    assert "MCP tools are called in a run of their Executor" in observation.content


# --- the values ---------------------------------------------------------------------


def test_a_server_never_shows_its_env_or_header_values() -> None:
    stdio = McpServer(name="git", command="uvx", args=("mcp-server-git",), env={"TOKEN": "t0k"})
    http = McpServer(name="web", url="http://127.0.0.1:1/mcp", headers={"Authorization": "B x"})
    assert repr(stdio) == (
        "McpServer('git', command='uvx', args=('mcp-server-git',), env={'TOKEN': ***})"
    )
    assert (
        repr(http)
        == "McpServer('web', url='http://127.0.0.1:1/mcp', headers={'Authorization': ***})"
    )
    assert "t0k" not in repr(stdio)
    assert "B x" not in repr(http)


async def test_a_password_or_a_token_in_a_server_s_url_is_a_secret() -> None:
    """A password in a streamable-HTTP server's URL, or a credential in its query
    (``?token=``), is not shown by its repr, and is masked in what a run shows while its
    servers are held, as an endpoint's URL's is."""
    url = "http://bob:hunter2-pass@127.0.0.1:1/mcp?token=tok-5ecret-value"
    server = McpServer(name="web", url=url)
    assert repr(server) == (
        "McpServer('web', url='http://bob:[password hidden]@127.0.0.1:1/mcp"
        "?token=[password hidden]')"
    )
    async with McpServers([server]):
        shown = masked("the server said: tok-5ecret-value, hunter2-pass")
    assert shown == "the server said: [password hidden], [password hidden]"


async def test_a_token_written_as_an_http_urls_user_is_a_secret() -> None:
    """``https://TOKEN@host/mcp`` in a server's ``url`` or its ``args``: the HTTP client
    sends the token as the request's credentials, as a model's ``base_url``'s, so its
    repr and what a run shows while it is held mask it; a database URL's user among its
    args stays a name."""
    token = "tok-5ecret-value"
    http = McpServer(name="web", url=f"https://{token}@127.0.0.1:1/mcp")
    assert repr(http) == "McpServer('web', url='https://[password hidden]@127.0.0.1:1/mcp')"
    args = ("mcp-remote", f"--url=https://{token}@h/mcp", "postgresql://reporting@db/shop")
    stdio = McpServer(name="remote", command="npx", args=args)
    assert token not in repr(stdio)
    assert "postgresql://reporting@db/shop" in repr(stdio)
    async with McpServers([http]):
        assert masked(f"it said: {token}") == "it said: [password hidden]"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"name": "t"}, "give a command (a stdio server) or a url"),
        ({"name": "t", "command": "x", "url": "http://127.0.0.1/"}, "not both"),
        ({"name": "a b", "command": "x"}, "a name uses only letters"),
        (
            {"name": "t", "command": "x", "start_timeout": 0},
            "McpServer.start_timeout: must be positive (got 0)",
        ),
        # Types a type checker would catch, each told as the server is made, not as it
        # starts (its args spelt letter by letter, a tool's settings unread), at its
        # field as every Settings' are, its values unshown (they may hold secrets).
        (
            {"name": "t", "command": "x", "args": "--token s3cret"},
            "McpServer.args: must be of type tuple[str, ...] (got str)",
        ),
        (
            {"name": "t", "command": "x", "args": ("--port", 8080)},
            "McpServer.args: must be of type tuple[str, ...] (got tuple of int, str)",
        ),
        (
            {"name": "t", "command": "x", "secrets": "s3cret"},
            "McpServer.secrets: must be of type tuple[str, ...] (got str)",
        ),
        (
            {"name": "t", "command": "x", "env": {"TOKEN": 123456}},
            "McpServer.env: must be of type dict[str, str] (got dict of int)",
        ),
        (
            {"name": "t", "url": "http://h/", "headers": None},
            "McpServer.headers: must be of type dict[str, str] (got NoneType)",
        ),
        (
            {"name": "t", "command": ["python", "-m", "x"]},
            "McpServer.command: must be of type str | None (got list of str)",
        ),
        (
            {"name": "t", "command": "x", "cwd": Path("/")},
            "McpServer.cwd: must be of type str | None (got PosixPath)",
        ),
        (
            {"name": "t", "command": "x", "start_timeout": "30"},
            "McpServer.start_timeout: must be of type float (got str)",
        ),
        (
            {"name": "t", "command": "x", "tools": {"write": {"approval": True}}},
            "McpServer.tools: must be of type dict[str, McpToolSettings] (got dict of dict)",
        ),
        ({"name": 7, "command": "x"}, "McpServer.name: must be of type str (got int)"),
        # It said "Permission denied: ''" as it started.
        ({"name": "t", "command": " "}, "MCP server 't': its command is empty"),
        (
            {"name": "t", "command": "x", "max_connections": 4},
            "MCP server 't': headers and max_connections are for a streamable-HTTP server",
        ),
        (
            {"name": "t", "url": "http://h/mcp", "max_connections": 0},
            "McpServer.max_connections: must be at least 1 (got 0)",
        ),
        # A url no request can go to failed as the server started, in httpx's words
        # (UnsupportedProtocol, OverflowError), a password it held shown as written.
        (
            {"name": "t", "url": "bob:s3cret-pw-0123@h/mcp"},
            "MCP server 't': url 'bob:[password hidden]@h/mcp' has no http:// or https:// "
            "(write 'http://bob:[password hidden]@h/mcp')",
        ),
        (
            {"name": "t", "url": "http://h:99999/mcp?token=s3cret-token-01"},
            "MCP server 't': url 'http://h:99999/mcp?token=[password hidden]' cannot be read "
            "as a URL (Port out of range 0-65535)",
        ),
        (
            {"name": "t", "url": "http://h/mcp", "headers": {"Authorization": "Bearer s3cret\r"}},
            "MCP server 't': a header's value begins or ends with a space or a line break",
        ),
        # httpx's words as it started: 'Illegal header name', or for a letter that is
        # not ASCII, 'failed: UnicodeEncodeError ...'.
        (
            {"name": "t", "url": "http://h/mcp", "headers": {"Authorization: Bearer s3cret": ""}},
            "MCP server 't': a header's name holds ':' after 'Authorization': a name is letters, "
            "digits and !#$%&'*+-.^_`|~ alone",
        ),
        (
            {"name": "t", "url": "http://h/mcp", "headers": {"Authörization": "Bearer s3cret"}},
            "MCP server 't': a header's name holds 'ö' after 'Auth'",
        ),
        (
            {"name": "t", "url": "http://h/mcp", "headers": {"Authorization": "Bearer s3cret…"}},
            "MCP server 't': a header's value holds a character that is not ASCII, which no "
            "HTTP header carries",
        ),
    ],
)
def test_a_server_is_declared_right_or_told_what_to_fix(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)) as told:
        McpServer(**options)
    assert "s3cret" not in str(told.value)
    assert "123456" not in str(told.value)


def test_a_server_s_args_given_as_a_list_are_kept_as_a_tuple() -> None:
    """As users write them: the server equals the one written with a tuple, and the
    lists changed afterwards change nothing of it (its secrets masked still)."""
    token = "s3cret-token-01"
    args, secrets = ["-m", "x", "--token", token], [token]
    server = McpServer(name="t", command="python", args=args, secrets=secrets)
    args.append("--more")
    secrets.clear()
    assert (server.args, server.secrets) == (("-m", "x", "--token", token), (token,))
    assert server == McpServer(
        name="t", command="python", args=("-m", "x", "--token", token), secrets=(token,)
    )
    assert token not in repr(server)


def test_a_url_written_with_a_space_at_an_end_is_reached_without_it() -> None:
    """A url its check read stripped (a space before it failed as 'Request URL is
    missing an 'http://' or 'https://' protocol', one after it as 'Not Found (HTTP
    404 Not Found)': it was sent as written)."""
    server = McpServer(name="t", url=" http://127.0.0.1/mcp ")
    assert server.url == "http://127.0.0.1/mcp"


def test_servers_made_from_one_dict_changed_between_them_keep_their_own() -> None:
    """A loop that sets one dict's token for each server: each server held that dict,
    and all of them sent the last token."""
    headers: dict[str, str] = {}
    env: dict[str, str] = {}
    made = []
    for name in ("a", "b"):
        headers["Authorization"] = env["TOKEN"] = f"token-of-{name}"
        made.append(McpServer(name=name, url="http://127.0.0.1/mcp", headers=headers))
        made.append(McpServer(name=name, command="python", env=env))
    assert [s.headers or s.env for s in made] == [
        {"Authorization": "token-of-a"},
        {"TOKEN": "token-of-a"},
        {"Authorization": "token-of-b"},
        {"TOKEN": "token-of-b"},
    ]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        # "false" would ask
        ({"approval": "false"}, "McpToolSettings.approval: must be of type bool (got str)"),
        ({"side_effects": "no"}, "McpToolSettings.side_effects: must be of type bool | None"),
        ({"exclusive": 3}, "McpToolSettings.exclusive: must be of type str | None (got int)"),
        ({"timeout": "5"}, "McpToolSettings.timeout: must be of type float | None (got str)"),
        ({"timeout": True}, "McpToolSettings.timeout: must be of type float | None (got bool)"),
        ({"timeout": 0}, "McpToolSettings.timeout: must be positive (got 0)"),
    ],
)
def test_a_tool_s_settings_are_made_right_or_told_what_to_fix(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        McpToolSettings(**options)


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("time:get_current_time", ("time", "get_current_time")),
        ("time:*", ("time", "*")),
        ("time:", ("time", "")),
        ("tools.clock:now", None),  # an import path: no server of that name
        ("lookup", None),
    ],
)
def test_a_role_names_an_mcp_tool_by_a_declared_server(
    ref: str, expected: tuple[str, str] | None
) -> None:
    assert mcp_ref(ref, ["time"]) == expected
