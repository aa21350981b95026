"""The approval events of a call that waits in the run store, on both backends: a
nested worker's (``agent:ROLE``) call, made in a Ray actor, is told to the run's
listeners in the driver as it starts waiting, its secret masked there (the actor
knows none of the driver's secrets), and its decision, found in the store, as the
resumed run goes on with it; and the room in an actor a worker leaves while its
approver asks a person."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest

from honeycomb import ApprovalRequest, Decision, Event, Executor, Policy, Role
from honeycomb.backends import RayBackend
from honeycomb.events import (
    ApprovalDecided,
    ApprovalRequested,
    RunFinished,
    WorkerFinished,
    WorkerStarted,
)
from honeycomb.run.agents import CANNOT_WAIT
from honeycomb.run.context import NOT_WAITING
from honeycomb.testing import FunctionModel
from runtime import AssistantMessage, ModelRequest
from runtime.secrets import add_secret
from runtime.testing import call
from runtime.tools.approvals import NOBODY_BY, LeftWaiting
from tests.support.model_requests import observations, role_of
from tests.support.ray_tools import scripted

pytest.importorskip("ray")
pytestmark = pytest.mark.xdist_group("ray")  # one test process starts the session's Ray

TOOLS = "tests.support.ray_tools"
SECRET = "tok-4b1d9e07c3"


def _script(*turns: list[tuple[str, dict[str, Any]]]) -> str:
    return json.dumps({"turns": [list(t) for t in turns], "log": None})


async def test_a_nested_workers_waiting_call_is_told_as_it_waits_and_as_it_is_decided(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    notes, db = tmp_path / "notes", tmp_path / "runs.db"
    lead = Role(name="lead", tools=("agent:a",))
    asker = Role(name="a", tools=(f"{TOOLS}:guarded_note",))

    def executor() -> Executor:
        made = Executor(
            [lead, asker], FunctionModel(scripted), aggregator="concat", backend=backend,
            store=db,
        )  # fmt: skip
        add_secret(SECRET, "token", owner=made)
        return made

    inner = _script([("guarded_note", {"path": str(notes), "text": f"hi {SECRET}"})])
    calls = _script([("a", {"instruction": inner})])
    heard: list[Event] = []
    waiting = await executor().run(
        "t", subtasks=[("lead", calls)], run_id="n1", on_event=[heard.append]
    )
    assert waiting.status == "waiting"
    (pending,) = waiting.pending
    (asked,) = [e for e in heard if isinstance(e, ApprovalRequested)]
    assert (asked.worker, asked.turn, asked.call_id) == (pending.worker, 1, "c0_0")
    assert (asked.tool, asked.role, asked.asked) == ("guarded_note", "a", "store")
    assert asked.arguments["text"] == "hi [token hidden]"
    assert heard.index(asked) < next(i for i, e in enumerate(heard) if isinstance(e, RunFinished))

    await executor().decide("n1", "c0_0", approve=True, worker=pending.worker, by="ann")
    heard.clear()
    done = await executor().resume("n1", on_event=[heard.append])
    assert done.status == "ok"
    assert not [e for e in heard if isinstance(e, ApprovalRequested)]  # decided: no wait
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert (decided.worker, decided.call_id, decided.approved, decided.by) == (
        pending.worker,
        "c0_0",
        True,
        "ann",
    )
    assert notes.read_text() == f"hi {SECRET}\n"  # run with its own text, once


async def test_a_call_is_told_as_asked_only_when_someone_is_asked(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    async def approver(request: ApprovalRequest) -> Decision:
        return Decision.denied("not today", by="bob")

    notes = tmp_path / "notes"
    role = Role(name="a", tools=(f"{TOOLS}:guarded_note",))
    heard: list[Event] = []
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=backend, approver=approver
    )
    calls = _script([("guarded_note", {"path": str(notes), "text": "hi"})])
    await ex.run("t", subtasks=[("a", calls)], on_event=[heard.append])
    (asked,) = [e for e in heard if isinstance(e, ApprovalRequested)]
    assert (asked.worker, asked.tool, asked.asked) == ("s1", "guarded_note", "approver")
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert (decided.worker, decided.approved, decided.reason, decided.by) == (
        "s1",
        False,
        "not today",
        "bob",
    )
    assert heard.index(asked) < heard.index(decided)
    assert not notes.exists()

    # Nobody can decide a call of a sub-run (a hive called as a tool) whose caller has
    # no approver: it is denied at once, saying why, and nobody is said to be asked.
    # From an actor it was told as asked of the run's approver (the worker left its
    # slot and its clock stopped, as for a person), and only then denied.
    heard.clear()
    clerk = Executor(
        [Role(name="clerk", tools=(f"{TOOLS}:guarded_note",))], FunctionModel(scripted),
        aggregator="concat", planner=lambda task: [("clerk", task)], on_event=[heard.append],
    )  # fmt: skip
    lead = Executor(
        [Role(name="lead", tools=("payroll",))], FunctionModel(scripted),
        tools=[clerk.as_tool("payroll")], aggregator="concat", backend=backend,
    )  # fmt: skip
    result = await lead.run(
        "t", subtasks=[("lead", _script([("payroll", {"instruction": calls})]))]
    )
    assert result.subtasks["s1"].text == f"## s1 (clerk)\ndenied: {CANNOT_WAIT}"
    assert not [e for e in heard if isinstance(e, ApprovalRequested)]
    (decided,) = [e for e in heard if isinstance(e, ApprovalDecided)]
    assert (decided.approved, decided.by) == (False, NOBODY_BY)
    assert not notes.exists()


async def test_a_resumed_workers_stored_decision_is_told_as_it_starts_again(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """Two workers paused on calls waiting in the store, decided, and the run resumed:
    each tells its decision as it starts again, before the other starts, as one
    process does. From an actor it was told only once the worker ran there, after
    both had started (the pool started, and room found in an actor), and the actor's
    gate's event would have been a second one."""
    notes, db = tmp_path / "notes", tmp_path / "runs.db"
    role = Role(name="a", tools=(f"{TOOLS}:guarded_note",))

    def executor() -> Executor:
        return Executor(
            [role], FunctionModel(scripted), aggregator="concat", backend=backend, store=db
        )

    plan = [
        ("a", _script([("guarded_note", {"path": str(notes), "text": text})]))
        for text in ("one", "two")
    ]
    waiting = await executor().run("t", subtasks=plan, run_id="r2")
    assert waiting.status == "waiting"
    for pending in waiting.pending:
        await executor().decide(
            "r2", pending.call_id, approve=True, worker=pending.worker, by="ann"
        )
    heard: list[Event] = []
    done = await executor().resume("r2", on_event=[heard.append])
    assert done.status == "ok"
    for worker in ("s1", "s2"):
        (started,) = [
            i for i, e in enumerate(heard) if isinstance(e, WorkerStarted) and e.worker == worker
        ]
        (decided,) = [
            i for i, e in enumerate(heard) if isinstance(e, ApprovalDecided) and e.worker == worker
        ]
        assert decided == started + 1
        told = heard[decided]
        assert isinstance(told, ApprovalDecided)
        assert (told.turn, told.call_id, told.approved, told.by) == (1, "c0_0", True, "ann")
    assert sorted(notes.read_text().split()) == ["one", "two"]


