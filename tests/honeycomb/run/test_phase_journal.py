"""A run's planner and aggregator are kept in its store turn by turn, as its subtasks'
workers are: a run stopped after one of them made a side-effecting call, and resumed,
makes that call once in all; and the store, `honeycomb trace` and cassettes read such a
run as any other."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from honeycomb import Executor, Policy, Role, RunResult, ToolContext, tool
from honeycomb.cli import main
from honeycomb.errors import OutcomeUnknown, PlanError
from honeycomb.models import Model, cassette
from honeycomb.run.context import NOT_WAITING
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, call
from runtime import AssistantMessage, ModelRequest
from runtime.tools.approvals import ApprovalRequest, Decision, LeftWaiting
from tests.support.model_requests import Answer, observations, role_of

pytestmark = pytest.mark.timeout(60)

WORKER = Role(name="w")


async def stopped_when(reached: asyncio.Event, executor: Executor, **given: Any) -> None:
    """Run ``r1`` of ``executor`` until ``reached`` is set, then stop it (as Ctrl-C
    would)."""
    run = asyncio.create_task(executor.run("t", run_id="r1", **given))
    await reached.wait()
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run


class Mailroom:
    """A side-effecting ``send`` tool that counts what it sent, and a model whose
    planner or aggregator (``phase``) calls it, then answers; until ``released``, its
    answer after the call waits: the run can be stopped there."""

    def __init__(self, phase: str) -> None:
        self.phase = phase
        self.sent: list[str] = []
        self.keys: list[str] = []
        self.called = asyncio.Event()  # the answer after the call was asked for
        self.asked = 0  # the phase's model calls
        self.released = False

        @tool(side_effects=True)
        async def send(to: str, context: ToolContext) -> str:
            """Send a message."""
            self.sent.append(to)
            self.keys.append(context.idempotency_key)
            return f"sent to {to}"

        self.tool = send

    def roles(self) -> list[Role]:
        return [WORKER, Role(name=self.phase, instructions="Do it.", tools=("send",))]

    def model(self) -> FunctionModel:
        async def answer(request: ModelRequest) -> Answer:
            if role_of(request) != self.phase:
                return "w's result"
            self.asked += 1
            if not observations(request):
                return AssistantMessage(tool_calls=(call("send", {"to": "ops"}, id="c1"),))
            self.called.set()
            if not self.released:
                await asyncio.Event().wait()  # the process stops here
            if self.phase == "planner":
                return json.dumps({"subtasks": [{"id": "s1", "role": "w", "instruction": "go"}]})
            return "merged, and ops told"

        return FunctionModel(answer)

    def executor(self, store: RunStore, model: Model | None = None) -> Executor:
        return Executor(
            self.roles(),
            model or self.model(),
            tools=[self.tool],
            store=store,
            aggregator="aggregator" if self.phase == "aggregator" else "concat",
        )

    async def stopped_after_the_call(self, db: Path) -> None:
        """The run's first life, stopped (as Ctrl-C would) once the call was made."""
        store = RunStore(db)
        given = [("w", "go")] if self.phase == "aggregator" else None
        await stopped_when(self.called, self.executor(store), subtasks=given)
        assert store.find("r1").status == "interrupted"  # type: ignore[union-attr]
        store.close()

    async def resumed(self, db: Path, model: Model | None = None) -> RunResult:
        self.released = True
        store = RunStore(db)
        try:
            return await self.executor(store, model).resume("r1")
        finally:
            store.close()


@pytest.mark.parametrize("phase", ["planner", "aggregator"])
async def test_a_run_resumed_after_its_planners_or_aggregators_side_effect_makes_it_once(
    db: Path, phase: str
) -> None:
    mail = Mailroom(phase)
    await mail.stopped_after_the_call(db)
    assert mail.sent == ["ops"]
    result = await mail.resumed(db)
    assert result.status == "ok"
    assert mail.sent == ["ops"]  # not sent again: the journal answered the call
    if phase == "aggregator":
        assert result.answer == "merged, and ops told"
    else:
        assert list(result.subtasks) == ["s1"]
    store = RunStore(db)
    stored = await store.load("r1")
    store.close()
    assert stored is not None
    [kept] = [name for name in stored.workers if name != "s1"]  # its own name in the run
    assert kept.startswith("plan:1.1:" if phase == "planner" else "aggregate:")
    assert [(e.tool, e.status) for e in stored.workers[kept].journal.values()] == [("send", "ok")]


