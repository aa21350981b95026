"""A role's memory in a worker: recall at its start, the recall and remember tools, and
a memory that fails, on real SQLite memory files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest

from runtime import (
    AssistantMessage,
    ConfigError,
    DuplicateToolError,
    Event,
    MemoryHit,
    MemoryRecord,
    MemoryStoreError,
    ModelRequest,
    ModelResponse,
    SQLiteMemory,
    ToolMessage,
    Tracer,
    UserMessage,
    secrets,
    tool,
)
from runtime.memory import MemoryKind
from runtime.testing import FunctionModel, ScriptedModel, call
from tests.support.concurrency import Overlap, Rendezvous
from workers import MemoryRecalled, Role, RoleMemory, Worker
from workers.memory import RECALL_HEADER
from workers.services import MemoryStore, Services
from workers.state import LoopState
from workers.worker import CUT_OFF_NOTE


@pytest.fixture
async def memory(tmp_path: Path) -> SQLiteMemory:
    kept = SQLiteMemory(tmp_path / "memory.db")
    await kept.add("Lisbon is sunny in May", namespace="trip", role="guide", run_id="r0")
    await kept.add("Lisbon trams climb to Alfama", namespace="trip")
    await kept.add("Madrid museums close on Mondays", namespace="trip")
    await kept.add("Lisbon is for the red team", namespace="other")
    return kept


def seen_by(model: FunctionModel) -> list[str]:
    """What each message of the model's first request says (its first line)."""
    return [getattr(m, "content", "").splitlines()[0] for m in model.requests[0].messages]


async def test_recall_puts_the_best_memories_right_after_the_task(memory: SQLiteMemory) -> None:
    events: list[Event] = []
    model = FunctionModel(lambda request: "done")
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=2, remember=False))
    worker = Worker(
        role, model, services=Services(memory=memory, tracer=Tracer(events.append, log=False))
    )
    result = await worker.run("What is Lisbon like in May?")
    assert result.ok
    messages = model.requests[0].messages
    assert [m.role for m in messages] == ["system", "user", "user"]
    recalled = messages[2]
    assert isinstance(recalled, UserMessage)
    assert recalled.content.startswith(RECALL_HEADER)
    assert "[memory " in recalled.content
    assert "· guide, run r0]\nLisbon is sunny in May" in recalled.content
    assert "Madrid" not in recalled.content  # not among the best two
    assert "red team" not in recalled.content  # another namespace
    [event] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert (event.namespace, event.query, len(event.memory_ids)) == (
        "trip",
        "What is Lisbon like in May?",
        2,
    )
    assert event.error is None
    assert "recall" not in worker.tools  # remember: false gives no tools


async def test_nothing_found_puts_nothing_into_the_context(memory: SQLiteMemory) -> None:
    events: list[Event] = []
    model = FunctionModel(lambda request: "done")
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    worker = Worker(
        role, model, services=Services(memory=memory, tracer=Tracer(events.append, log=False))
    )
    assert (await worker.run("opening hours of Porto bridges")).ok
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]
    [event] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert event.memory_ids == ()


async def test_recall_zero_does_not_search(memory: SQLiteMemory) -> None:
    model = FunctionModel(lambda request: "done")
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0))
    assert (await Worker(role, model, services=Services(memory=memory)).run("Lisbon")).ok
    assert [m.role for m in model.requests[0].messages] == ["system", "user"]


class Counting:
    """A memory that counts its searches and adds (with the most in at once), can fail
    each call, and can hold each search until ``meet`` gathers them."""

    def __init__(
        self,
        inner: SQLiteMemory,
        *,
        broken: bool = False,
        delay_s: float = 0,
        meet: Rendezvous | None = None,
    ) -> None:
        self.inner, self.broken, self.delay_s, self.meet = inner, broken, delay_s, meet
        self.searches = 0
        self.adds = 0
        self.adding, self.searching = Overlap(), Overlap()

    def _check(self) -> None:
        if self.broken:
            raise MemoryStoreError("the file is locked", path=str(self.inner.path))

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
        self.adds += 1
        async with self.adding:
            await anyio.sleep(self.delay_s)
        self._check()
        return await self.inner.add(
            text, namespace=namespace, kind=kind, run_id=run_id, role=role, worker=worker
        )

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return await self.inner.get(memory_id)

    async def search(
        self, query: str, *, namespace: str = "default", k: int = 5
    ) -> tuple[MemoryHit, ...]:
        self.searches += 1
        async with self.searching:
            if self.meet is not None:
                await self.meet.meet()
            await anyio.sleep(self.delay_s)
        self._check()
        return await self.inner.search(query, namespace=namespace, k=k)

    async def delete(self, memory_id: str) -> bool:
        return await self.inner.delete(memory_id)

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return await self.inner.list(namespace, limit=limit)


async def test_a_resumed_worker_does_not_recall_again(memory: SQLiteMemory) -> None:
    counting = Counting(memory)
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    model = FunctionModel(lambda request: "done")
    worker = Worker(role, model, services=Services(memory=counting))
    saved = LoopState(task="Lisbon in May", messages=(UserMessage(content="recalled before"),))
    assert (await worker.run("Lisbon in May", resume=saved)).ok
    assert counting.searches == 0
    assert seen_by(model)[2] == "recalled before"


