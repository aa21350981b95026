"""What the journal knows of a call from an earlier life wins over what the call's tool
is declared as now: a tool no longer side-effecting, or gone from the worker's tools,
or whose arguments no longer validate, does not make an effect run twice, nor turn
the journal's answer into an error."""

from __future__ import annotations

from runtime.events import Caller, Event, ToolCallFinished, Tracer
from runtime.testing import call
from runtime.tools import ToolRegistry, tool
from runtime.tools.dispatch import Dispatcher, DispatchPolicy
from runtime.tools.journal import JournalEntry, MemoryJournal
from runtime.tools.layers import Journaled
from tests.support.dispatching import layered
from tests.support.layers import Next, look, prepared
from workers.calls import tool_calls

SENT = JournalEntry(tool="send", arguments='{"to": "ana"}', status="ok", content="sent to ana")
CUT_OFF = JournalEntry(tool="send", arguments='{"to": "bo"}')  # intent only


def journal_of_an_earlier_life() -> MemoryJournal:
    """Call c1 of turn 1 ended; call c2 was running when the process died."""
    journal = MemoryJournal()
    journal.entries[1, "c1"] = SENT
    journal.entries[1, "c2"] = CUT_OFF
    return journal


def now_read_only(effects: list[str]) -> ToolRegistry:
    @tool  # ``send`` had side effects in the earlier life
    def send(to: str) -> str:
        """Send a message."""
        effects.append(to)
        return f"sent to {to}"

    return ToolRegistry([send])


async def test_the_layer_answers_a_known_call_of_a_tool_now_without_side_effects() -> None:
    journal = MemoryJournal()
    journal.entries[1, "c0"] = JournalEntry(
        tool="look", arguments="{}", status="ok", content="looked"
    )
    journal.entries[1, "c1"] = JournalEntry(tool="look", arguments="{}")
    inner = Next()
    layer = Journaled(inner, journal)
    ended = await layer(prepared(look, 0, key="k"))
    assert (ended.status, ended.content, ended.ran) == ("ok", "looked", False)
    unknown = await layer(prepared(look, 1, key="k"))
    assert (unknown.status, unknown.ran) == ("unknown", False)
    assert inner.called == []
    entry = journal.recorded(1, "c1")
    assert entry is not None
    assert entry.status == "unknown"  # a later life says the same


async def test_a_journal_is_kept_when_no_tool_of_the_worker_has_side_effects() -> None:
    effects: list[str] = []
    tools, policy, caller = now_read_only(effects), DispatchPolicy(), Caller()
    journal = journal_of_an_earlier_life()
    calls = tool_calls(policy, caller, tools, journal=journal)
    dispatcher = Dispatcher(tools, policy=policy, calls=calls, caller=caller, journal=journal)
    sent, cut_off, new = await dispatcher.dispatch(
        [
            call("send", {"to": "ana"}, id="c1"),
            call("send", {"to": "bo"}, id="c2"),
            call("send", {"to": "cy"}, id="c3"),
        ],
        turn=1,
    )
    assert effects == ["cy"]  # only the call the journal does not know ran
    assert (sent.status, sent.content) == ("ok", "sent to ana")
    assert cut_off.status == "unknown"
    assert (new.status, new.content) == ("ok", "sent to cy")


async def test_a_known_call_of_a_tool_gone_gets_the_journals_answer() -> None:
    events: list[Event] = []
    dispatcher = layered(
        ToolRegistry([look]),
        journal=journal_of_an_earlier_life(),
        tracer=Tracer(events.append, log=False),
    )
    sent, cut_off, stranger = await dispatcher.dispatch(
        [
            call("send", {"to": "ana"}, id="c1"),
            call("send", {"to": "bo"}, id="c2"),
            call("send", {"to": "cy"}, id="c3"),
        ],
        turn=1,
    )
    assert (sent.status, sent.content) == ("ok", "sent to ana")
    assert cut_off.status == "unknown"
    assert "Outcome unknown" in cut_off.content
    assert stranger.status == "error"  # a call the journal does not know: an unknown tool
    assert stranger.content.startswith("Error: unknown tool 'send'")
    finished = [(e.call_id, e.status, e.error) for e in events if isinstance(e, ToolCallFinished)]
    assert finished == [
        ("c1", "ok", None),
        ("c2", "unknown", cut_off.content),
        ("c3", "error", stranger.content),
    ]


async def test_a_call_under_a_known_id_of_another_tool_is_refused_as_before() -> None:
    dispatcher = layered(ToolRegistry([look]), journal=journal_of_an_earlier_life())
    [observation] = await dispatcher.dispatch([call("mail", {"to": "ana"}, id="c1")], turn=1)
    assert observation.status == "error"
    assert observation.content.startswith("Error: unknown tool 'mail'")


async def test_a_known_call_whose_arguments_no_longer_validate_gets_the_journals_answer() -> None:
    effects: list[str] = []

    @tool(side_effects=True)
    def send(to: str, cc: str) -> str:  # ``cc`` is new: the earlier call lacks it
        """Send a message."""
        effects.append(to)
        return f"sent to {to}"

    dispatcher = layered(ToolRegistry([send]), journal=journal_of_an_earlier_life())
    sent, cut_off = await dispatcher.dispatch(
        [call("send", {"to": "ana"}, id="c1"), call("send", {"to": "bo"}, id="c2")], turn=1
    )
    assert effects == []
    assert (sent.status, sent.content) == ("ok", "sent to ana")
    assert cut_off.status == "unknown"
