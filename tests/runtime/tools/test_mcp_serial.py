"""A side-effecting MCP call cut off (its time limit, a cancellation) may go on in its
server, which was only asked to stop it: the next side-effecting call must not overlap
it. Against the SDK-written test server run as a subprocess, through the real
dispatcher."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import runtime.tools.mcp
from runtime import McpServer, McpToolSettings, ModelRetry, ToolCall, ToolRegistry
from runtime.concurrency import TimedOut, within
from runtime.tools.mcp import McpRun, mcp_tools
from tests.support.dispatching import layered
from tests.support.mcp_servers import http_test_server, running, sdk_server

pytestmark = pytest.mark.timeout(120)


def written(notes: Path) -> str:
    """What the server wrote to its notes so far."""
    return notes.read_text() if notes.exists() else ""


async def noted(notes: Path, line: str) -> None:
    """Return once the server has written ``line`` to its notes (a call is in)."""
    with within(30):  # a failsafe: the note is the signal
        while line not in written(notes):  # noqa: ASYNC110 (a file has no event)
            await asyncio.sleep(0.01)


async def test_a_side_effecting_call_cut_off_is_not_overlapped_by_the_next(
    tmp_path: Path,
) -> None:
    """A side-effecting call past its time that its server carries on regardless is not
    overlapped by the worker's next side-effecting call: its server takes no more calls
    and stops once the calls under way in it end (another worker's read goes on to its
    answer), and the next call goes to it started anew. That start is not the run's one
    restart of a server that died."""
    notes = tmp_path / "notes.txt"
    server = sdk_server(notes=notes, tools={"append_note": McpToolSettings(timeout=0.3)})
    async with running(server) as run:
        tools = ToolRegistry(mcp_tools(server, await run.listed("t")).values())
        pid = await run.call("t", "pid", {})
        first = '{"text": "first", "delay": 1.0, "heedless": true}'
        writes = [
            ToolCall(id="a", name="append_note", arguments=first),
            ToolCall(id="b", name="append_note", arguments='{"text": "second"}'),
        ]
        async with asyncio.TaskGroup() as group:
            reading = group.create_task(
                layered(tools).dispatch(
                    [ToolCall(id="r", name="slow", arguments='{"seconds": 1.5}')]
                )
            )
            await noted(notes, "slow 1.5")
            wrote = await layered(tools).dispatch(writes)
        (read,) = reading.result()
        assert [seen.status for seen in wrote] == ["timeout", "ok"]
        assert (read.status, read.content) == ("ok", "slept 1.5s")
        lines = [line.split()[:2] for line in written(notes).splitlines()]
        assert lines.index(["end", "first"]) < lines.index(["start", "second"]), lines
        assert await run.call("t", "pid", {}) != pid  # started anew
        with pytest.raises(ModelRetry, match="it is started again for the next call"):
            await run.call("t", "die", {})
        assert await run.call("t", "lookup", {"word": "bee"}) == "an insect that makes honey"


async def test_a_call_under_way_holds_a_retired_server_only_so_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A retired server waits for the calls under way in it only so long once a call
    needs it started anew: a read that takes half a minute does not hold up the next
    side-effecting call for as long; it is cut off as the server stops, and says so."""
    monkeypatch.setattr(runtime.tools.mcp, "_DRAIN_S", 0.5)
    notes = tmp_path / "notes.txt"
    server = sdk_server(notes=notes, tools={"append_note": McpToolSettings(timeout=0.3)})
    async with running(server) as run:
        tools = ToolRegistry(mcp_tools(server, await run.listed("t")).values())
        first = '{"text": "first", "delay": 1.0, "heedless": true}'
        writes = [
            ToolCall(id="a", name="append_note", arguments=first),
            ToolCall(id="b", name="append_note", arguments='{"text": "second"}'),
        ]
        read_long = ToolCall(id="r", name="slow", arguments='{"seconds": 30}')
        async with asyncio.TaskGroup() as group:
            reading = group.create_task(layered(tools).dispatch([read_long]))
            await noted(notes, "slow 30")
            began = time.perf_counter()
            wrote = await layered(tools).dispatch(writes)
            took = time.perf_counter() - began
        (read,) = reading.result()
    assert [seen.status for seen in wrote] == ["timeout", "ok"]
    assert took < 15  # the stop's graces at most, not the read's 30 s
    assert read.status == "error"
    assert "stopped during the call to 'slow'" in read.content


async def test_a_side_effecting_call_cut_off_is_overlapped_by_no_later_call_of_any_tool(
    tmp_path: Path,
) -> None:
    """The worker's next side-effecting call, of another server's tool, does not overlap
    the call cut off either: that call ends once its server has stopped it (it finished
    the call first, here), as a side-effecting sync tool's call ends with its thread."""
    notes = tmp_path / "notes.txt"
    writer = sdk_server(notes=notes, tools={"append_note": McpToolSettings(timeout=0.3)})
    flagger = sdk_server("u", notes=notes)
    async with running(writer, flagger) as run:
        append_note = mcp_tools(writer, await run.listed("t"))["append_note"]
        set_flag = mcp_tools(flagger, await run.listed("u"))["set_flag"]
        writes = [
            ToolCall(
                id="a",
                name="append_note",
                arguments='{"text": "first", "delay": 1.0, "heedless": true}',
            ),
            ToolCall(id="b", name="set_flag", arguments='{"name": "second"}'),
        ]
        wrote = await layered(ToolRegistry([append_note, set_flag])).dispatch(writes)
    assert [seen.status for seen in wrote] == ["timeout", "ok"]
    lines = [line.split()[:2] for line in written(notes).splitlines()]
    assert lines.index(["end", "first"]) < lines.index(["flag", "second"]), lines


