"""The journal of side-effecting calls, through the real Dispatcher: a call with a
recorded outcome never runs again; one whose outcome was lost runs again only if its
tool is idempotent."""

from __future__ import annotations

from runtime import Dispatcher, JournalEntry, MemoryJournal, ToolRegistry, tool
from runtime.testing import call


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
    dispatcher = Dispatcher(registry(effects), journal=journal)
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
    [observation] = await Dispatcher(registry(effects), journal=journal).dispatch(
        [call("send", {"to": "ana"}, id="c1")], turn=1
    )
    assert effects == []
    assert (observation.status, observation.content) == ("ok", "sent to ana")


async def test_a_lost_outcome_is_reported_unknown_and_not_run_again() -> None:
    effects: list[str] = []
    journal = MemoryJournal()
    journal.entries[1, "c1"] = JournalEntry(tool="send", arguments='{"to": "ana"}')  # intent only
    [observation] = await Dispatcher(registry(effects), journal=journal).dispatch(
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
    [observation] = await Dispatcher(registry(effects, idempotent=True), journal=journal).dispatch(
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
    await Dispatcher(registry(effects), journal=journal).dispatch(
        [call("send", {"to": "bo"}, id="c1")], turn=2
    )
    assert effects == ["bo"]
