"""A memory that fails with whatever its code raises (a :class:`~runtime.Memory` is
anyone's: a vector database over the network, say) never fails the worker: the recall
at its start is a ``memory.recalled`` event with the error, a memory tool's call an
error observation, an answer that cannot be kept a warning; cancellation still goes
through."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import anyio
import pytest
import structlog

from runtime import Event, MemoryHit, MemoryRecord, SQLiteMemory, ToolMessage, Tracer
from runtime.memory import MemoryKind
from runtime.testing import FunctionModel, ScriptedModel, call
from workers import MemoryRecalled, Role, RoleMemory, Worker
from workers.services import Services

DOWN = "vector db unreachable"


class Unreachable:
    """A memory over a service that is down: every search and add raises what its
    client library raises, not a Honeycomb error."""

    def __init__(self, error: type[Exception] = ConnectionError) -> None:
        self.error = error

    async def add(
        self,
        text: str,
        *,
        namespace: str = "default",
        kind: MemoryKind = "note",
        run_id: str | None = None,
        role: str | None = None,
        worker: str | None = None,
    ) -> MemoryRecord:
        raise self.error(DOWN)

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return None

    async def search(
        self, query: str, *, namespace: str = "default", k: int = 5
    ) -> tuple[MemoryHit, ...]:
        raise self.error(DOWN)

    async def delete(self, memory_id: str) -> bool:
        return False

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return ()


@pytest.mark.parametrize("error", [ConnectionError, RuntimeError, KeyError])
async def test_a_recall_whatever_it_raises_is_an_event_and_the_worker_goes_on(
    error: type[Exception],
) -> None:
    events: list[Event] = []
    model = FunctionModel(lambda request: "answer")
    role = Role(name="guide", memory=RoleMemory(namespace="trip", remember=False))
    tracer = Tracer(events.append, log=False)
    worker = Worker(role, model, services=Services(memory=Unreachable(error), tracer=tracer))
    result = await worker.run("bees")
    assert result.ok, result.error
    assert result.text == "answer"
    [recalled] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert recalled.error is not None
    assert recalled.error.startswith(f"{error.__name__}: ")
    assert DOWN in recalled.error
    assert recalled.memory_ids == ()
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]  # nothing recalled


async def test_the_memory_tools_failing_are_observations_for_the_model() -> None:
    model = ScriptedModel(
        [[call("recall", {"query": "bees"}), call("remember", {"text": "a note"})], "done"]
    )
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0))
    result = await Worker(role, model, services=Services(memory=Unreachable())).run("bees")
    assert result.ok, result.error
    assert result.text == "done"
    observed = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert [(m.name, m.status) for m in observed] == [("recall", "error"), ("remember", "error")]
    assert all(DOWN in m.content for m in observed)


async def test_an_answer_that_cannot_be_kept_is_a_warning_and_the_result_stands() -> None:
    role = Role(name="guide", memory=RoleMemory(store_result=True, recall=0, remember=False))
    model = FunctionModel(lambda request: "answer")
    worker = Worker(role, model, name="guide-1", services=Services(memory=Unreachable()))
    with structlog.testing.capture_logs() as logs:
        result = await worker.run("bees")
    assert result.ok, result.error
    assert result.text == "answer"
    [warning] = [entry for entry in logs if entry["event"] == "memory.store_failed"]
    assert warning["log_level"] == "warning"
    assert warning["worker"] == "guide-1"
    assert warning["error"] == f"ConnectionError: {DOWN}"


class Hanging(Unreachable):
    """A memory whose search never answers, and says when it was asked."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = anyio.Event()

    async def search(
        self, query: str, *, namespace: str = "default", k: int = 5
    ) -> tuple[MemoryHit, ...]:
        self.asked.set()
        await anyio.sleep_forever()
        return ()


async def test_a_worker_cancelled_while_it_recalls_is_cancelled_not_failed() -> None:
    # Cancellation is no failure of the memory: the worker stops, nothing is reported.
    events: list[Event] = []
    memory = Hanging()
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    model = FunctionModel(lambda request: "answer")
    tracer = Tracer(events.append, log=False)
    worker = Worker(role, model, services=Services(memory=memory, tracer=tracer))
    ran: list[object] = []

    async def run() -> None:
        ran.append(await worker.run("bees"))

    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(run)
            await memory.asked.wait()
            group.cancel_scope.cancel()
    assert ran == []  # cancelled, not returned as a result
    assert not any(isinstance(e, MemoryRecalled) for e in events)
    assert model.requests == []


async def test_a_note_for_a_file_another_program_keeps_locked_times_out_as_any_tool(
    tmp_path: Path,
) -> None:
    # Another program holds the memory file's write lock. The remember call waited for
    # it for the memory's whole timeout_s (30 s), past its tool timeout, and the worker
    # with it (in the trip demo, past its worker timeout: the run failed). It ends at
    # its tool timeout now, a timeout observation, and the worker goes on.
    path = tmp_path / "memory.db"
    memory = SQLiteMemory(path, timeout_s=30)
    await memory.add("Lisbon is sunny", namespace="trip")
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    model = ScriptedModel([[call("remember", {"text": "Porto is rainy"})], "done"])
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0), tool_timeout=0.3)
    started = time.monotonic()
    result = await Worker(role, model, services=Services(memory=memory)).run("Porto")
    elapsed = time.monotonic() - started
    other.execute("ROLLBACK")
    other.close()
    assert result.ok, result.error
    assert result.text == "done"
    [observed] = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert (observed.name, observed.status) == ("remember", "timeout")
    assert elapsed < 5  # its 0.3 s tool timeout, far from the memory's 30 s
    assert [r.text for r in await memory.list("trip")] == ["Lisbon is sunny"]


class Silent(Unreachable):
    """A memory over a service that never answers (a network partition, a client
    without a timeout of its own)."""

    async def add(
        self,
        text: str,
        *,
        namespace: str = "default",
        kind: MemoryKind = "note",
        run_id: str | None = None,
        role: str | None = None,
        worker: str | None = None,
    ) -> MemoryRecord:
        await anyio.sleep_forever()
        raise AssertionError("never answered")

    async def search(
        self, query: str, *, namespace: str = "default", k: int = 5
    ) -> tuple[MemoryHit, ...]:
        await anyio.sleep_forever()
        return ()


async def test_a_memory_that_never_answers_has_the_roles_tool_timeout() -> None:
    # Its recall at the worker's start and the answer it kept at its end waited for it
    # for ever: the worker hung to its own timeout, and failed on it. They fail after
    # the role's tool timeout now, as its memory tools do, and the result stands.
    events: list[Event] = []
    role = Role(
        name="guide",
        memory=RoleMemory(namespace="trip", remember=False, store_result=True),
        tool_timeout=0.2,
    )
    tracer = Tracer(events.append, log=False)
    worker = Worker(
        role,
        FunctionModel(lambda request: "answer"),
        services=Services(memory=Silent(), tracer=tracer),
    )
    with anyio.fail_after(10), structlog.testing.capture_logs() as logs:
        result = await worker.run("bees")
    assert result.ok, result.error
    assert result.text == "answer"
    [recalled] = [e for e in events if isinstance(e, MemoryRecalled)]
    said = "TimeoutError: no answer in 0.2s (the role's tool_timeout)"
    assert recalled.error == said
    [warning] = [entry for entry in logs if entry["event"] == "memory.store_failed"]
    assert warning["error"] == said
