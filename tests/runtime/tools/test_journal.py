"""The journal of side-effecting calls, through the real Dispatcher: a call with a
recorded outcome never runs again; one whose outcome was lost runs again only if its
tool is idempotent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import pytest

from runtime import JournalEntry, MemoryJournal, ToolCall, ToolRegistry, tool
from runtime.testing import call
from tests.support.dispatching import layered


def registry(effects: list[str], *, idempotent: bool = False) -> ToolRegistry:
    @tool(side_effects=True, idempotent=idempotent)
    def send(to: str) -> str:
        """Send a message."""
        effects.append(to)
        return f"sent to {to}"

    @tool
    def read(key: str) -> str:
        """Read a value."""
        effects.append(f"read {key}")
        return key

    return ToolRegistry([send, read])


async def test_side_effecting_calls_are_journaled_with_intent_then_outcome() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    dispatcher = layered(registry(effects), journal=journal)
    [sent, read] = await dispatcher.dispatch(
        [call("send", {"to": "ana"}, id="c1"), call("read", {"key": "k"}, id="c2")], turn=3
    )
    assert (sent.status, read.status) == ("ok", "ok")
    assert journal.entries == {
        (3, "c1"): JournalEntry(
            tool="send", arguments='{"to": "ana"}', status="ok", content="sent to ana"
        )
    }


async def test_a_call_with_a_recorded_outcome_is_not_run_again() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    journal.entries[1, "c1"] = JournalEntry(
        tool="send", arguments='{"to": "ana"}', status="ok", content="sent to ana"
    )
    [observation] = await layered(registry(effects), journal=journal).dispatch(
        [call("send", {"to": "ana"}, id="c1")], turn=1
    )
    assert effects == []
    assert (observation.status, observation.content) == ("ok", "sent to ana")


async def test_a_lost_outcome_is_reported_unknown_and_not_run_again() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    journal.entries[1, "c1"] = JournalEntry(tool="send", arguments='{"to": "ana"}')  # intent only
    [observation] = await layered(registry(effects), journal=journal).dispatch(
        [call("send", {"to": "ana"}, id="c1")], turn=1
    )
    assert effects == []
    assert observation.status == "unknown"
    assert "may or may not have taken effect" in observation.content
    assert journal.entries[1, "c1"].status == "unknown"  # a second resume says the same


async def test_an_idempotent_tool_with_a_lost_outcome_runs_again() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    journal.entries[1, "c1"] = JournalEntry(tool="send", arguments='{"to": "ana"}')
    [observation] = await layered(registry(effects, idempotent=True), journal=journal).dispatch(
        [call("send", {"to": "ana"}, id="c1")], turn=1
    )
    assert effects == ["ana"]
    assert observation.status == "ok"


async def test_the_same_call_id_in_another_turn_is_another_call() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    journal.entries[1, "c1"] = JournalEntry(
        tool="send", arguments='{"to": "ana"}', status="ok", content="sent to ana"
    )
    await layered(registry(effects), journal=journal).dispatch(
        [call("send", {"to": "bo"}, id="c1")], turn=2
    )
    assert effects == ["bo"]


@pytest.mark.parametrize("ends", ["returns", "raises"])
async def test_a_sync_call_its_worker_stopped_keeps_how_it_ended(ends: str) -> None:
    """A sync side-effecting call's thread is waited for to its end when its worker is
    cancelled (Ctrl-C as it ran): how it ended is known, and kept, so a resumed worker
    is told it, not that it may or may not have taken effect."""
    running, release = threading.Event(), threading.Event()
    effects: list[str] = []

    @tool(side_effects=True)
    def send(to: str) -> str:
        """Send a message."""
        running.set()
        release.wait(10)
        effects.append(to)
        if ends == "raises":
            raise OSError("the mail server hung up after the message went")
        return f"sent to {to}"

    journal = MemoryJournal()
    dispatcher = layered(ToolRegistry([send]), journal=journal)
    dispatching = asyncio.ensure_future(
        dispatcher.dispatch([call("send", {"to": "ana"}, id="c1")], turn=1)
    )
    await asyncio.to_thread(running.wait, 10)
    dispatching.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await dispatching
    assert effects == ["ana"]
    kept = journal.entries[1, "c1"]
    if ends == "returns":
        assert (kept.status, kept.content) == ("ok", "sent to ana")
    else:
        assert kept.status == "error"
        assert "the mail server hung up" in kept.content
    [again] = await dispatcher.dispatch([call("send", {"to": "ana"}, id="c1")], turn=1)  # resumed
    assert effects == ["ana"]
    assert (again.status, again.content) == (kept.status, kept.content)


async def test_a_sync_call_its_worker_stopped_before_its_thread_took_it_up_runs_when_resumed() -> (
    None
):
    """A sync side-effecting call that waited for a thread (the pool all taken) when its
    worker was cancelled never began: the journal says so, and a resumed worker runs
    it, rather than being told it may or may not have taken effect."""
    effects: list[str] = []
    asked = asyncio.Event()

    class Told(MemoryJournal):
        async def intent(self, turn: int, call: ToolCall, arguments: Mapping[str, Any]) -> None:
            await super().intent(turn, call, arguments)
            asked.set()  # the call goes on to wait for a thread

    journal = Told()
    dispatcher = layered(registry(effects), journal=journal)
    pool = anyio.to_thread.current_default_thread_limiter()
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        taken.set()
        release.wait(10)

    tokens, pool.total_tokens = pool.total_tokens, 1
    try:
        holding = asyncio.ensure_future(anyio.to_thread.run_sync(hold))
        await asyncio.to_thread(taken.wait, 10)  # not the pool's thread: it has none left
        dispatching = asyncio.ensure_future(
            dispatcher.dispatch([call("send", {"to": "ana"}, id="c1")], turn=1)
        )
        await asyncio.wait_for(asked.wait(), 10)
        dispatching.cancel()
        with pytest.raises(asyncio.CancelledError):
            await dispatching
        release.set()
        await holding
    finally:
        pool.total_tokens = tokens
    assert effects == []
    assert journal.entries[1, "c1"].status == "passed"  # not begun
    [again] = await dispatcher.dispatch([call("send", {"to": "ana"}, id="c1")], turn=1)
    assert (again.status, again.content, effects) == ("ok", "sent to ana", ["ana"])
