"""A session's turn that was cut off, resumed before the next message
(``unfinished="resume"``), is told to that message's handlers: its events, its answer's
text and its result come before the message's own, so a caller can show what the
turn answered and what it spent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from honeycomb import Executor, OfflineModel, Role
from honeycomb.events import RunFinished, RunStarted
from honeycomb.testing import FunctionModel
from runtime import Event, ModelRequest, ModelResponse, TextDelta
from tests.support.model_requests import role_of

ROLES = [
    Role(name="planner"),
    Role(name="researcher", description="Finds facts about cities and weather."),
    Role(name="aggregator"),
]


async def cut_off(db: Path) -> str:
    """Session ``u`` of the store ``db``, its first message cut off as its researcher
    works (as Ctrl-C cuts a chat's turn off); that turn's run id."""
    started = asyncio.Event()
    offline = OfflineModel(latency=0)

    async def stalls(request: ModelRequest) -> ModelResponse:
        if role_of(request) == "researcher":
            started.set()
            await asyncio.Event().wait()
        return await offline.complete(request)

    session = Executor(ROLES, FunctionModel(stalls), store=db).session("u")
    turn = asyncio.create_task(session.run("Find the weather in Rome."))
    await started.wait()
    turn.cancel()
    await asyncio.gather(turn, return_exceptions=True)
    [interrupted] = await session.turns()
    assert interrupted.status == "interrupted"
    return interrupted.run_id


def finished(events: list[Event]) -> dict[str, RunFinished]:
    return {e.run_id or "": e for e in events if isinstance(e, RunFinished)}


async def test_a_message_tells_its_handlers_of_the_turn_resumed_before_it(db: Path) -> None:
    resumed_id = await cut_off(db)
    events: list[Event] = []
    session = Executor(ROLES, OfflineModel(latency=0), store=db).session("u")
    result = await session.run(
        "And in Oslo?", unfinished="resume", on_event=[events.append], text_deltas=True
    )

    runs = [e.run_id for e in events if isinstance(e, RunStarted)]
    assert runs == [resumed_id, result.run_id]  # the turn resumed, then the message
    ends = finished(events)
    resumed = ends[resumed_id].result
    assert resumed is not None
    assert resumed.status == "ok"
    assert resumed.usage.total_tokens > 0
    [first, _] = await session.turns()
    assert resumed.answer_text == first.answer
    said = "".join(e.text for e in events if isinstance(e, TextDelta) and e.run_id == resumed_id)
    assert "Rome" in said  # its answer, as it was written


async def test_a_streamed_message_streams_the_turn_resumed_before_it(db: Path) -> None:
    resumed_id = await cut_off(db)
    session = Executor(ROLES, OfflineModel(latency=0), store=db).session("u", unfinished="resume")
    async with session.stream("And in Oslo?") as stream:
        events = [event async for event in stream]
    assert stream.result is not None
    assert list(finished(events)) == [resumed_id, stream.result.run_id]


async def test_a_turn_resumed_by_itself_streams_its_text_when_asked(db: Path) -> None:
    resumed_id = await cut_off(db)
    events: list[Event] = []
    session = Executor(ROLES, OfflineModel(latency=0), store=db).session("u")
    result = await session.resume(on_event=[events.append], text_deltas=True)
    assert result is not None
    assert result.run_id == resumed_id
    said = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert result.answer_text.strip() in said
