"""Sessions with a role's memory: a worker that is shown the conversation still
searches its memory for its own subtask, not for the conversation before it."""

from __future__ import annotations

from pathlib import Path

import pytest

from honeycomb import Executor, Role, RoleMemory, SQLiteMemory
from honeycomb.events import Event
from honeycomb.run.conversation import CONVERSATION_HEADER
from honeycomb.testing import FunctionModel
from runtime import ModelRequest
from tests.support.model_requests import role_of
from workers.memory import MemoryRecalled

MADRID = "Madrid in July: hot and dry, 35C."
LISBON = "Lisbon weather report: sunny, 24C, Lisbon trams run all day."


@pytest.mark.parametrize("shown", ["none", "summary", "full"])
async def test_a_worker_shown_the_conversation_recalls_for_its_subtask(
    tmp_path: Path, shown: str
) -> None:
    # With the conversation in its query, a guide asked "And Madrid?" after a turn on
    # Lisbon recalled the Lisbon memory: 232 characters of conversation outweighed
    # the 11 of its subtask.
    memory = SQLiteMemory(tmp_path / "memory.db")
    await memory.add(MADRID, namespace="trip")
    await memory.add(LISBON, namespace="trip")
    told: list[str] = []

    def answer(request: ModelRequest) -> str:
        if role_of(request) == "guide":
            told.append("\n".join(str(m.content) for m in request.messages))
        return "noted"

    guide = Role(
        name="guide", memory=RoleMemory(namespace="trip", recall=1, remember=False), session=shown
    )
    ex = Executor(
        [guide, Role(name="aggregator")],
        FunctionModel(answer),
        memory=memory,
        planner=lambda task: [("guide", task)],
    )
    session = ex.session("trip")
    await session.run("Lisbon weather?")
    recalled: list[MemoryRecalled] = []

    def seen(event: Event) -> None:
        if isinstance(event, MemoryRecalled):
            recalled.append(event)

    await session.run("And Madrid?", on_event=[seen])
    assert [event.query for event in recalled] == ["And Madrid?"]
    assert MADRID in told[-1]
    assert LISBON not in told[-1]
    # What it is shown is unchanged: the conversation after its instruction.
    assert (CONVERSATION_HEADER in told[-1]) == (shown != "none")
