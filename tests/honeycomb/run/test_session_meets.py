"""A session's turns with one more feature on: secrets, output guards while streaming,
a budget that the conversation's summary spends, a turn cancelled as it is answered,
and approvals; each feature's promises checked alongside the conversation's."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from honeycomb import Executor, Role, add_secret
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from tests.support.model_requests import Answer
from tests.support.stores import Where, query

KEY = "sk-session-0123456789abcdef"


def _writer(
    answer: Callable[[ModelRequest], Awaitable[Answer] | Answer], **options: Any
) -> Executor:
    """One writer, given the message as its subtask, its answer the run's."""
    return Executor(
        [Role(name="writer")],
        FunctionModel(answer),
        planner=lambda task: [("writer", task)],
        aggregator="concat",
        **options,
    )


async def test_a_secret_in_a_message_is_kept_masked_and_its_turn_still_goes_on(
    store: Where,
) -> None:
    add_secret(KEY, "api key")
    hold = asyncio.Event()
    started = asyncio.Event()

    async def answer(request: ModelRequest) -> str:
        if not hold.is_set():
            started.set()
            await hold.wait()
        return "noted"

    executor = _writer(answer, store=store)
    session = executor.session("ann")
    cut = asyncio.create_task(session.run(f"My key is {KEY}, keep it safe."))
    await started.wait()
    cut.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cut
    rows = query(store, "SELECT message FROM session_turns")
    assert rows == [("My key is [api key hidden], keep it safe.",)]
    # The turn cut off goes on as kept: its run's task is the message, masked alike.
    hold.set()
    result = await session.run("And now?", unfinished="resume")
    assert result.status == "ok"
    turns = await session.turns()
    assert [t.status for t in turns] == ["ok", "ok"]
    assert KEY not in repr(turns)
    assert executor.store is not None
    executor.store.close()