async def test_what_a_worker_recalled_is_kept_before_its_first_model_call(
    memory: SQLiteMemory,
) -> None:
    # Its first state was kept after its first model call: cut off in that call, the
    # worker recalled again as it was resumed, and may have found something else.
    counting = Counting(memory)
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    asked = anyio.Event()

    async def hangs(request: ModelRequest) -> str:
        asked.set()
        await anyio.sleep_forever()
        return "never"

    store = MemoryStore()
    services = Services(memory=counting, store=store)
    async with anyio.create_task_group() as group:
        group.start_soon(Worker(role, FunctionModel(hangs), services=services).run, "Lisbon")
        await asked.wait()
        group.cancel_scope.cancel()  # the process dies in its first model call
    assert store.state is not None
    assert seen_first_line(store.state.messages[0]) == RECALL_HEADER
    model = FunctionModel(lambda request: "done")
    again = Worker(role, model, services=Services(memory=counting, store=MemoryStore()))
    assert (await again.run("Lisbon", resume=store.state)).ok
    assert counting.searches == 1  # the first life's only


def seen_first_line(message: Any) -> str:
    return str(getattr(message, "content", "")).splitlines()[0]


async def test_a_memory_that_fails_never_fails_the_worker(memory: SQLiteMemory) -> None:
    events: list[Event] = []
    broken = Counting(memory, broken=True)
    model = ScriptedModel(
        [[call("recall", {"query": "lisbon"}), call("remember", {"text": "a note"})], "done"]
    )
    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    worker = Worker(
        role, model, services=Services(memory=broken, tracer=Tracer(events.append, log=False))
    )
    result = await worker.run("Lisbon")
    assert result.ok
    assert result.text == "done"
    [event] = [e for e in events if isinstance(e, MemoryRecalled)]
    assert event.error is not None
    assert "MemoryStoreError" in event.error
    assert "the file is locked" in event.error
    observed = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert [(m.name, m.status) for m in observed] == [("recall", "error"), ("remember", "error")]
    assert all("the file is locked" in m.content for m in observed)


async def test_the_tools_search_and_keep_in_the_roles_namespace(memory: SQLiteMemory) -> None:
    model = ScriptedModel(
        [
            [call("recall", {"query": "lisbon trams", "k": 1})],
            [call("remember", {"text": "Porto has a bridge"})],
            [call("remember", {"text": "Porto  has a bridge"})],  # the same note
            "done",
        ]
    )
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0))
    worker = Worker(role, model, name="guide-1", services=Services(memory=memory, run_id="r9"))
    result = await worker.run("Lisbon")
    observed = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert observed[0].content.startswith("Memories for 'lisbon trams', best first:")
    assert "Lisbon trams climb to Alfama" in observed[0].content
    assert "sunny" not in observed[0].content  # k=1
    assert observed[1].content == observed[2].content  # one memory, the same id
    [note] = [r for r in await memory.list("trip") if r.text == "Porto has a bridge"]
    assert (note.kind, note.run_id, note.role, note.worker) == ("note", "r9", "guide", "guide-1")
    recall, remember = worker.tools["recall"], worker.tools["remember"]
    assert not recall.side_effects  # runs beside the worker's other tools
    assert remember.side_effects
    assert remember.idempotent


async def test_a_worker_keeps_its_result_and_notes_with_every_secret_masked(
    memory: SQLiteMemory,
) -> None:
    # The memory file held a secret the run's result and store masked, and recall sent
    # it back to later models; and a worker run on its own (or called as a tool) kept
    # no result: only the Executor's scheduler did.
    model = ScriptedModel(
        [[call("remember", {"text": "the db password is hunter2-but-longer"})], "Connected with "
         "hunter2-but-longer."]
    )  # fmt: skip
    role = Role(name="dba", memory=RoleMemory(namespace="db", recall=0, store_result=True))
    with secrets.isolated():
        secrets.add_secret("hunter2-but-longer", "password")
        worker = Worker(role, model, name="dba-1", services=Services(memory=memory, run_id="r1"))
        result = await worker.run("Connect.")
    assert result.ok
    kept = {r.kind: r.text for r in await memory.list("db")}
    assert kept == {
        "note": "the db password is [password hidden]",
        "result": "Connected with [password hidden].",
    }


async def test_an_answer_cut_off_at_its_limit_is_kept_saying_so(memory: SQLiteMemory) -> None:
    # Kept as the model wrote it, a part was recalled by later runs as the whole answer,
    # which no model it is handed on to takes it for.
    cut = ModelResponse(
        message=AssistantMessage(content="Lisbon has seven hills and"), finish_reason="length"
    )
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0, store_result=True))
    worker = Worker(role, FunctionModel(lambda request: cut), services=Services(memory=memory))
    result = await worker.run("Describe Lisbon.")
    assert (result.ok, result.cut_off) == (True, True)
    [kept] = [r for r in await memory.list("trip") if r.kind == "result"]
    assert kept.text == f"Lisbon has seven hills and {CUT_OFF_NOTE}"


