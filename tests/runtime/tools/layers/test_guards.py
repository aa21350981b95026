"""The argument-guard layer alone, with a fake next layer."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from runtime.messages import ToolCall
from runtime.tools import Tool
from runtime.tools.journal import JournalEntry, MemoryJournal, began
from runtime.tools.layers import ArgumentGuards, Outcome, Prepared
from tests.support.layers import Next, look, prepared, send


class OnlyAnn:
    """Refuses every call whose ``to`` is not ann; remembers the calls it checked."""

    def __init__(self) -> None:
        self.checked: list[str] = []

    async def check(
        self, calls: Sequence[tuple[ToolCall, Tool[Any, Any], dict[str, Any]]], turn: int
    ) -> list[str | None]:
        self.checked += [c.id for c, _, _ in calls]
        return [None if k.get("to", "ann") == "ann" else "only ann" for _, _, k in calls]


async def test_a_refused_call_is_its_reason_and_only_the_others_reach_the_next_layer() -> None:
    inner, guard = Next(), OnlyAnn()
    calls = [prepared(send, 0, to="bo"), prepared(look, 1, key="k"), prepared(send, 2, to="ann")]
    first, second, third = await ArgumentGuards(inner, guard, None).admit(calls)
    assert first == Outcome(status="error", content="only ann", error="only ann")
    assert (second, third) == (calls[1], calls[2])
    assert inner.admitted == [[calls[1], calls[2]]]  # in call order, the refused one gone


async def test_a_call_the_journal_knows_is_not_checked_again() -> None:
    journal = MemoryJournal()
    journal.entries[1, "c0"] = JournalEntry(tool="send", arguments="{}", status="ok")
    guard = OnlyAnn()
    calls = [prepared(send, 0, to="bo"), prepared(send, 1, to="cy")]
    ran, refused = await ArgumentGuards(Next(), guard, journal).admit(calls)
    assert guard.checked == ["c1"]
    assert isinstance(ran, Prepared)
    assert isinstance(refused, Outcome)


async def test_each_call_passes_through_to_the_next_layer() -> None:
    inner = Next()
    outcome = await ArgumentGuards(inner, OnlyAnn(), None)(prepared(look, key="k"))
    assert outcome.content == "ran c0"
    assert len(inner.called) == 1


async def test_the_verdicts_are_journaled_a_refusal_as_its_outcome() -> None:
    journal = MemoryJournal()
    calls = [prepared(send, 0, to="bo"), prepared(send, 1, to="ann")]
    await ArgumentGuards(Next(), OnlyAnn(), journal).admit(calls)
    passed = journal.recorded(1, "c1")  # it runs: the journal layer keeps how it ends
    assert passed == JournalEntry(tool="send", arguments='{"to": "ann"}', status="passed")
    assert began(passed, calls[1].call) is None  # not a call that began
    refused = journal.recorded(1, "c0")
    assert refused is not None
    assert (refused.tool, refused.status, refused.content) == ("send", "error", "only ann")
