"""A run stopping (cancelled, by its caller or its caller's time limit) while its
worker's side-effecting MCP call is under way (or, cut off by its own time limit, waits
for its server to stop) in a server that another run of the Executor's block is using:
the run ends at once, not once the other run's call is done; the server is stopped
(the call cut off may go on in it) and started anew for the next call. Against the
SDK-written test server, run as a real subprocess."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import runtime.tools.mcp
from honeycomb import Executor, Role, Subtask, ToolMessage
from honeycomb.testing import FunctionModel
from honeycomb.tools import McpToolSettings
from runtime import ModelRequest
from runtime.concurrency import within
from runtime.testing import call
from tests.support.mcp_servers import child_pids, sdk_server

pytestmark = pytest.mark.timeout(120)

CLERK = Role(name="clerk", tools=["t:append_note", "t:slow", "t:pid"])

DRAIN_S = 60.0
"""The retired server's drain, made long: a run waiting for it would be plain to see."""

PROMPT_S = 15.0
"""Time the stopping run has to end (its server's graceful stop takes a moment)."""


def act(request: ModelRequest) -> object:
    """The clerk calls what its instruction names, then answers with what it saw."""
    seen = [m.content for m in request.messages if isinstance(m, ToolMessage)]
    if seen:
        return seen[-1]
    instruction = str(request.messages[-1].content)
    if "write" in instruction:
        return call("append_note", {"text": "w", "delay": 60, "heedless": True})
    if "read" in instruction:
        return call("slow", {"seconds": 30})
    return call("pid")


def written(notes: Path) -> str:
    return notes.read_text() if notes.exists() else ""


def one(instruction: str) -> list[Subtask]:
    return [Subtask(id="s", role="clerk", instruction=instruction)]


async def noted(notes: Path, line: str, *running: asyncio.Task[Any]) -> None:
    """Return once the server has written ``line`` to its notes (a call is in)."""
    with within(30):  # a failsafe: the note is the signal
        while line not in written(notes):
            assert not any(task.done() for task in running), "a run ended first"
            await asyncio.sleep(0.01)


async def stopped_at(stop: str, running: asyncio.Task[Any], draining: asyncio.Event) -> None:
    """Stop ``running``: cancel it (once its call, cut off by its own time limit, waits
    for its server to stop, for ``drain``), or let the caller's time limit pass."""
    if stop == "drain":
        with within(30):  # a failsafe: the event is the signal
            await draining.wait()
    if stop != "timeout":
        running.cancel()
    done, _ = await asyncio.wait({running}, timeout=PROMPT_S)
    assert running in done, "the run waited for the other run's call to end"
    with pytest.raises(TimeoutError if stop == "timeout" else asyncio.CancelledError):
        await running


@pytest.mark.parametrize("stop", ["cancelled", "timeout", "drain"])
async def test_a_run_stopping_mid_call_does_not_wait_for_another_run_s_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: str
) -> None:
    """``drain``: the call was cut off by its own time limit first, and waits for the
    server to stop once the other run's call ends, as such a call does, when its run is
    cancelled: that wait ends then."""
    monkeypatch.setattr(runtime.tools.mcp, "_DRAIN_S", DRAIN_S)
    draining = asyncio.Event()
    waited = runtime.tools.mcp._stopped

    async def stopped(retired: Any) -> None:
        draining.set()
        await waited(retired)

    monkeypatch.setattr(runtime.tools.mcp, "_stopped", stopped)
    notes = tmp_path / "notes.txt"
    before = child_pids()
    limit = {"append_note": McpToolSettings(timeout=0.3)} if stop == "drain" else {}
    server = sdk_server(notes=notes, tools=limit)

    async with Executor([CLERK], FunctionModel(act), mcp_servers=[server]) as ex:

        async def write() -> object:
            if stop != "timeout":
                return await ex.run("t", subtasks=one("write"))
            async with asyncio.timeout(1.0):  # a service's time for a request
                return await ex.run("t", subtasks=one("write"))

        reading = asyncio.create_task(ex.run("t", subtasks=one("read")))
        await noted(notes, "slow 30", reading)
        writing = asyncio.create_task(write())
        await noted(notes, "start w", writing)
        await stopped_at(stop, writing, draining)
        read = await reading
        again = await ex.run("t", subtasks=one("pid"))
    assert child_pids() - before == set()
    # The reader's call went with the server, and was told so.
    assert "stopped during the call to 'slow'" in read.answer_text
    assert "it is started again for the next call" in read.answer_text
    assert again.status == "ok"
    assert again.subtasks["s"].text.isdigit()  # the server, started anew, answers
    assert "end w" not in written(notes)
