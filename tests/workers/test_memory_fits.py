"""What a worker recalls at its start fits what its model holds: a local model's context
(or a role's compaction budget) is shared by the task, the tools, the turns to come
and the recall, which takes at most half of what the first request leaves: the worst
memories are left out first, the best alone is cut to fit. Recalled whole past the
context, the memories made the model's server refuse the worker's first call."""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from runtime import (
    Event,
    ModelRequest,
    SQLiteMemory,
    Tracer,
    UserMessage,
    WrapperModel,
)
from runtime.testing import FunctionModel
from workers import Compaction, MemoryRecalled, Role, RoleMemory, Worker
from workers.context import CUT, estimate_tokens
from workers.memory import RECALL_HEADER
from workers.services import Services

FACT = "Lisbon fact {0}: the tram climbs to Alfama and the river shines in May. " * 14


class Local(WrapperModel):
    """A model that says how many tokens one call of it holds, as a local one does."""

    def __init__(self, model: FunctionModel, context_tokens: int) -> None:
        super().__init__(model)
        self.context_tokens = context_tokens


@pytest.fixture
async def memory(tmp_path: Path) -> SQLiteMemory:
    kept = SQLiteMemory(tmp_path / "memory.db")
    for n in range(5):  # each some 1,000 characters, 250 tokens
        await kept.add(FACT.format(n), namespace="trip")
    return kept


async def recalled(
    memory: SQLiteMemory, role: Role, model: Local | FunctionModel
) -> tuple[ModelRequest, MemoryRecalled]:
    """The worker's first request, and its recall's event."""
    events: list[Event] = []
    services = Services(memory=memory, tracer=Tracer(events.append, log=False))
    assert (await Worker(role, model, services=services).run("Lisbon in May")).ok
    [event] = [e for e in events if isinstance(e, MemoryRecalled)]
    inner = model.inner if isinstance(model, Local) else model
    assert isinstance(inner, FunctionModel)
    return inner.requests[0], event


@pytest.mark.parametrize(("context", "shown"), [(4096, 3), (2048, 1)])
async def test_the_worst_memories_are_left_out_to_fit_the_models_context(
    memory: SQLiteMemory, context: int, shown: int
) -> None:
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=5, remember=False))
    model = Local(FunctionModel(lambda request: "done"), context)
    with capture_logs() as logs:
        request, event = await recalled(memory, role, model)
    room = context - min(request.max_output_tokens or 0, context // 2)
    first = estimate_tokens(request.messages[:2])
    assert estimate_tokens(request.messages) <= first + (room - first) // 2
    found = [hit.record.id for hit in await memory.search("Lisbon in May", namespace="trip")]
    assert event.memory_ids == tuple(found[:shown])  # the best, in their order
    message = request.messages[2]
    assert isinstance(message, UserMessage)
    assert message.content.startswith(RECALL_HEADER)
    assert message.content.count("[memory ") == shown
    [cut] = [entry for entry in logs if entry["event"] == "memory.recall_cut"]
    assert (cut["found"], cut["shown"], cut["cut"]) == (5, shown, False)


async def test_the_best_memory_alone_is_cut_to_fit_a_small_budget(memory: SQLiteMemory) -> None:
    role = Role(
        name="guide",
        memory=RoleMemory(namespace="trip", recall=3, remember=False),
        compaction=Compaction(budget_tokens=300),
    )
    request, event = await recalled(memory, role, FunctionModel(lambda request: "done"))
    assert len(event.memory_ids) == 1
    assert estimate_tokens(request.messages) <= 300 // 2 + estimate_tokens(request.messages[:2])
    message = request.messages[2]
    assert f"[memory {event.memory_ids[0]}]\nLisbon fact" in message.content
    assert CUT.split("{")[0] in message.content  # its middle, cut out


async def test_a_model_that_says_no_context_is_recalled_whole(memory: SQLiteMemory) -> None:
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=5, remember=False))
    request, event = await recalled(memory, role, FunctionModel(lambda request: "done"))
    assert len(event.memory_ids) == 5
    assert request.messages[2].content.count("[memory ") == 5