async def test_a_resumed_aggregator_that_had_finished_is_not_asked_again(db: Path) -> None:
    mail = Mailroom("aggregator")
    await mail.stopped_after_the_call(db)
    first = await mail.resumed(db)
    assert mail.asked == 3  # its call; its answer, stopped; its answer again, resumed
    # Should the run stop after its aggregator ended (an output guard's judge, a
    # crash), the run read again from its store has the answer the aggregator gave.
    store = RunStore(db)
    row = "UPDATE runs SET status = 'interrupted', result = NULL WHERE run_id = 'r1'"
    await store.commit((row, ()))
    again = await mail.executor(store).resume("r1")
    store.close()
    assert again.answer == first.answer
    assert mail.asked == 3
    assert mail.sent == ["ops"]


async def test_a_stored_run_whose_aggregator_made_a_side_effect_is_traced_and_replayed(
    db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mail = Mailroom("aggregator")
    mail.released = True
    tape = tmp_path / "t.jsonl"
    store = RunStore(db)
    recorded = await mail.executor(store, cassette(mail.model(), record=tape)).run(
        "t", subtasks=[("w", "go")], run_id="r1"
    )
    stored = await store.load("r1")
    store.close()
    assert stored is not None
    assert sorted(name.split(":")[0] for name in stored.workers) == ["aggregate", "s1"]
    assert await asyncio.to_thread(main, ["trace", "r1", "--store", str(db)]) == 0
    shown = capsys.readouterr().out
    assert "run r1 · ok" in shown
    assert "critical path     " in shown
    assert "1 tool" in shown  # the aggregator's
    store = RunStore(tmp_path / "other.db")
    replayed = await mail.executor(store, cassette(mail.model(), replay=tape)).run(
        "t", subtasks=[("w", "go")], run_id="r2"
    )
    store.close()
    assert replayed.answer == recorded.answer
    assert mail.sent == ["ops", "ops"]  # once a run
    assert mail.keys[0] != mail.keys[1]


async def test_a_resumed_run_whose_planner_fails_again_has_no_partial_result(db: Path) -> None:
    sent: list[str] = []
    stopped = asyncio.Event()
    released = False

    @tool(side_effects=True)
    async def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        return f"sent to {to}"

    async def planner(request: ModelRequest) -> Answer:
        if role_of(request) != "planner":
            return "w's result"
        if "fix these problems" in str(request.messages[1].content):  # its second attempt
            stopped.set()
            if not released:
                await asyncio.Event().wait()  # the process stops here
            return "no plan either"
        if not observations(request):
            return AssistantMessage(tool_calls=(call("send", {"to": "ops"}, id="c1"),))
        return "no plan"

    def executor(store: RunStore) -> Executor:
        planner_role = Role(name="planner", instructions="Plan.", tools=("send",), output_retries=0)
        roles = [WORKER, planner_role]
        policy = Policy(plan_attempts=2)
        return Executor(roles, FunctionModel(planner), tools=[send], store=store, policy=policy)

    store = RunStore(db)
    await stopped_when(stopped, executor(store))
    store.close()
    released = True
    store = RunStore(db)
    with pytest.raises(PlanError) as raised:
        await executor(store).resume("r1")
    store.close()
    assert sent == ["ops"]
    assert raised.value.partial is None  # no subtask ran: the planner's worker is none


async def test_an_aggregators_idempotent_call_cut_off_is_made_again_with_its_own_key(
    db: Path,
) -> None:
    keys: list[str] = []
    inside = asyncio.Event()
    released = False

    @tool(side_effects=True, idempotent=True)
    async def charge(amount: int, context: ToolContext) -> str:
        """Charge the customer."""
        keys.append(context.idempotency_key)
        inside.set()
        if not released:
            await asyncio.Event().wait()  # the process stops as the service charges
        return "charged"

    def answer(request: ModelRequest) -> Answer:
        if role_of(request) != "aggregator":
            return "w's result"
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=(call("charge", {"amount": 3}, id="c1"),))
        return f"merged: {seen[0].content}"

    def executor(store: RunStore) -> Executor:
        roles = [WORKER, Role(name="aggregator", tools=("charge",))]
        return Executor(roles, FunctionModel(answer), tools=[charge], store=store)

    store = RunStore(db)
    await stopped_when(inside, executor(store), subtasks=[("w", "go")])
    store.close()
    released = True
    store = RunStore(db)
    result = await executor(store).resume("r1")
    store.close()
    assert result.answer == "merged: charged"
    assert len(keys) == 2
    assert keys[0] == keys[1]  # the service charges once