async def test_a_call_cut_off_in_a_server_already_retired_is_overlapped_by_no_later_call(
    tmp_path: Path,
) -> None:
    """Two workers' side-effecting calls of one server, both cut off: the second is cut
    off in a server the first retired already, and ends once that server has stopped
    too, so its worker's next call does not overlap it."""
    notes = tmp_path / "notes.txt"
    writer = sdk_server(notes=notes, tools={"append_note": McpToolSettings(timeout=0.2)})
    flagger = sdk_server("u", notes=notes)
    async with running(writer, flagger) as run:
        listed = await asyncio.gather(run.listed("t"), run.listed("u"))  # started together
        append_note = mcp_tools(writer, listed[0])["append_note"]
        set_flag = mcp_tools(flagger, listed[1])["set_flag"]
        tools = ToolRegistry([append_note, set_flag])

        async def worker(name: str, delay: float) -> list[str]:
            note = f'{{"text": "{name}", "delay": {delay}, "heedless": true}}'
            calls = [
                ToolCall(id="a", name="append_note", arguments=note),
                ToolCall(id="b", name="set_flag", arguments=f'{{"name": "{name}"}}'),
            ]
            return [seen.status for seen in await layered(tools, worker=name).dispatch(calls)]

        statuses = await asyncio.gather(worker("w1", 0.4), worker("w2", 0.6))
    assert statuses == [["timeout", "ok"], ["timeout", "ok"]]
    lines = [line.split()[:2] for line in written(notes).splitlines()]
    for name in ("w1", "w2"):
        assert lines.index(["end", name]) < lines.index(["flag", name]), lines


def at_most(url: str, connections: int) -> McpServer:
    """The HTTP test server at ``url``, so many calls under way at a time."""
    token = {"Authorization": "Bearer s3cret-token"}
    return McpServer(name="h", url=url, headers=token, max_connections=connections)


async def test_a_call_waiting_for_a_connection_retires_no_server_nor_goes_to_a_retired_one(
    tmp_path: Path,
) -> None:
    """With a server's max_connections under way, a side-effecting call cut off before
    it had a connection was never sent, yet its server was retired as for a call that
    may go on in it (started anew; the calls under way in it cut off once they had
    taken 10 seconds more). And a call that waited as a side-effecting call cut off
    retired the server was sent to it once its place came, as it stopped: it had lost
    its connection, whether it did anything unknown. It goes to the next session; so
    does one whose place comes once another call has started the server anew."""
    notes = tmp_path / "notes.txt"
    with http_test_server("s3cret-token", notes=notes) as url:
        async with running(at_most(url, 1)) as run:
            session = await run.ready("h", "slow")
            slow = asyncio.ensure_future(run.call("h", "slow", {"seconds": 0.6}))
            await noted(notes, "slow 0.6")
            with pytest.raises(TimedOut), within(0.1):
                await run.call("h", "append_note", {"text": "x"}, serial=True)
            assert await slow == "slept 0.6s"
            assert await run.ready("h", "lookup") is session
            assert "start x" not in written(notes)

            async def cut_off() -> None:
                with within(0.5):
                    await run.call("h", "append_note", {"text": "a", "delay": 5}, serial=True)

            first = asyncio.ensure_future(cut_off())
            await noted(notes, "start a")
            waiting = asyncio.ensure_future(run.call("h", "lookup", {"word": "bee"}))
            with pytest.raises(TimedOut):
                await first
            assert await waiting == "an insect that makes honey"

        async with running(at_most(url, 2)) as run:
            session = await run.ready("h", "slow")
            slow = asyncio.ensure_future(run.call("h", "slow", {"seconds": 1.2}))
            await noted(notes, "slow 1.2")

            async def cut_off_too() -> None:
                with within(0.3):
                    await run.call("h", "append_note", {"text": "b", "delay": 5}, serial=True)

            second = asyncio.ensure_future(cut_off_too())
            await noted(notes, "start b")
            waiting = asyncio.ensure_future(run.call("h", "lookup", {"word": "hive"}))
            await retired(run, "h")
            anew = asyncio.ensure_future(run.ready("h", "lookup"))  # started anew
            assert not slow.done()  # the waiting call's place is still to come
            assert await waiting == "where bees live"
            assert await anew is not session
            assert await slow == "slept 1.2s"
            with pytest.raises(TimedOut):
                await second


async def retired(run: McpRun, name: str) -> None:
    """Return once server ``name`` is retired (a side-effecting call cut off in it)."""
    with within(30):  # a failsafe: the flag is the signal
        while not run.servers._live[name].retired:  # noqa: ASYNC110 (no event to wait on)
            await asyncio.sleep(0.01)