class Filled:
    """A memory another application fills too: what it holds came in unmasked."""

    async def search(
        self, query: str, *, namespace: str = "default", k: int = 5
    ) -> tuple[MemoryHit, ...]:
        text = "the db password is hunter2-but-longer"
        record = MemoryRecord(id="m1", namespace=namespace, text=text, created_at=0.0)
        return (MemoryHit(record=record, score=1.0),)

    async def add(self, text: str, **origin: Any) -> MemoryRecord:
        raise NotImplementedError

    async def get(self, memory_id: str) -> MemoryRecord | None:
        return None

    async def delete(self, memory_id: str) -> bool:
        return False

    async def list(
        self, namespace: str | None = None, *, limit: int = 100
    ) -> tuple[MemoryRecord, ...]:
        return ()


async def test_a_secret_any_memory_gives_back_is_recalled_masked() -> None:
    # SQLiteMemory masks what it gives back; a memory of one's own (a vector database
    # another application fills) sent its secrets to the model, at the worker's start
    # and from the recall tool.
    model = ScriptedModel([[call("recall", {"query": "db password"})], "done"])
    role = Role(name="dba", memory=RoleMemory(namespace="db"))
    with secrets.isolated():
        secrets.add_secret("hunter2-but-longer", "password")
        worker = Worker(role, model, services=Services(memory=Filled()))
        assert (await worker.run("Connect to the db.")).ok
    sent = [m.content or "" for request in model.requests for m in request.messages]
    assert sum("the db password is [password hidden]" in text for text in sent) == 3
    assert not any("hunter2" in text for text in sent)


async def test_remember_is_journaled_and_not_kept_again_on_resume(
    memory: SQLiteMemory,
) -> None:
    journal = MemoryStore()
    note = call("remember", {"text": "a note to keep"}, id="c1")
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0))
    worker = Worker(
        role, ScriptedModel([[note], "done"]), services=Services(memory=memory, store=journal)
    )
    assert (await worker.run("keep it")).ok
    [entry] = journal.entries.values()
    assert (entry.tool, entry.status) == ("remember", "ok")
    assert entry.arguments == '{"text": "a note to keep"}'
    kept = await memory.list("trip")
    assert sum(r.text == "a note to keep" for r in kept) == 1
    # The same call again (a resumed worker's turn): the journal has its outcome.
    counting = Counting(memory)
    again = Worker(
        role, ScriptedModel([[note], "done"]), services=Services(memory=counting, store=journal)
    )
    result = await again.run("keep it")
    assert counting.adds == 0
    [observed] = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert observed.content == entry.content


async def test_recall_calls_run_together_and_remember_calls_one_at_a_time(
    memory: SQLiteMemory,
) -> None:
    """Three recalls of one turn are in the memory at once; three remembers, one at a
    time."""
    role = Role(name="guide", memory=RoleMemory(namespace="trip", recall=0))

    async def turn(slow: Counting, calls: Sequence[Any]) -> None:
        worker = Worker(role, ScriptedModel([list(calls), "done"]), services=Services(memory=slow))
        assert (await worker.run("go")).ok

    recalling = Counting(memory, meet=Rendezvous(3))  # one after another, they never meet
    await turn(recalling, [call("recall", {"query": f"lisbon {i}"}) for i in range(3)])
    assert (recalling.searches, recalling.searching.peak) == (3, 3)

    # Each add takes a while: a remember beside it would start meanwhile.
    remembering = Counting(memory, delay_s=0.05)
    await turn(remembering, [call("remember", {"text": f"note {i}"}) for i in range(3)])
    assert (remembering.adds, remembering.adding.peak) == (3, 1)


def test_a_role_tool_named_like_a_memory_tool_is_an_error(tmp_path: Path) -> None:
    @tool
    def remember(text: str) -> str:
        """Remember something."""
        return text

    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    with pytest.raises(DuplicateToolError, match="remember"):
        Worker(
            role,
            FunctionModel(lambda r: "x"),
            tools=[remember],
            services=Services(memory=SQLiteMemory(tmp_path / "m.db")),
        )


def test_a_role_with_memory_and_no_memory_to_use_is_an_error() -> None:
    from runtime import ConfigError

    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    with pytest.raises(ConfigError, match=r"^memory: is set, but there is no memory to use"):
        Worker(role, FunctionModel(lambda r: "x"))


def test_a_namespace_is_checked_where_the_role_is_declared() -> None:
    with pytest.raises(ConfigError, match="namespace"):
        RoleMemory(namespace="two words")
    with pytest.raises(ConfigError, match="recall"):
        RoleMemory(recall=-1)


async def test_the_recall_message_is_what_the_model_sees_first(memory: SQLiteMemory) -> None:
    def answer(request: ModelRequest) -> str:
        recalled = request.messages[2]
        assert isinstance(recalled, UserMessage)
        return recalled.content.splitlines()[0]

    role = Role(name="guide", memory=RoleMemory(namespace="trip"))
    result = await Worker(role, FunctionModel(answer), services=Services(memory=memory)).run(
        "Lisbon"
    )
    assert result.text == RECALL_HEADER
