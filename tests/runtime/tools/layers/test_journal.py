"""The journal layer alone, with a fake next layer."""

from __future__ import annotations

from runtime.tools.journal import JournalEntry, MemoryJournal
from runtime.tools.layers import Journaled, Outcome
from tests.support.layers import Next, look, prepared, send


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
