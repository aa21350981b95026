"""What the run store says of nested workers (``agent:ROLE``) that do not end with an
answer of their own, and the names a resumed run gives them: every view of a run reads
its workers' states there."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from honeycomb import BudgetExceeded, Budgets, Executor, Policy, Role, tool
from honeycomb.planning import RolePlanner
from honeycomb.run.events import WorkerFinished, WorkerStarted
from honeycomb.run.shown import stored_timeline, worker_statuses
from honeycomb.store import RunStore, StoredRun
from honeycomb.testing import FunctionModel
from honeycomb.trace.spans import SpanRecorder
from runtime import AssistantMessage, Event, ModelRequest
from runtime.limits.cut import run_cut
from runtime.testing import call
from tests.honeycomb.run.test_agents import task_of, waiting_calls
from tests.support.concurrency import MEET_LIMIT_S
from tests.support.model_requests import Answer, observations, role_of
from tests.support.stores import Where

ONE = [{"id": "s1", "role": "lead", "instruction": "find out"}]


async def loaded(store: Where, run_id: str = "r1") -> StoredRun:
    stored = await RunStore(store).load(run_id)
    assert stored is not None
    return stored


async def interrupted_at(run: Callable[[], Awaitable[object]], reached: anyio.Event) -> None:
    """Run ``run`` until ``reached`` is set, then cancel it (the run is interrupted)."""
    with anyio.fail_after(MEET_LIMIT_S):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await reached.wait()
            tg.cancel_scope.cancel()


async def test_a_nested_worker_its_call_cut_off_is_stored_cancelled_through_a_resume(
    store: Where,
) -> None:
    """A lead's tool_timeout cut its nested worker off: the trace said ``cancelled``, the
    store kept it ``running``, and every view showed it running while the run, and a
    resumed life of it, went on."""
    events: list[Event] = []
    life = {"now": 1}
    asked: list[tuple[str, int]] = []
    lead_again = anyio.Event()

    @tool
    async def slow(query: str) -> str:
        """Take long."""
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def model(request: ModelRequest) -> Answer:
        role = role_of(request)
        asked.append((role, life["now"]))
        seen = observations(request)
        if role == "researcher":
            return AssistantMessage(tool_calls=(call("slow", {"query": "x"}),))
        if not seen:
            asks = call("researcher", {"instruction": "go"}, id="c1")
            return AssistantMessage(tool_calls=(asks,))
        if life["now"] == 1:  # the run is interrupted as the lead reads the time out
            lead_again.set()
            await anyio.sleep_forever()
        return f"lead: {seen[0].status}"

    def executor() -> Executor:
        return Executor(
            [Role(name="lead", tools=("agent:researcher",), tool_timeout=0.2),
             Role(name="researcher", tools=("slow",))],
            FunctionModel(model), tools=[slow], aggregator="concat", store=store,
            on_event=[events.append],
        )  # fmt: skip

    await interrupted_at(lambda: executor().run("t", subtasks=ONE, run_id="r1"), lead_again)
    ends = [e.status for e in events if isinstance(e, WorkerFinished) and e.worker == "s1/c1"]
    assert ends == ["cancelled"]
    stored = await loaded(store)
    assert stored.workers["s1/c1"].status == "cancelled"
    assert worker_statuses(stored) == {"s1": "interrupted", "s1/c1": "cancelled"}

    life["now"] = 2
    result = await executor().resume("r1")

    assert result.subtasks["s1"].text == "lead: timeout"
    assert [role for role, when in asked if when == 2] == ["lead"]  # its call is over
    stored = await loaded(store)
    assert stored.workers["s1/c1"].status == "cancelled"
    assert worker_statuses(stored, "running")["s1/c1"] == "cancelled"  # as the run went
    assert worker_statuses(stored)["s1/c1"] == "cancelled"


async def test_a_nested_worker_a_resumed_run_continues_is_running_again(store: Where) -> None:
    """A nested worker cut off as its run was interrupted is stored ``cancelled``; the
    resumed run that continues it stores it ``running`` while it works, then its
    answer."""
    life = {"now": 1}
    looked = anyio.Event()
    stored_as: list[str] = []  # what the store says of the nested worker as it goes on

    @tool
    async def look(query: str) -> str:
        """Look something up."""
        if life["now"] == 1:
            looked.set()
            await anyio.sleep_forever()
        stored_as.append((await loaded(store)).workers["s1/c1"].status)
        return f"result for {query}"

    def model(request: ModelRequest) -> Answer:
        seen = observations(request)
        if role_of(request) == "researcher":
            if not seen:
                return AssistantMessage(tool_calls=(call("look", {"query": "q"}),))
            return f"dug: {seen[0].content}"
        if not seen:
            asks = call("researcher", {"instruction": "dig"}, id="c1")
            return AssistantMessage(tool_calls=(asks,))
        return f"lead: {seen[0].content}"

    def executor() -> Executor:
        return Executor(
            [Role(name="lead", tools=("agent:researcher",)),
             Role(name="researcher", tools=("look",))],
            FunctionModel(model), tools=[look], aggregator="concat", store=store,
        )  # fmt: skip

    await interrupted_at(lambda: executor().run("t", subtasks=ONE, run_id="r1"), looked)
    assert (await loaded(store)).workers["s1/c1"].status == "cancelled"

    life["now"] = 2
    result = await executor().resume("r1")

    assert result.subtasks["s1"].text == "lead: dug: result for q"
    assert stored_as == ["running"]
    assert (await loaded(store)).workers["s1/c1"].status == "ok"


async def test_a_leads_nested_workers_of_a_resumed_life_have_names_of_their_own(
    store: Where,
) -> None:
    """A lead planning in rounds, resumed as it planned its second round, was asked for
    it again, and its helper, which a model numbering its calls anew called call_1
    again, was lead/call_1 as in the first life: one row of the trace for two workers.
    Each is named after the attempt that called it, kept in the store, and the resumed
    life continues the second round's: one worker, one row."""
    events: list[Event] = []
    life = {"now": 1}
    helping = anyio.Event()
    told_lead: list[str] = []  # what the lead was asked, in order

    async def model(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "helper":
            if life["now"] == 1 and "Planning round 2" in told_lead[-1]:
                helping.set()  # the first life is interrupted here
                await anyio.sleep_forever()
            return "helped"
        if role == "worker":
            return "found"
        told_lead.append(str(request.messages[1].content))
        if not seen:  # the same id as a local model numbers it
            asks = call("helper", {"instruction": "h"}, id="call_1")
            return AssistantMessage(tool_calls=(asks,))
        more = "Planning round 2" not in told_lead[-1]
        subtasks = [{"id": "s1", "role": "worker", "instruction": "w"}] if more else []
        return json.dumps({"subtasks": subtasks})

    def executor() -> Executor:
        return Executor(
            [Role(name="lead", tools=("agent:helper",)), Role(name="helper"),
             Role(name="worker")],
            FunctionModel(model), planner=RolePlanner("lead", rounds=3, roles=["worker"]),
            aggregator="concat", store=store, on_event=[events.append],
        )  # fmt: skip

    await interrupted_at(lambda: executor().run("bees", run_id="r1"), helping)
    life["now"] = 2
    result = await executor().resume("r1")

    assert result.rounds_ended == "done"
    nested = [e.worker for e in events if isinstance(e, WorkerStarted) and e.parent == "lead"]
    first, second, again = nested
    assert first.startswith("plan:1.1:")
    assert first.endswith("/call_1")
    assert second.startswith("plan:2.1:")
    assert again == second  # continued, not run anew
    spans = RunStore(store).spans("r1")
    rows = stored_timeline(await loaded(store), spans).workers
    assert [r.name for r in rows if r.name.startswith("plan:")] == [first, second]


async def test_a_nested_worker_beside_a_paused_one_runs_once_when_the_turn_goes_on(
    tmp_path: Path,
) -> None:
    """A lead's turn called two researchers: one paused for approval, the other posted a
    note and answered. Decided while the run went on, the turn ran again in the same
    life, and the one that had answered ran anew: its model asked again, and its
    side-effecting post made twice (a resumed run answers it from the store)."""
    posted: list[str] = []
    asked: list[str] = []
    sent_it = threading.Event()

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        sent_it.set()
        return "sent"

    @tool(side_effects=True)
    def post(text: str) -> str:
        """Post a note."""
        posted.append(text)
        return "posted"

    async def read(topic: str) -> str:
        """Read until the message is sent: the run goes on meanwhile."""
        if await anyio.to_thread.run_sync(sent_it.wait, MEET_LIMIT_S, abandon_on_cancel=True):
            return "read"
        return "gave up: the message was not sent while the run went on"

    def model(request: ModelRequest) -> Answer:
        role, seen, told = role_of(request), observations(request), task_of(request)
        asked.append(f"{role}: {told}")
        if role == "lead":
            if seen:
                return "lead: " + " | ".join(f"{o.status}:{o.content}" for o in seen)
            return AssistantMessage(
                tool_calls=(
                    call("researcher", {"instruction": "send hi"}, id="c1"),
                    call("researcher", {"instruction": "post a note"}, id="c2"),
                )
            )
        if seen:
            return seen[0].content
        if role == "reader":
            return AssistantMessage(tool_calls=(call("read", {"topic": "bees"}),))
        wanted = call("send", {"text": "hi"}) if told == "send hi" else call("post", {"text": "n"})
        return AssistantMessage(tool_calls=(wanted,))

    service = Executor(
        [Role(name="lead", tools=("agent:researcher",)),
         Role(name="researcher", tools=("send", "post")), Role(name="reader", tools=("read",))],
        FunctionModel(model), tools=[send, post, tool(read)], aggregator="concat",
        store=tmp_path / "runs.db",
    )  # fmt: skip
    plan = [*ONE, {"id": "s2", "role": "reader", "instruction": "read"}]
    results = []

    async def run() -> None:
        results.append(await service.run("bees", subtasks=plan, run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        (waiting,) = await waiting_calls(service, "r1")
        await service.decide("r1", waiting.call_id, approve=True, worker=waiting.worker)
    (done,) = results

    assert done.subtasks["s2"].text == "read"  # decided in the same life
    assert done.subtasks["s1"].text == "lead: ok:sent | ok:posted"
    assert posted == ["n"]
    assert asked.count("researcher: post a note") == 2  # its call, then its answer


@pytest.mark.parametrize("budgets", [Budgets(model_calls=4), Budgets(wall_time_s=1.5)])
async def test_a_nested_worker_a_budget_stopped_with_its_caller_is_over_budget(
    tmp_path: Path, budgets: Budgets
) -> None:
    """A budget stopped the run as a lead's nested worker waited on a tool (a sibling
    subtask's calls refused, or the wall time ran out): the lead was ``over_budget`` in
    its result, event, span and views, its nested worker ``cancelled`` in its event,
    span, store and views."""
    events: list[Event] = []
    recorder = SpanRecorder()
    began = anyio.Event()

    @tool
    async def slow(query: str) -> str:
        """Take long."""
        began.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def model(request: ModelRequest) -> Answer:
        role, seen = role_of(request), observations(request)
        if role == "other":  # its second turn of calls is past the model calls
            await began.wait()
            return AssistantMessage(tool_calls=(call("quick", {"query": "x"}),))
        if role == "researcher":
            return AssistantMessage(tool_calls=(call("slow", {"query": "x"}),))
        assert not seen, "the lead goes on only once its nested worker answered"
        return AssistantMessage(tool_calls=(call("researcher", {"instruction": "go"}, id="c1"),))

    @tool
    def quick(query: str) -> str:
        """Answer at once."""
        return query

    store = tmp_path / "runs.db"
    executor = Executor(
        [Role(name="lead", tools=("agent:researcher",)), Role(name="researcher", tools=("slow",)),
         Role(name="other", tools=("quick",))],
        FunctionModel(model), tools=[slow, quick], aggregator="concat", store=store,
        policy=Policy(budgets=budgets), on_event=[events.append, recorder],
    )  # fmt: skip
    plan = [*ONE, {"id": "s2", "role": "other", "instruction": "y"}]
    with pytest.raises(BudgetExceeded):
        await executor.run("t", subtasks=plan, run_id="r1")

    ends = {e.worker: e.status for e in events if isinstance(e, WorkerFinished)}
    assert (ends["s1"], ends["s1/c1"]) == ("over_budget", "over_budget")
    spans = {s.worker: s.status for s in recorder.spans if s.kind == "worker"}
    assert (spans["s1"], spans["s1/c1"]) == ("over_budget", "over_budget")
    stored = await loaded(store)
    assert stored.workers["s1/c1"].status == "over_budget"
    shown = worker_statuses(stored)
    assert (shown["s1"], shown["s1/c1"]) == ("over_budget", "over_budget")


async def test_a_planners_nested_worker_the_wall_time_cut_off_is_over_budget() -> None:
    """The wall time ran out as the planner's nested worker worked: the plan's span was
    ``over_budget``, its nested worker's event and span ``cancelled``."""
    events: list[Event] = []
    recorder = SpanRecorder()

    async def model(request: ModelRequest) -> Answer:
        if role_of(request) == "helper":
            await anyio.sleep_forever()  # until the wall time cuts it off
        asks = call("helper", {"instruction": "h"}, id="call_1")
        return AssistantMessage(tool_calls=(asks,))

    executor = Executor(
        [Role(name="lead", tools=("agent:helper",)), Role(name="helper"), Role(name="worker")],
        FunctionModel(model), planner=RolePlanner("lead", roles=["worker"]),
        aggregator="concat", policy=Policy(budgets=Budgets(wall_time_s=1.5)),
        on_event=[events.append, recorder],
    )  # fmt: skip
    with pytest.raises(BudgetExceeded):
        await executor.run("t")

    (ended,) = [e for e in events if isinstance(e, WorkerFinished)]
    assert ended.worker.startswith("plan:1.1:")  # the attempt's name (phase_names)
    assert (ended.worker.endswith("/call_1"), ended.status) == (True, "over_budget")
    assert ended.error is not None
    assert "wall_time_s" in ended.error
    assert ended.error.endswith("allowed by Budgets(wall_time_s=1.5)")  # where it is set
    spans = {(s.kind, s.worker): s.status for s in recorder.spans}
    assert spans["plan", None] == spans["worker", ended.worker] == "over_budget"


async def test_a_nested_worker_cut_off_as_its_answer_is_kept_is_reported_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lead's tool_timeout cut its call off after the nested worker had answered, as
    its answer was being kept: its ``worker.started`` had no ``worker.finished``."""
    from honeycomb.run.record import RunRecord

    events: list[Event] = []
    keep = RunRecord.subtask_finished

    async def slow_to_keep(self: RunRecord, outcome: Any, *, again: bool = False) -> None:
        await keep(self, outcome, again=again)
        if "/" in outcome.subtask.id:  # a nested worker's: committed, then held up
            await anyio.sleep_forever()

    monkeypatch.setattr(RunRecord, "subtask_finished", slow_to_keep)

    def model(request: ModelRequest) -> Answer:
        seen = observations(request)
        if role_of(request) == "researcher":
            return "found"
        if not seen:
            asks = call("researcher", {"instruction": "go"}, id="c1")
            return AssistantMessage(tool_calls=(asks,))
        return f"lead: {seen[0].status}"

    executor = Executor(
        [Role(name="lead", tools=("agent:researcher",), tool_timeout=0.2),
         Role(name="researcher")],
        FunctionModel(model), aggregator="concat", store=tmp_path / "runs.db",
        on_event=[events.append],
    )  # fmt: skip
    result = await executor.run("t", subtasks=ONE, run_id="r1")

    assert result.subtasks["s1"].text == "lead: timeout"
    started = [e.worker for e in events if isinstance(e, WorkerStarted)]
    ended = {e.worker: e.status for e in events if isinstance(e, WorkerFinished)}
    assert started == ["s1", "s1/c1"]
    assert ended == {"s1/c1": "ok", "s1": "ok"}
    assert (await loaded(tmp_path / "runs.db")).workers["s1/c1"].status == "ok"


async def test_a_sub_runs_worker_its_callers_wall_time_cut_off_is_over_budget() -> None:
    """A hive called as a tool spends its caller's budget, its wall time included: the
    caller's wall time cut its worker off with the caller's, which ended
    ``over_budget``, and the sub-run's worker said ``cancelled`` (its own phase had no
    stop of its own)."""
    inner: list[Event] = []

    @tool
    async def slow(query: str) -> str:
        """Take long."""
        cut = run_cut.get()
        assert cut is not None  # the calling run's: a sub-run sets no wall time
        cut.now()  # the wall time falls as the sub-run's worker works (as a replay cuts)
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    def dig(request: ModelRequest) -> Answer:
        return AssistantMessage(tool_calls=(call("slow", {"query": "x"}),))

    def lead(request: ModelRequest) -> Answer:
        return AssistantMessage(tool_calls=(call("facts", {"instruction": "go"}),))

    facts = Executor(
        [Role(name="digger", tools=("slow",))], FunctionModel(dig), tools=[slow],
        planner=lambda task: [("digger", task)], aggregator="concat", on_event=[inner.append],
    )  # fmt: skip
    outer: list[Event] = []
    executor = Executor(
        [Role(name="lead", tools=("facts",))], FunctionModel(lead),
        tools=[facts.as_tool("facts")], aggregator="concat", on_event=[outer.append],
        policy=Policy(budgets=Budgets(wall_time_s=MEET_LIMIT_S)),
    )  # fmt: skip
    with pytest.raises(BudgetExceeded) as stopped:
        await executor.run("t", subtasks=ONE)
    assert stopped.value.limit == "wall_time_s"
    assert [e.status for e in outer if isinstance(e, WorkerFinished)] == ["over_budget"]
    assert [e.status for e in inner if isinstance(e, WorkerFinished)] == ["over_budget"]
