"""The journal layer alone, with a fake next layer, and with the tool behind it."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from runtime.errors import ModelRetry
from runtime.events import Caller
from runtime.tools import Tool
from runtime.tools.dispatch import DispatchPolicy
from runtime.tools.journal import JournalEntry, MemoryJournal
from runtime.tools.layers import Journaled, Outcome
from tests.support.layers import Next, look, prepared, send
from workers.calls import tool_calls


async def test_a_side_effect_has_its_intent_kept_before_it_runs_and_its_outcome_after() -> None:
    journal = MemoryJournal()

    class Watching(Next):
        async def __call__(self, call):  # type: ignore[no-untyped-def]
            entry = journal.recorded(1, "c0")
            assert entry is not None
            assert entry.status is None
            return await super().__call__(call)

    outcome = await Journaled(Watching(), journal)(prepared(send, to="ann"))
    assert outcome.content == "ran c0"
    entry = journal.recorded(1, "c0")
    assert entry is not None
    assert (entry.tool, entry.status, entry.content) == ("send", "ok", "ran c0")
    assert entry.arguments == '{"to": "ann"}'


async def test_a_call_the_journal_knows_is_never_run_again() -> None:
    journal = MemoryJournal()
    journal.entries[1, "c0"] = JournalEntry(
        tool="send", arguments="{}", status="ok", content="was sent"
    )
    journal.entries[1, "c1"] = JournalEntry(tool="send", arguments="{}")  # cut off mid-call
    inner = Next()
    layer = Journaled(inner, journal)
    kept = Outcome(status="ok", content="was sent", ran=False)  # the dispatcher reports it
    assert await layer(prepared(send, 0, to="a")) == kept
    unknown = await layer(prepared(send, 1, to="b"))
    assert (unknown.status, unknown.ran) == ("unknown", False)
    assert "may or may not have taken effect" in unknown.content
    assert inner.called == []
    entry = journal.recorded(1, "c1")
    assert entry is not None
    assert entry.status == "unknown"


async def test_a_call_without_side_effects_is_not_journaled() -> None:
    journal = MemoryJournal()
    assert (await Journaled(Next(), journal)(prepared(look, key="k"))).content == "ran c0"
    assert journal.entries == {}


async def test_a_call_cut_off_as_its_tool_gets_ready_keeps_no_intent() -> None:
    """What a call needs first (its MCP server started: its tool's ``ready``) is awaited
    before its intent is kept: a side-effecting call cut off meanwhile never reached its
    tool, and a resumed worker runs it rather than tell its model the outcome is
    unknown. One whose tool cannot get ready is that tool's error, kept as it ended."""
    journal = MemoryJournal()
    asked = asyncio.Event()

    async def starting() -> None:
        asked.set()
        await asyncio.Event().wait()  # a server slow to start

    async def down() -> None:
        raise ModelRetry("its server did not start")

    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    for ready in (starting, down):
        paying = Tool(pay, side_effects=True, ready=ready)
        calls = tool_calls(DispatchPolicy(), Caller(), [paying], journal=journal)
        if ready is starting:
            going = asyncio.create_task(calls(prepared(paying, to="ann")))
            await asked.wait()
            going.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await going
            assert journal.recorded(1, "c0") is None
        else:
            outcome = await calls(prepared(paying, to="ann"))
            assert (outcome.status, outcome.content) == ("error", "Error: its server did not start")
            entry = journal.recorded(1, "c0")
            assert entry is not None
            assert entry.status == "error"


async def test_a_call_cancelled_as_its_intent_is_written_is_kept_as_never_begun() -> None:
    class SlowToCommit(MemoryJournal):
        """Keeps an intent at once, and is slow to say so (a commit waited for)."""

        def __init__(self) -> None:
            super().__init__()
            self.kept = asyncio.Event()

        async def intent(self, turn: int, call: Any, arguments: Any) -> None:
            await super().intent(turn, call, arguments)
            self.kept.set()
            await asyncio.Event().wait()

    journal = SlowToCommit()
    inner = Next()
    running = asyncio.create_task(Journaled(inner, journal)(prepared(send, to="ann")))
    await journal.kept.wait()
    running.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running
    assert inner.called == []  # it never began
    entry = journal.recorded(1, "c0")
    assert entry is not None
    assert entry.status == "passed"  # a resumed worker runs it: no unknown outcome
