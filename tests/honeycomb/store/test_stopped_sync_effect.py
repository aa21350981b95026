"""A run stopped (Ctrl-C, a cancelled task) while a sync side-effecting tool runs waits
for the tool's thread to end, as it cannot be interrupted: what the call did is known
then, and kept in the journal, so the resumed worker is told how it ended, not that
it may or may not have taken effect."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from honeycomb import Executor, Role, RunResult, tool
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call
from tests.support.stores import Where

pytestmark = pytest.mark.timeout(60)


def sends_once() -> FunctionModel:
    def answer(request: ModelRequest) -> Any:
        if any(isinstance(m, AssistantMessage) for m in request.messages):
            return "done"
        return AssistantMessage(tool_calls=(call("send", {"to": "ana"}, id="c1"),))

    return FunctionModel(answer)


def observations(result: RunResult) -> list[tuple[str, str]]:
    worker = result.subtasks["s1"].worker
    assert worker is not None
    messages = worker.transcript.messages
    return [(m.status, m.content) for m in messages if isinstance(m, ToolMessage)]


async def test_a_sync_call_the_run_waited_for_as_it_stopped_is_answered_as_it_ended(
    store: Where,
) -> None:
    sent: list[str] = []
    running, release = threading.Event(), threading.Event()

    @tool(side_effects=True)
    def send(to: str) -> str:
        """Send a message."""
        running.set()
        release.wait(30)
        sent.append(to)
        return f"sent to {to}"

    runs = RunStore(store)
    executor = Executor([Role(name="w", tools=("send",))], sends_once(), tools=[send], store=runs)
    run = asyncio.create_task(executor.run("t", subtasks=[("w", "send")], run_id="r1"))
    await asyncio.to_thread(running.wait, 30)
    run.cancel()  # as Ctrl-C does: the call's thread is waited for
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await run
    found = runs.find("r1")
    assert found is not None
    assert found.status == "interrupted"
    result = await executor.resume("r1")
    await runs.aclose()
    assert result.status == "ok"
    assert sent == ["ana"]
    assert observations(result) == [("ok", "sent to ana")]
