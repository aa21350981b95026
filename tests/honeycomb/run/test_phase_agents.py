"""The agents a stored run's planner or aggregator calls (``agent:`` tools) are kept in
its store as a subtask's are, and the approver's decisions on their calls and on the
planner's or aggregator's own are kept too: a run stopped while one of them worked, and
resumed, makes no side effect twice and asks nobody again about a call decided."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor, Role, RunResult, tool
from honeycomb.models import Model, cassette
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from runtime import AssistantMessage, ModelRequest
from runtime.tools.approvals import ApprovalRequest, Decision
from tests.support.model_requests import Answer, observations, role_of
from tests.support.stores import Where

pytestmark = pytest.mark.timeout(60)

PLAN = json.dumps({"subtasks": [{"id": "s1", "role": "w", "instruction": "go"}]})


class Phase:
    """A run whose planner or aggregator (``phase``) calls its agent ``clerk`` (or,
    not ``nested``, its tools itself): the one that calls ``send`` (side effects),
    ``note`` and ``check`` (both need approval) in one turn, then answers. The run's
    first life is stopped where ``stop`` says: at that answer (``answer``), or as the
    approver is asked about ``check`` (``asking``)."""

    def __init__(self, phase: str, *, nested: bool, stop: str = "answer") -> None:
        self.phase, self.nested, self.stop = phase, nested, stop
        self.sent: list[str] = []
        self.asked: list[str] = []  # the tools the approver was asked about
        self.reached = asyncio.Event()  # where the first life stops
        self.released = False

        @tool(side_effects=True)
        async def send(to: str) -> str:
            """Send a message."""
            self.sent.append(to)
            return f"sent to {to}"

        @tool(approval=True)
        async def note(text: str) -> str:
            """Note something down."""
            return f"noted {text}"

        @tool(approval=True)
        async def check(text: str) -> str:
            """Check something."""
            return f"checked {text}"

        self.tools = [send, note, check]

    def executor(self, store: RunStore | None, model: Model | None = None) -> Executor:
        own = ("agent:clerk",) if self.nested else ("send", "note", "check")
        roles = [
            Role(name="w"),
            Role(name="clerk", tools=("send", "note", "check")),
            Role(name=self.phase, instructions="Do it.", tools=own),
        ]
        return Executor(
            roles,
            model or FunctionModel(self.answer),
            tools=self.tools,
            store=store,
            approver=self._decide,
            planner="planner" if self.phase == "planner" else None,
            aggregator="aggregator" if self.phase == "aggregator" else "concat",
        )

    async def answer(self, request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "w":
            return "w's result"
        if role == self.phase and self.nested:
            if not seen:
                return AssistantMessage(tool_calls=(call("clerk", {"instruction": "go"}),))
            return PLAN if self.phase == "planner" else f"merged: {seen[0].content}"
        if not seen:
            asked = [("send", {"to": "ops"}), ("note", {"text": "x"}), ("check", {"text": "y"})]
            calls = (call(name, given, id=f"c{n}") for n, (name, given) in enumerate(asked))
            return AssistantMessage(tool_calls=tuple(calls))
        await self._stopped_at("answer")
        return PLAN if role == "planner" else " / ".join(o.content for o in seen)

    async def _decide(self, request: ApprovalRequest) -> Decision:
        self.asked.append(request.tool)
        if request.tool == "check":
            await self._stopped_at("asking")
        return Decision.approved()

    async def _stopped_at(self, where: str) -> None:
        if self.stop == where:
            self.reached.set()
            if not self.released:
                await asyncio.Event().wait()  # the process stops here

    async def two_lives(self, db: Where) -> RunResult:
        given: Any = [("w", "go")] if self.phase == "aggregator" else None
        store = RunStore(db)
        run = asyncio.create_task(self.executor(store).run("t", subtasks=given, run_id="r1"))
        await self.reached.wait()
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
        store.close()
        self.released = True
        store = RunStore(db)
        try:
            return await self.executor(store).resume("r1")
        finally:
            store.close()


@pytest.mark.parametrize("phase", ["planner", "aggregator"])
async def test_an_agent_the_planner_or_aggregator_calls_is_continued_not_run_again(
    store: Where, phase: str
) -> None:
    """Its nested worker was not kept: the resumed run ran it again from its first
    turn, which sent again, and asked the approver again about the calls decided."""
    run = Phase(phase, nested=True)
    result = await run.two_lives(store)
    assert result.status == "ok"
    assert run.sent == ["ops"]  # the journal answered the resumed call
    assert run.asked == ["note", "check"]  # their decisions were kept
    kept = RunStore(store)
    stored = await kept.load("r1")
    kept.close()
    assert stored is not None
    [nested] = [name for name in stored.workers if "/" in name]
    assert nested.startswith("plan:1.1:" if phase == "planner" else "aggregate:")
    assert [e.status for e in stored.workers[nested].journal.values()] == ["ok"]
    assert all(e.decision is not None for e in stored.workers[nested].approvals.values())


@pytest.mark.parametrize("nested", [False, True], ids=["its own call", "its agent's"])
@pytest.mark.parametrize("phase", ["planner", "aggregator"])
async def test_the_approvers_decision_on_a_planners_or_aggregators_call_stands_when_resumed(
    db: Path, phase: str, nested: bool
) -> None:
    """The run stopped as the approver was asked about a turn's second call: the
    resumed run asked it again about the first, decided already."""
    run = Phase(phase, nested=nested, stop="asking")
    result = await run.two_lives(db)
    assert result.status == "ok"
    assert run.sent == ["ops"]
    assert run.asked == ["note", "check", "check"]
    if phase == "aggregator" and not nested:
        assert result.answer == "sent to ops / noted x / checked y"


async def test_an_aggregators_agent_recorded_with_a_store_is_replayed_without_one(
    db: Path, tmp_path: Path
) -> None:
    """Its nested worker is named after the aggregator's attempt with a store or
    without: the decision a recording kept for it is found by a replay of either."""
    tape = tmp_path / "t.jsonl"
    run = Phase("aggregator", nested=True, stop="none")
    store = RunStore(db)
    recorded = await run.executor(store, cassette(FunctionModel(run.answer), record=tape)).run(
        "t", subtasks=[("w", "go")]
    )
    store.close()
    assert recorded.answer == "merged: sent to ops / noted x / checked y"
    for kept in (RunStore(tmp_path / "other.db"), None):
        model = cassette(FunctionModel(run.answer), replay=tape)
        replayed = await run.executor(kept, model).run("t", subtasks=[("w", "go")])
        assert replayed.answer == recorded.answer
        if kept is not None:
            kept.close()
