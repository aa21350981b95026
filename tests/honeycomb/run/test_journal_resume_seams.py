"""A resumed run answers from the journal every call it knows from an earlier life,
whatever the resume's configuration now says of that call's tool: no longer
side-effecting (a setting changed, an MCP server now says ``readOnlyHint``), or gone
from the role. A call that ended is answered with its recorded observation, one cut
off with an ``unknown`` one; neither runs again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Approvals, Executor, Policy, Role, RunFailed, RunResult, tool
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call

pytestmark = pytest.mark.timeout(60)


def asks_for_two_notes() -> FunctionModel:
    """A model whose first answer asks for notes A and B, in that order (side effects
    run one at a time), and whose next answer is final."""

    def answer(request: ModelRequest) -> Any:
        if any(isinstance(m, AssistantMessage) for m in request.messages):
            return "done"
        return AssistantMessage(
            tool_calls=(
                call("append_note", {"text": "A"}, id="cA"),
                call("append_note", {"text": "B"}, id="cB"),
            )
        )

    return FunctionModel(answer)


async def first_life(db: Path, notes: list[str]) -> None:
    """Note A is written and journaled; the run is stopped while note B is written."""
    writing_b = asyncio.Event()

    @tool(side_effects=True)
    async def append_note(text: str) -> str:
        """Append a note."""
        notes.append(text)
        if text == "B":
            writing_b.set()
            await asyncio.sleep(60)
        return f"noted {text}"

    store = RunStore(db)
    executor = Executor(
        [Role(name="w", tools=("append_note",))],
        asks_for_two_notes(),
        tools=[append_note],
        store=store,
    )
    run = asyncio.create_task(executor.run("t", subtasks=[("w", "write")], run_id="r1"))
    await writing_b.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    found = store.find("r1")
    assert found is not None
    assert found.status == "interrupted"
    store.close()
    assert notes == ["A", "B"]


def observations(result: RunResult) -> list[tuple[str, str]]:
    worker = result.subtasks["s1"].worker
    assert worker is not None
    messages = worker.transcript.messages
    return [(m.status, m.content) for m in messages if isinstance(m, ToolMessage)]


async def test_a_tool_no_longer_side_effecting_is_answered_from_the_journal(
    db: Path,
) -> None:
    notes: list[str] = []
    await first_life(db, notes)

    @tool  # the same tool, now declared without side effects
    async def append_note(text: str) -> str:
        """Append a note."""
        notes.append(text)
        return f"noted {text}"

    store = RunStore(db)
    executor = Executor(
        [Role(name="w", tools=("append_note",))],
        asks_for_two_notes(),
        tools=[append_note],
        store=store,
    )
    result = await executor.resume("r1")
    store.close()
    assert result.status == "ok"
    assert notes == ["A", "B"]  # neither ran again
    [(a_status, a_text), (b_status, b_text)] = observations(result)
    assert (a_status, a_text) == ("ok", "noted A")
    assert b_status == "unknown"
    assert "may or may not have taken effect" in b_text


async def test_a_tool_gone_from_the_role_is_answered_from_the_journal(db: Path) -> None:
    notes: list[str] = []
    await first_life(db, notes)

    @tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return key

    store = RunStore(db)
    executor = Executor(
        [Role(name="w", tools=("lookup",))], asks_for_two_notes(), tools=[lookup], store=store
    )
    result = await executor.resume("r1")
    store.close()
    assert result.status == "ok"
    assert notes == ["A", "B"]
    [(a_status, a_text), (b_status, b_text)] = observations(result)
    assert (a_status, a_text) == ("ok", "noted A")  # not "unknown tool"
    assert b_status == "unknown"
    assert "Outcome unknown" in b_text


async def test_a_lost_outcome_of_a_tool_gone_fails_the_worker_when_the_policy_says_so(
    db: Path,
) -> None:
    notes: list[str] = []
    await first_life(db, notes)
    store = RunStore(db)
    executor = Executor(
        [Role(name="w", tools=())],
        asks_for_two_notes(),
        store=store,
        policy=Policy(on_unknown_outcome="fail"),
    )
    with pytest.raises(RunFailed) as failed:
        await executor.resume("r1")
    store.close()
    error = failed.value.partial.subtasks["s1"].error
    assert error is not None
    assert (error.type, "call cB" in error.message) == ("OutcomeUnknown", True)
    assert notes == ["A", "B"]


async def test_a_tool_since_made_to_ask_is_answered_from_the_journal_unasked(db: Path) -> None:
    """Note A ran and note B was cut off unasked, and the tool is made to ask before the
    run is resumed: nobody is asked about them (a denial would tell the model that
    notes which were written, or may have been, were not), nothing waits, and the
    journal answers each."""
    notes: list[str] = []
    await first_life(db, notes)

    @tool(side_effects=True)
    async def append_note(text: str) -> str:
        """Append a note."""
        notes.append(text)
        return f"noted {text}"

    store = RunStore(db)
    asks = Role(name="w", tools=("append_note",), approvals=Approvals(tools=("append_note",)))
    executor = Executor([asks], asks_for_two_notes(), tools=[append_note], store=store)
    result = await executor.resume("r1")
    assert await executor.pending("r1") == []
    store.close()
    assert (result.status, result.pending) == ("ok", [])
    assert notes == ["A", "B"]
    [(a_status, a_text), (b_status, _)] = observations(result)
    assert (a_status, a_text, b_status) == ("ok", "noted A", "unknown")