async def test_a_planners_call_of_unknown_outcome_under_fail_fails_the_run(db: Path) -> None:
    sent: list[str] = []
    inside = asyncio.Event()
    released = False

    @tool(side_effects=True)
    async def send(to: str) -> str:
        """Send a message."""
        sent.append(to)
        inside.set()
        if not released:
            await asyncio.Event().wait()  # the process stops as it sends
        return f"sent to {to}"

    def planner(request: ModelRequest) -> Answer:
        if role_of(request) != "planner":
            return "w's result"
        if not observations(request):  # each attempt, asked afresh, sends first
            return AssistantMessage(tool_calls=(call("send", {"to": "ops"}, id="c1"),))
        return json.dumps({"subtasks": [{"id": "s1", "role": "w", "instruction": "go"}]})

    def executor(store: RunStore) -> Executor:
        roles = [WORKER, Role(name="planner", instructions="Plan.", tools=("send",))]
        policy = Policy(on_unknown_outcome="fail")
        return Executor(roles, FunctionModel(planner), tools=[send], store=store, policy=policy)

    store = RunStore(db)
    await stopped_when(inside, executor(store))
    store.close()
    released = True
    store = RunStore(db)
    with pytest.raises(OutcomeUnknown):  # not another attempt, which would send again
        await executor(store).resume("r1")
    store.close()
    assert sent == ["ops"]


async def test_a_store_that_fails_to_keep_the_aggregators_result_fails_nothing(db: Path) -> None:
    mail = Mailroom("aggregator")
    mail.released = True
    store = RunStore(db)
    await store.open()
    refused = "SELECT RAISE(ABORT, 'disk full'); END"
    for when in ("INSERT", "UPDATE"):  # the aggregator's result, as a full disk would
        trigger = (
            f"CREATE TRIGGER no_{when.lower()} BEFORE {when} ON workers "
            f"WHEN NEW.worker LIKE 'aggregate:%' AND NEW.result IS NOT NULL BEGIN {refused}"
        )
        await store.commit((trigger, ()))
    result = await mail.executor(store).run("t", subtasks=[("w", "go")], run_id="r1")
    assert result.answer == "merged, and ops told"  # the run did not fail of it
    stored = await store.load("r1")
    store.close()
    assert stored is not None
    assert stored.status == "ok"
    [kept] = [name for name in stored.workers if name != "s1"]
    assert stored.workers[kept].result is None  # a resumed run would continue it


async def test_the_aggregators_spans_go_to_the_store_with_its_result(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run reads a kept result back and never runs that worker again: the spans that
    ended before it must go to the store no later than it, or a crash after the
    result's write loses them from the run's trace for good (as a subtask's go with its
    result): the aggregator's last model call's span went with the run's end."""
    mail = Mailroom("aggregator")
    mail.released = True
    store = RunStore(db)
    spans: list[str] = []  # the spans handed to the store so far
    before: list[str] = []  # those as the aggregator's result was
    save, write = store.save, store.write

    def saved(*statements: Any, **options: Any) -> None:
        spans.extend(row[1] for text, row in statements if "INTO spans" in text)
        save(*statements, **options)

    def written(*statements: Any, **options: Any) -> None:
        if any("aggregate:" in str(row) for _, row in statements):
            before.extend(spans)
        write(*statements, **options)

    monkeypatch.setattr(store, "save", saved)
    monkeypatch.setattr(store, "write", written)
    await mail.executor(store).run("t", subtasks=[("w", "go")], run_id="r1")
    store.close()
    calls = [s for batch in before for s in json.loads(batch) if s[2] == "model_call"]
    assert [s[8] for s in calls].count("aggregator") == 2  # asked for a tool, then answered


async def test_an_approver_that_decides_nothing_on_an_aggregators_call_is_told_why_it_is_denied(
    db: Path,
) -> None:
    """A stored run's aggregator calls a tool that needs approval, and its approver
    decides nothing (Ctrl-D at the terminal's prompt): the call cannot wait in the
    store, so it is denied, saying why. It said 'the run has no store to wait in',
    false of a stored run."""

    @tool(approval=True)
    async def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    async def answer(request: ModelRequest) -> Answer:
        if role_of(request) != "aggregator":
            return "w's result"
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}, id="c1"),))
        return seen[0].content

    async def closed(request: ApprovalRequest) -> Decision:
        raise LeftWaiting("the input ended")

    roles = [WORKER, Role(name="aggregator", instructions="Do it.", tools=("pay",))]
    executor = Executor(
        roles, FunctionModel(answer), tools=[pay], store=RunStore(db),
        aggregator="aggregator", approver=closed,
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("w", "go")], run_id="r1")
    assert (
        result.answer == f"denied: the approver decided nothing (the input ended) and {NOT_WAITING}"
    )
    assert "no store" not in NOT_WAITING