@pytest.mark.parametrize("max_workers", [1, 4])
async def test_a_worker_whose_approver_asks_a_person_leaves_its_room_in_the_actor(
    ray_session: None, tmp_path: Path, max_workers: int
) -> None:
    # One process gives a worker's slot of max_workers back while its approver asks a
    # person; on Ray it held its room in the actor (workers_per_actor) all along, and
    # the run's other worker waited for the person's answer (here, for ever: the
    # person answers once that other worker has finished).
    other_done = asyncio.Event()

    async def person(request: ApprovalRequest) -> Decision:
        await other_done.wait()
        return Decision(approve=True)

    def heard(event: Event) -> None:
        if isinstance(event, WorkerFinished) and event.worker == "s2":
            other_done.set()

    pool = RayBackend(actors=1, workers_per_actor=1, actor_cpus=0)
    role = Role(name="r", tools=(f"{TOOLS}:guarded_note", f"{TOOLS}:echo"))
    ex = Executor(
        [role], FunctionModel(scripted), aggregator="concat", backend=pool, approver=person,
        policy=Policy(max_workers=max_workers),
    )  # fmt: skip
    asks = _script([("guarded_note", {"path": str(tmp_path / "notes"), "text": "x"})])
    quick = _script([("echo", {"text": "q", "delay": 0})])
    try:
        with anyio.fail_after(60):
            result = await ex.run("t", subtasks=[("r", asks), ("r", quick)], on_event=[heard])
    finally:
        pool.stop()
    assert (result.subtasks["s1"].text, result.subtasks["s2"].text) == ("noted x", "q")


def _merging(request: ModelRequest) -> AssistantMessage | str:
    """The merger asks the clerk agent to note a line in the file its task names; the
    clerk asks to (a call that needs approval), then says what came of it."""
    role, seen = role_of(request), observations(request)
    if role == "researcher":
        return "found"
    if role == "merger":
        if seen:
            return f"merged: {seen[0].content}"
        return AssistantMessage(tool_calls=(call("clerk", {"instruction": _notes(request)}),))
    if seen:
        return f"clerk: {seen[0].content}"
    return AssistantMessage(
        tool_calls=(call("guarded_note", {"path": _notes(request), "text": "hi"}),)
    )


def _notes(request: ModelRequest) -> str:
    """The notes file the run's task names (the merger is told it, and the clerk)."""
    found = re.search(r"/\S+/notes\b", " ".join(str(m.content) for m in request.messages))
    assert found is not None
    return found.group()


async def _decides_nothing(request: ApprovalRequest) -> Decision:
    raise LeftWaiting("the input ended")  # Ctrl-D at the terminal's prompt


async def test_an_agent_of_the_aggregator_whose_approver_decides_nothing_is_told_why(
    backend: RayBackend | None, tmp_path: Path
) -> None:
    """A stored run's aggregator calls an agent whose call needs approval, and the
    approver decides nothing: the call cannot wait, and is denied saying why. From an
    actor, it said 'the run has no store to wait in' (why it could not wait stayed at
    the driver)."""
    notes = tmp_path / "notes"
    executor = Executor(
        [Role(name="researcher"), Role(name="clerk", tools=(f"{TOOLS}:guarded_note",)),
         Role(name="merger", instructions="Merge.", tools=("agent:clerk",))],
        FunctionModel(_merging), aggregator="merger", approver=_decides_nothing,
        store=tmp_path / "runs.db", backend=backend,
    )  # fmt: skip
    result = await executor.run(f"note into {notes}", subtasks=[("researcher", "look")])
    said = f"denied: the approver decided nothing (the input ended) and {NOT_WAITING}"
    assert result.answer_text == f"merged: clerk: {said}"
    assert not notes.exists()
