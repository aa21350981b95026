"""Agents as tools: a role's ``agent:ROLE`` tool runs a nested worker of the run,
under the run's budget, locks, cancellation and store."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest
from rich.console import Console

from honeycomb import BudgetExceeded, ConfigErrors, Executor, Policy, Role, RunFailed, tool
from honeycomb.planning import RolePlanner
from honeycomb.run.agents import CANNOT_WAIT
from honeycomb.run.context import NOT_KEPT, NOT_WAITING
from honeycomb.run.events import WorkerStarted
from honeycomb.run.policy import Budgets
from honeycomb.run.result import timings_of
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.spans import SpanRecorder
from honeycomb.trace.terminal import render_timeline
from honeycomb.trace.timeline import build_timeline, measure
from runtime import AssistantMessage, Event, ModelRequest, ToolCall, ToolCallStarted
from runtime.testing import call
from runtime.tools.approvals import ApprovalRequest, Decision, LeftWaiting, PendingApproval
from tests.support.concurrency import MEET_LIMIT_S, Overlap, Rendezvous
from tests.support.model_requests import Answer, observations, role_of

LEAD = Role(name="lead", description="Leads.", tools=("agent:researcher",))
RESEARCHER = Role(name="researcher", description="Finds things out.")
ONE = [{"id": "s1", "role": "lead", "instruction": "find out about bees"}]


def task_of(request: ModelRequest) -> str:
    return str(request.messages[1].content)


def lead_asks(*instructions: str, name: str = "researcher") -> Callable[[ModelRequest], Answer]:
    """A lead that asks the researcher (or the tool ``name``) each of ``instructions``
    in one turn, then answers with what came back."""

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            calls = tuple(call(name, {"instruction": i}) for i in instructions)
            return AssistantMessage(tool_calls=calls)
        return "lead: " + " | ".join(f"{o.status}:{o.content}" for o in seen)

    return lead


def by_role(**answers: Callable[[ModelRequest], Answer]) -> FunctionModel:
    def answer(request: ModelRequest) -> Answer:
        return answers[role_of(request)](request)

    return FunctionModel(answer)


def researcher(request: ModelRequest) -> Answer:
    return f"found: {task_of(request)}"


async def test_an_agent_tool_runs_a_nested_worker_whose_answer_is_the_observation() -> None:
    events: list[Event] = []
    executor = Executor(
        [LEAD, RESEARCHER],
        by_role(lead=lead_asks("what do bees eat"), researcher=researcher),
        aggregator="concat",
        on_event=[events.append],
    )
    assert "researcher" in executor.shared.crew.setup_for(LEAD, None).tools

    result = await executor.run("bees", subtasks=ONE)

    assert result.status == "ok"
    assert result.subtasks["s1"].text == "lead: ok:found: what do bees eat"
    nested = [e for e in events if isinstance(e, WorkerStarted) and e.parent == "s1"]
    assert len(nested) == 1
    name = nested[0].worker
    [tool_call] = [e for e in events if isinstance(e, ToolCallStarted)]
    assert name == f"s1/{tool_call.call_id}"
    assert nested[0].role == "researcher"
    assert nested[0].turn == 1
    models = {e.worker for e in events if e.kind == "model_call.finished"}
    assert models == {"s1", name}
    assert result.usage.model_calls == 3  # the nested worker's call is the run's too


@pytest.mark.parametrize("instruction", ["", " \n "])  # blank: a nested worker read it
@pytest.mark.parametrize("tool_name", ["researcher", "facts"])
async def test_an_empty_instruction_is_the_callers_to_mend_and_runs_no_worker(
    instruction: str, tool_name: str
) -> None:
    events: list[Event] = []
    facts = Executor(
        [RESEARCHER], by_role(researcher=researcher), aggregator="concat",
        planner=lambda task: [("researcher", task)],
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("agent:researcher", "facts")), RESEARCHER],
        by_role(lead=lead_asks(instruction, name=tool_name), researcher=researcher),
        tools=[facts.as_tool("facts")],
        aggregator="concat",
        on_event=[events.append],
    )
    result = await executor.run("bees", subtasks=ONE)
    observed = result.subtasks["s1"].text
    assert observed.startswith("lead: error:Error: ")
    assert "instruction" in observed
    assert "at least 1 character" in observed
    assert [e.worker for e in events if isinstance(e, WorkerStarted)] == ["s1"]
    assert [e.tool for e in events if e.kind == "tool_call.finished"] == [tool_name]


async def test_a_nested_worker_cannot_spend_past_the_runs_budget() -> None:
    @tool
    def look(query: str) -> str:
        """Look something up."""
        return f"result for {query}"

    def digger(request: ModelRequest) -> Answer:
        done = len(observations(request))
        if done < 2:  # it wants three model calls: two to look, one to answer
            return AssistantMessage(tool_calls=(call("look", {"query": f"q{done}"}),))
        return "dug"

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("look",))],
        by_role(lead=lead_asks("dig"), researcher=digger),
        tools=[look],
        aggregator="concat",
        policy=Policy(budgets=Budgets(model_calls=2)),
    )
    with pytest.raises(BudgetExceeded) as caught:
        await executor.run("bees", subtasks=ONE)
    partial = caught.value.partial
    assert partial is not None
    assert partial.usage.model_calls == 2  # the lead's one and the nested worker's one
    assert partial.subtasks["s1"].status == "over_budget"


async def test_parallel_nested_calls_run_in_parallel() -> None:
    overlap, meet = Overlap(), Rendezvous(3)  # one after another, they never meet

    async def slow_researcher(request: ModelRequest) -> Answer:
        async with overlap:
            await meet.meet()
        return f"found: {task_of(request)}"

    executor = Executor(
        [LEAD, RESEARCHER],
        by_role(lead=lead_asks("a", "b", "c"), researcher=slow_researcher),
        aggregator="concat",
    )
    result = await executor.run("bees", subtasks=ONE)

    assert result.subtasks["s1"].text == "lead: ok:found: a | ok:found: b | ok:found: c"
    assert overlap.peak == 3


async def test_cancelling_the_run_reaches_a_nested_workers_tools() -> None:
    started, stopped = anyio.Event(), anyio.Event()

    @tool
    async def wait_forever() -> str:
        """Wait."""
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            stopped.set()
        return "never"

    def waiter(request: ModelRequest) -> Answer:
        return AssistantMessage(tool_calls=(call("wait_forever"),))

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("wait_forever",), tool_timeout=60)],
        by_role(lead=lead_asks("wait"), researcher=waiter),
        tools=[wait_forever],
        aggregator="concat",
    )
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: executor.run("bees", subtasks=ONE))
            await started.wait()
            tg.cancel_scope.cancel()
        await stopped.wait()
    assert stopped.is_set()


async def test_nested_workers_share_the_runs_exclusive_locks() -> None:
    inside: list[int] = []
    overlaps: list[int] = []

    @tool(exclusive="ledger")
    async def write(entry: str) -> str:
        """Write an entry."""
        inside.append(1)
        overlaps.append(len(inside))
        await anyio.sleep(0.02)
        inside.pop()
        return "written"

    def writer(request: ModelRequest) -> Answer:
        if observations(request):
            return "wrote"
        return AssistantMessage(tool_calls=(call("write", {"entry": task_of(request)}),))

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("write",))],
        by_role(lead=lead_asks("a", "b", "c", "d"), researcher=writer),
        tools=[write],
        aggregator="concat",
    )
    result = await executor.run("bees", subtasks=ONE)
    assert result.status == "ok"
    assert len(overlaps) == 4
    assert max(overlaps) == 1


async def test_a_planner_and_an_aggregator_with_default_instructions_keep_their_tools() -> None:
    """Roles without instructions of their own plan and merge as copies given
    Honeycomb's: a copy's tools were looked up again, without the Executor's, so a
    Python tool stopped the run with UnknownToolError and an agent tool was no tool
    at all (the model read 'unknown tool'); roles with instructions had both."""

    @tool
    def look(query: str) -> str:
        """Look something up."""
        return f"seen {query}"

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(
                tool_calls=(call("look", {"query": "x"}), call("checker", {"instruction": "y"}))
            )
        said = " | ".join(f"{o.status}:{o.content}" for o in seen)
        if role_of(request) == "planner":
            return json.dumps({"subtasks": [{"id": "s1", "role": "worker", "instruction": said}]})
        return f"merged {said}"

    def worker(request: ModelRequest) -> Answer:
        return f"did {task_of(request)}"

    roles = [
        Role(name="planner", tools=("look", "agent:checker")),
        Role(name="aggregator", tools=("look", "agent:checker")),
        Role(name="worker"),
        Role(name="checker"),
    ]
    executor = Executor(
        roles,
        by_role(planner=lead, aggregator=lead, worker=worker, checker=lambda r: "checked"),
        tools=[look], planner="planner", aggregator="aggregator",
    )  # fmt: skip
    result = await executor.run("bees")
    assert result.subtasks["s1"].text == "did ok:seen x | ok:checked"
    assert result.answer_text == "merged ok:seen x | ok:checked"


def chain_roles(edges: dict[str, Sequence[str]]) -> list[Role]:
    return [
        Role(name=name, tools=tuple(f"agent:{t}" for t in targets))
        for name, targets in edges.items()
    ]


def test_the_executor_rejects_a_cycle_of_agent_tools_naming_it() -> None:
    roles = chain_roles({"a": ["b"], "b": ["a"], "c": []})
    with pytest.raises(ConfigErrors) as caught:
        Executor(roles, FunctionModel(researcher))
    text = str(caught.value)
    assert "a → b → a" in text
    assert "role 'a': tools[0]" in text
    assert text.count("cycle") == 1  # told once, not once per role on it


def test_the_executor_rejects_a_chain_deeper_than_the_limit() -> None:
    edges: dict[str, Sequence[str]] = {"a": ["b"], "b": ["c"], "c": ["d"], "d": ["e"], "e": []}
    with pytest.raises(ConfigErrors) as caught:
        Executor(chain_roles(edges), FunctionModel(researcher))
    assert "a → b → c → d → e" in str(caught.value)
    assert "limit of 3" in str(caught.value)
    Executor(chain_roles(edges), FunctionModel(researcher), policy=Policy(max_nesting=4))
    del edges["d"], edges["e"]
    edges["c"] = ["d"]
    edges["d"] = []
    Executor(chain_roles(edges), FunctionModel(researcher))  # a → b → c → d: three


def test_chains_past_the_limit_through_one_tool_are_told_once_at_it() -> None:
    """A lead calls three researchers, each three checkers, each three fetchers, each
    a reader: 27 chains four deep, told as 27 errors at the lead's three tools."""
    layers = [["lead"], ["r1", "r2", "r3"], ["c1", "c2", "c3"], ["f1", "f2", "f3"], ["reader"]]
    edges: dict[str, Sequence[str]] = {
        name: (layers[depth + 1] if depth + 1 < len(layers) else [])
        for depth, names in enumerate(layers)
        for name in names
    }
    with pytest.raises(ConfigErrors) as caught:
        Executor(chain_roles(edges), FunctionModel(researcher))
    told = [str(error) for error in caught.value.errors]
    assert [t.split(": agent tools")[0] for t in told] == [
        f"role 'lead': tools[{index}]" for index in range(3)
    ]
    assert all("nest 4 deep, past the limit of 3: lead → r" in t for t in told)


async def test_a_leads_nested_workers_of_each_round_have_names_of_their_own() -> None:
    """A lead planning in rounds is asked afresh each round, and a model that numbers
    its calls from call_1 in each conversation called its helper call_1 every time:
    the three nested workers were all lead/call_1, one row of the timeline. Each is
    named after the round's attempt that calls it."""
    events: list[Event] = []
    recorder = SpanRecorder()

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):  # the same id as a local model numbers it
            asked = ToolCall(id="call_1", name="helper", arguments='{"instruction": "help"}')
            return AssistantMessage(tool_calls=(asked,))
        text = str(request.messages[1].content)
        more = "Planning round 3" not in text
        subtasks = [{"id": f"s{text.count('found') + 1}", "role": "worker", "instruction": "w"}]
        return json.dumps({"subtasks": subtasks if more else []})

    executor = Executor(
        [Role(name="lead", tools=("agent:helper",)), Role(name="helper"), Role(name="worker")],
        by_role(lead=lead, helper=lambda r: "helped", worker=lambda r: "found"),
        planner=RolePlanner("lead", rounds=3, roles=["worker"]),
        aggregator="concat",
        on_event=[events.append, recorder],
    )
    result = await executor.run("bees")

    assert result.rounds_ended == "done"
    nested = [e.worker for e in events if isinstance(e, WorkerStarted) and e.parent == "lead"]
    assert [name.split(":")[1] for name in nested] == ["1.1", "2.1", "3.1"]  # plan:R.A:...
    assert all(name.endswith("/call_1") for name in nested)
    spans = {s.worker for s in recorder.spans if s.kind == "worker"}
    assert set(nested) <= spans


def test_an_agent_tool_named_as_another_tool_of_its_role_is_named() -> None:
    """The error said only 'a tool named 'researcher' is already registered'."""

    @tool
    def researcher(query: str) -> str:
        """Look something up."""
        return query

    with pytest.raises(ConfigErrors) as caught:
        Executor(
            [Role(name="lead", tools=("agent:researcher", "researcher")), RESEARCHER],
            FunctionModel(lambda request: "x"),
            tools=[researcher],
        )
    assert str(caught.value.errors[0]) == (
        "role 'lead': tools[0] ('agent:researcher') and tools[1] ('researcher') are each a "
        "tool named 'researcher': the tools of a role need a name each (give the function "
        "another: Tool(fn, name=...))"
    )


async def test_a_role_that_lists_an_agent_tool_twice_has_it_once() -> None:
    """As a Python role that lists a tool twice: the Executor refused it, saying only
    'a tool named 'researcher' is already registered'."""
    lead = Role(name="lead", tools=("agent:researcher", "agent:researcher"))
    executor = Executor(
        [lead, RESEARCHER], by_role(lead=lead_asks("a"), researcher=researcher),
        aggregator="concat",
    )  # fmt: skip
    result = await executor.run("bees", subtasks=ONE)
    assert result.subtasks["s1"].text == "lead: ok:found: a"


def test_an_agent_tool_naming_no_role_is_named() -> None:
    with pytest.raises(ConfigErrors) as caught:
        Executor([Role(name="a", tools=("agent:nobody",))], FunctionModel(researcher))
    assert "'agent:nobody' names no role" in str(caught.value)


async def test_a_resumed_run_continues_inside_a_nested_worker(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    made: list[tuple[str, int, str]] = []  # (role, turn, life)
    looked = anyio.Event()
    life = {"now": "1"}

    @tool
    async def look(query: str) -> str:
        """Look something up."""
        if query == "q1" and life["now"] == "1":
            looked.set()
            await anyio.sleep_forever()  # the first life is cut off here
        return f"result for {query}"

    def digger(request: ModelRequest) -> Answer:
        done = len(observations(request))
        made.append(("researcher", done, life["now"]))
        if done < 2:
            return AssistantMessage(tool_calls=(call("look", {"query": f"q{done}"}),))
        return "dug: " + ", ".join(o.content for o in observations(request))

    def lead(request: ModelRequest) -> Answer:
        made.append(("lead", len(observations(request)), life["now"]))
        return lead_asks("dig")(request)

    def executor() -> Executor:
        return Executor(
            [LEAD, Role(name="researcher", tools=("look",))],
            by_role(lead=lead, researcher=digger),
            tools=[look],
            aggregator="concat",
            store=db,
        )

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: executor().run("bees", subtasks=ONE, run_id="r1"))
            # The nested worker's answer asking for the look was flushed to the store
            # before the look ran (AgentLoop.run): nothing more need reach it.
            await looked.wait()
            tg.cancel_scope.cancel()
    stored = await RunStore(db).load("r1")
    assert stored is not None
    assert stored.status == "interrupted"
    nested = [name for name in stored.workers if name.startswith("s1/")]
    assert len(nested) == 1  # kept under its caller's name

    life["now"] = "2"
    result = await executor().resume("r1")

    assert result.status == "ok"
    assert result.subtasks["s1"].text == "lead: ok:dug: result for q0, result for q1"
    second = [(role, turn) for role, turn, when in made if when == "2"]
    # the lead is not asked again for its call: the call runs again, by its id, and the
    # nested worker continues with the look that was cut off (its answer asking for it
    # was kept before the look ran: the model is not asked for it again)
    assert second == [("researcher", 2), ("lead", 1)]
    assert [(r, t) for r, t, when in made if when == "1"] == [
        ("lead", 0),
        ("researcher", 0),
        ("researcher", 1),
    ]


async def test_a_nested_workers_calls_go_to_the_runs_approver() -> None:
    asked: list[ApprovalRequest] = []

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        raise AssertionError("a denied call ran")

    async def approver(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision.denied("not today")

    def sender(request: ModelRequest) -> Answer:
        seen = observations(request)
        if seen:
            return f"sent? {seen[0].content}"
        return AssistantMessage(tool_calls=(call("send", {"text": "hi"}),))

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("send",))],
        by_role(lead=lead_asks("send hi"), researcher=sender),
        tools=[send],
        aggregator="concat",
        approver=approver,
    )
    result = await executor.run("bees", subtasks=ONE)
    [request] = asked
    assert request.role == "researcher"
    assert request.worker is not None
    assert request.worker.startswith("s1/")
    assert "not today" in result.subtasks["s1"].text


async def test_a_nested_workers_call_with_no_one_to_decide_it_is_denied_to_it() -> None:
    """No approver, no store: the nested worker reads the denial and answers its caller."""

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        raise AssertionError("a denied call ran")

    def sender(request: ModelRequest) -> Answer:
        if observations(request):
            return f"could not: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("send", {"text": "hi"}),))

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("send",))],
        by_role(lead=lead_asks("send hi"), researcher=sender), tools=[send], aggregator="concat",
    )  # fmt: skip
    result = await executor.run("bees", subtasks=ONE)
    assert result.status == "ok"
    assert result.subtasks["s1"].text == (
        "lead: ok:could not: denied: no approver is attached and the run has no store to wait in"
    )


async def test_an_aggregators_nested_worker_asks_as_the_aggregator_does(tmp_path: Path) -> None:
    """The aggregator is not kept turn by turn, so it cannot wait for a decision: its
    own calls are denied when no approver is attached. Its nested worker's call waited
    in the store all the same, and the run failed: 'the aggregator failed: None'."""
    paid: list[str] = []

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def merger(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("clerk", {"instruction": "pay bob"}),))
        return f"merged: {observations(request)[0].content}"

    def clerk(request: ModelRequest) -> Answer:
        if observations(request):
            return f"clerk: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    async def approver(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    async def left(request: ApprovalRequest) -> Decision:  # Ctrl-D at the terminal's prompt
        raise LeftWaiting("the input ended")

    undecided = f"clerk: denied: the approver decided nothing (the input ended) and {NOT_WAITING}"
    for asks, said in (
        (None, f"clerk: denied: {NOT_KEPT}"),
        (approver, "clerk: paid bob"),
        (left, undecided),  # said 'the run has no store to wait in', though it has one
    ):
        executor = Executor(
            [RESEARCHER, Role(name="clerk", tools=("pay",)),
             Role(name="merger", instructions="Merge.", tools=("agent:clerk",))],
            by_role(researcher=researcher, clerk=clerk, merger=merger), tools=[pay],
            aggregator="merger", approver=asks, store=tmp_path / "runs.db",
        )  # fmt: skip
        result = await executor.run(
            "t", subtasks=[{"id": "s1", "role": "researcher", "instruction": "x"}]
        )
        assert result.status == "ok"
        assert result.answer_text.startswith(f"merged: {said}")
    assert paid == ["bob"]


async def test_a_stored_runs_planner_is_denied_saying_it_cannot_wait(tmp_path: Path) -> None:
    """The planner of a run that keeps a store is not kept turn by turn: with no
    approver, its call that needs approval is denied. It was told 'the run has no
    store to wait in', false of a stored run; now why it cannot wait, and what to
    attach. A subtask's worker of the same run waits in the store."""

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        return f"paid {to}"

    def planner(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))
        plan = [{"id": "s1", "role": "payer", "instruction": seen[0].content}]
        return json.dumps({"subtasks": plan})

    def payer(request: ModelRequest) -> Answer:
        if observations(request):
            return observations(request)[0].content
        return AssistantMessage(tool_calls=(call("pay", {"to": "ann"}),))

    executor = Executor(
        [Role(name="planner", instructions="Plan.", tools=("pay",)),
         Role(name="payer", tools=("pay",))],
        by_role(planner=planner, payer=payer), tools=[pay], planner="planner",
        aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    result = await executor.run("pay them")
    assert result.plan.subtasks[0].instruction == f"denied: {NOT_KEPT}"
    assert result.status == "waiting"  # the subtask's call waits in the store
    assert [(p.worker, p.tool) for p in result.pending] == [("s1", "pay")]


async def test_a_traced_runs_timings_with_nested_workers_are_its_stored_traces(
    tmp_path: Path,
) -> None:
    """A run that records spans measures its timings from the spans of its rows alone
    (its workers', phases' and its own): every figure is the one its whole stored
    trace tells, nested workers and all."""
    store = RunStore(tmp_path / "runs.db")
    plan = [*ONE, {"id": "s2", "role": "lead", "instruction": "and wasps", "depends_on": ["s1"]}]
    executor = Executor(
        [LEAD, RESEARCHER],
        by_role(lead=lead_asks("a", "b"), researcher=researcher),
        aggregator="concat",
        store=store,
    )
    result = await executor.run("bees", subtasks=plan, run_id="nested")
    spans = store.spans("nested")
    assert any(s.kind == "worker" and s.name.startswith("s1/") for s in spans)
    traced = timings_of(measure(spans, result.plan.subtasks))
    assert result.timings.model_dump() == pytest.approx(traced.model_dump(), abs=1e-6)
    assert result.timings.critical_path_s > 0
    store.close()


async def test_a_nested_workers_spans_are_under_its_call_and_its_row_under_its_caller() -> None:
    recorder = SpanRecorder()
    executor = Executor(
        [LEAD, RESEARCHER],
        by_role(lead=lead_asks("a", "b"), researcher=researcher),
        aggregator="concat",
        on_event=[recorder],
    )
    result = await executor.run("bees", subtasks=ONE)
    spans = recorder.spans
    by_id = {s.span_id: s for s in spans}
    nested = [s for s in spans if s.kind == "worker" and s.name.startswith("s1/")]
    assert len(nested) == 2
    for span in nested:
        call_span = by_id[span.parent_id or ""]
        assert call_span.kind == "tool_call"
        assert call_span.worker == "s1"
        assert span.name == f"s1/{call_span.detail}"  # the call it ran for
        assert span.detail == "researcher"
        [model] = [s for s in spans if s.kind == "model_call" and s.worker == span.name]
        assert by_id[by_id[model.parent_id or ""].parent_id or ""] is span  # model → turn → it
    lead_span = next(s for s in spans if s.kind == "worker" and s.name == "s1")
    assert lead_span.parent_id == next(s for s in spans if s.kind == "run").span_id

    timeline = build_timeline(spans, result.plan.subtasks)
    rows = [(r.name, r.depth, r.parent) for r in timeline.workers]
    assert rows == [
        ("s1", 0, None),
        (nested[0].name, 1, "s1"),
        (nested[1].name, 1, "s1"),
    ] or rows == [("s1", 0, None), (nested[1].name, 1, "s1"), (nested[0].name, 1, "s1")]
    assert timeline.critical_path == ("s1",)
    assert timeline.sum_worker_s == timeline.workers[0].duration_s  # theirs is inside it
    lead_row = timeline.workers[0]
    assert [b.kind for b in lead_row.bars].count("model_call") == 2  # its own, not theirs
    text = Console(width=100, record=True)
    text.print(render_timeline(timeline))
    shown = text.export_text()
    lines = shown.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("★ s1 "))
    rows = [line for line in lines[at + 1 :] if not line.startswith("   ")]  # lanes aside
    assert rows[0].startswith("  ↳ researcher")
    assert rows[1].startswith("  ↳ researcher")
    assert "added up, 1 worker" in shown  # the subtask's: theirs are inside its time


async def test_a_nested_call_waiting_in_the_store_makes_the_run_wait_then_resumes(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runs.db"
    sent: list[str] = []
    made: list[tuple[str, int]] = []

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        sent.append(text)
        return "sent"

    def sender(request: ModelRequest) -> Answer:
        seen = observations(request)
        made.append(("researcher", len(seen)))
        if seen:
            return f"sent: {seen[0].content}"
        return AssistantMessage(tool_calls=(call("send", {"text": "hi"}),))

    def lead(request: ModelRequest) -> Answer:
        made.append(("lead", len(observations(request))))
        return lead_asks("send hi")(request)

    def executor() -> Executor:
        return Executor(
            [LEAD, Role(name="researcher", tools=("send",))],
            by_role(lead=lead, researcher=sender),
            tools=[send],
            aggregator="concat",
            store=db,
        )

    first = await executor().run("bees", subtasks=ONE, run_id="r1")
    assert first.status == "waiting"
    [pending] = first.pending
    assert pending.tool == "send"
    assert pending.worker.startswith("s1/")  # the nested worker's call
    assert sent == []

    later = executor()
    await later.decide("r1", pending.call_id, approve=True, worker=pending.worker)
    made.clear()
    result = await later.resume("r1")

    assert result.status == "ok"
    assert sent == ["hi"]
    assert result.subtasks["s1"].text == "lead: ok:sent: sent"
    # neither the lead nor the nested worker is asked again for the turns they had made
    assert made == [("researcher", 1), ("lead", 1)]


async def test_parallel_nested_calls_waiting_in_the_store_each_run_once_decided(
    tmp_path: Path,
) -> None:
    sent: list[str] = []

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        sent.append(text)
        return "sent"

    def sender(request: ModelRequest) -> Answer:
        if observations(request):
            return "done"
        return AssistantMessage(tool_calls=(call("send", {"text": task_of(request)}),))

    executor = Executor(
        [LEAD, Role(name="researcher", tools=("send",))],
        by_role(lead=lead_asks("one", "two"), researcher=sender),
        tools=[send],
        aggregator="concat",
        store=tmp_path / "runs.db",
    )
    result = await executor.run("bees", subtasks=ONE, run_id="r1")
    lives = 1
    # The first call to wait pauses the batch; a sibling cut off asks in the next life.
    while result.status == "waiting" and lives < 4:
        assert result.pending
        for pending in result.pending:
            await executor.decide("r1", pending.call_id, approve=True, worker=pending.worker)
        result = await executor.resume("r1")
        lives += 1
    assert result.status == "ok"
    assert sorted(sent) == ["one", "two"]  # each once, and only once decided
    assert result.subtasks["s1"].text == "lead: ok:done | ok:done"


async def test_a_decision_made_while_the_run_goes_on_lets_a_nested_worker_go_on(
    tmp_path: Path,
) -> None:
    sent: list[str] = []
    sent_it = threading.Event()  # set in the tool's thread

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        sent.append(text)
        sent_it.set()
        return "sent"

    async def read(topic: str) -> str:
        """Read until the message is sent: the run goes on meanwhile."""
        if await anyio.to_thread.run_sync(sent_it.wait, MEET_LIMIT_S, abandon_on_cancel=True):
            return f"read {topic} while the message was sent"
        return "gave up: the message was not sent while the run went on"

    def sender(request: ModelRequest) -> Answer:
        if observations(request):
            return f"sent: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("send", {"text": "hi"}),))

    def reader(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("read", {"topic": "bees"}),))
        return observations(request)[0].content

    service = Executor(
        [LEAD, Role(name="researcher", tools=("send",)), Role(name="reader", tools=("read",))],
        by_role(lead=lead_asks("send hi"), researcher=sender, reader=reader),
        tools=[send, tool(read)], aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    plan = [*ONE, {"id": "s2", "role": "reader", "instruction": "read"}]
    results = []

    async def run() -> None:
        results.append(await service.run("bees", subtasks=plan, run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        pending = await waiting_calls(service, "r1")
        assert not results  # the reader still reads: it waits for the message
        (waiting,) = pending
        assert waiting.worker.startswith("s1/")  # the nested worker's call
        await service.decide("r1", waiting.call_id, approve=True, worker=waiting.worker)
    (done,) = results
    assert done.status == "ok"  # one run: no resume needed
    assert sent == ["hi"]
    assert done.subtasks["s1"].text == "lead: ok:sent: sent"
    assert done.subtasks["s2"].text == "read bees while the message was sent"


async def test_a_side_effect_beside_a_paused_nested_call_runs_once_when_it_goes_on(
    tmp_path: Path,
) -> None:
    """A turn whose side-effecting call ran while a nested worker beside it paused for
    approval is run again once the call is decided, in the same life: the journal
    answers the side effect, which does not run twice."""
    sent: list[str] = []
    posted: list[str] = []
    paused, sent_it = threading.Event(), threading.Event()

    @tool(approval=True)
    def send(text: str) -> str:
        """Send a message."""
        sent.append(text)
        sent_it.set()
        return "sent"

    @tool(side_effects=True)
    def post(text: str) -> str:
        """Post a note (still posting when the nested worker beside it pauses)."""
        assert paused.wait(MEET_LIMIT_S), "the nested worker never paused"
        posted.append(text)
        return "posted"

    async def read(topic: str) -> str:
        """Read until the message is sent: the run goes on meanwhile."""
        if await anyio.to_thread.run_sync(sent_it.wait, MEET_LIMIT_S, abandon_on_cancel=True):
            return f"read {topic} while the message was sent"
        return "gave up: the message was not sent while the run went on"

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(
                tool_calls=(
                    call("post", {"text": "note"}),
                    call("researcher", {"instruction": "send hi"}),
                )
            )
        return "lead: " + " | ".join(f"{o.status}:{o.content}" for o in seen)

    def sender(request: ModelRequest) -> Answer:
        if observations(request):
            return f"sent: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("send", {"text": "hi"}),))

    def reader(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("read", {"topic": "bees"}),))
        return observations(request)[0].content

    lead_role = Role(name="lead", tools=("post", "agent:researcher"))
    service = Executor(
        [lead_role, Role(name="researcher", tools=("send",)), Role(name="reader", tools=("read",))],
        by_role(lead=lead, researcher=sender, reader=reader),
        tools=[send, post, tool(read)], aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    plan = [*ONE, {"id": "s2", "role": "reader", "instruction": "read"}]
    results = []

    async def run() -> None:
        results.append(await service.run("bees", subtasks=plan, run_id="r1"))

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        pending = await waiting_calls(service, "r1")
        paused.set()  # the note is posted now, while the nested worker waits
        assert not results  # the reader still reads: it waits for the message
        (waiting,) = pending
        await service.decide("r1", waiting.call_id, approve=True, worker=waiting.worker)
    (done,) = results
    assert done.status == "ok"
    assert sent == ["hi"]
    assert posted == ["note"]  # answered from the journal when the turn went on
    assert done.subtasks["s1"].text == "lead: ok:posted | ok:sent: sent"
    assert done.subtasks["s2"].text == "read bees while the message was sent"  # same life


async def waiting_calls(service: Executor, run_id: str) -> list[PendingApproval]:
    """The calls of ``run_id`` waiting for a decision, once there are some."""
    with anyio.fail_after(30):
        while not (pending := await service.pending(run_id)):  # noqa: ASYNC110
            await anyio.sleep(0.01)
    return pending


# --- a hive as a tool, and the journal ------------------------------------------------


def mailer_hive(sent: list[str]) -> Executor:
    """A hive whose one worker sends an email (a side effect) and says so."""

    @tool(side_effects=True)
    def send_email(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"emailed {to}"

    def mailer(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("send_email", {"to": "ops"}),))
        return f"mailer: {observations(request)[0].content}"

    return Executor(
        [Role(name="mailer", tools=("send_email",))], by_role(mailer=mailer),
        tools=[send_email], aggregator="concat", planner=lambda task: [("mailer", task)],
    )  # fmt: skip


@tool
def look(key: str) -> str:
    """Look a key up."""
    return key


def test_a_hive_tool_has_side_effects_when_its_hive_has() -> None:
    def plan(task: str) -> list[tuple[str, str]]:
        return [("r", task)]

    quiet = Executor(
        [Role(name="r", tools=("look",))], FunctionModel(researcher), tools=[look], planner=plan
    )
    mailer = mailer_hive([])
    assert not quiet.as_tool("quiet").side_effects
    assert mailer.as_tool("notify").side_effects
    calling = Executor(
        [Role(name="r", tools=("notify",))], FunctionModel(researcher),
        tools=[mailer.as_tool("notify")], planner=plan,
    )  # fmt: skip
    assert calling.as_tool("outer").side_effects  # through the hive it calls
    assert not mailer.as_tool("told", side_effects=False).side_effects  # as it is told


async def test_a_hive_tools_side_effects_run_once_when_a_call_beside_it_waited(
    tmp_path: Path,
) -> None:
    """A turn calls a hive that sends an email beside a nested worker whose payment
    waits for approval: the run waits; resumed once the payment is decided, the turn
    runs again, and the journal answers the hive's call: the email went out once."""
    sent: list[str] = []
    paid: list[str] = []

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def lead(request: ModelRequest) -> Answer:
        seen = observations(request)
        if not seen:
            return AssistantMessage(
                tool_calls=(
                    call("notify", {"instruction": "email ops"}),
                    call("clerk", {"instruction": "pay bob"}),
                )
            )
        return "lead: " + " | ".join(o.content for o in seen)

    def clerk(request: ModelRequest) -> Answer:
        if observations(request):
            return f"clerk: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    roles = [Role(name="lead", tools=("notify", "agent:clerk")), Role(name="clerk", tools=("pay",))]

    def service() -> Executor:
        return Executor(
            roles,
            by_role(lead=lead, clerk=clerk), tools=[pay, mailer_hive(sent).as_tool("notify")],
            aggregator="concat", store=tmp_path / "runs.db",
        )  # fmt: skip

    first = service()
    waiting = await first.run("t", subtasks=ONE, run_id="r1")
    assert waiting.status == "waiting"
    assert sent == ["ops"]
    (pending,) = waiting.pending
    await first.decide("r1", pending.call_id, approve=True, worker=pending.worker)
    assert first.store is not None
    first.store.close()
    done = await service().resume("r1")
    assert done.status == "ok"
    assert paid == ["bob"]
    assert sent == ["ops"]  # answered from the journal, not sent again
    assert done.subtasks["s1"].text == "lead: ## s1 (mailer)\nmailer: emailed ops | clerk: paid bob"


async def test_a_hive_tool_whose_workers_all_failed_tells_the_caller_why() -> None:
    """The caller's model read only 'its only subtask failed; nothing to aggregate':
    not why, so it could not tell a bad instruction from a broken model."""

    async def broken(request: ModelRequest) -> Answer:
        if task_of(request).endswith("slowly"):
            await anyio.sleep_forever()  # until the fail_fast run stops it
        raise RuntimeError(f"no answer to {task_of(request)}")

    def facts(then: str = "again", **options: Any) -> Executor:
        return Executor(
            [Role(name="researcher")], FunctionModel(broken), aggregator="concat",
            planner=lambda task: [("researcher", task), ("researcher", f"{task} {then}")],
            **options,
        )  # fmt: skip

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("facts", {"instruction": "bees"}),))
        return observations(request)[0].content

    executor = Executor(
        [Role(name="lead", tools=("facts",))], by_role(lead=lead),
        tools=[facts().as_tool("facts")], aggregator="concat",
    )  # fmt: skip
    result = await executor.run("t", subtasks=ONE)
    told = result.subtasks["s1"].text
    assert "all 2 subtasks failed; nothing to aggregate" in told
    assert "s1: " in told
    assert "no answer to bees" in told
    assert "no answer to bees again" in told

    # fail_fast names the failure; the worker it stopped is not told as one
    quick = facts("slowly", policy=Policy(failure="fail_fast"))
    executor = Executor(
        [Role(name="lead", tools=("facts",))], by_role(lead=lead),
        tools=[quick.as_tool("facts")], aggregator="concat",
    )  # fmt: skip
    result = await executor.run("t", subtasks=ONE)
    told = result.subtasks["s1"].text
    assert told.endswith("no answer to bees); failure policy is fail_fast")
    assert told.count("no answer to bees") == 1


async def test_a_hive_tools_calls_go_to_the_callers_approver_when_it_has_none() -> None:
    """As a nested worker's do: the person deciding for the run decides for the hives
    it calls (a hive with an approver of its own keeps it)."""
    asked: list[tuple[str, ApprovalRequest]] = []
    paid: list[str] = []

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def approver(name: str) -> Callable[[ApprovalRequest], Awaitable[Decision]]:
        async def decide(request: ApprovalRequest) -> Decision:
            asked.append((name, request))
            return Decision.approved()

        return decide

    def clerk(request: ModelRequest) -> Answer:
        if observations(request):
            return f"clerk: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    def payroll(own: Callable[[ApprovalRequest], Awaitable[Decision]] | None) -> Executor:
        return Executor(
            [Role(name="clerk", tools=("pay",))], by_role(clerk=clerk), tools=[pay],
            aggregator="concat", planner=lambda task: [("clerk", task)], approver=own,
        )  # fmt: skip

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("payroll", {"instruction": "pay bob"}),))
        return "lead: " + observations(request)[0].content

    for own, decider in ((None, "caller"), (approver("hive"), "hive")):
        executor = Executor(
            [Role(name="lead", tools=("payroll",))], by_role(lead=lead),
            tools=[payroll(own).as_tool("payroll")], aggregator="concat",
            approver=approver("caller"),
        )  # fmt: skip
        result = await executor.run("t", subtasks=ONE)
        assert result.subtasks["s1"].text == "lead: ## s1 (clerk)\nclerk: paid bob"
        ((who, request),) = asked
        assert (who, request.tool, request.role) == (decider, "pay", "clerk")
        asked.clear()
    assert paid == ["bob", "bob"]


async def test_an_executor_with_a_store_called_as_a_tool_keeps_no_run_of_its_own(
    tmp_path: Path,
) -> None:
    """Its sub-run kept itself in its store and its call waited there: the caller read
    an empty answer, ended ok with nothing pending, and the call could be approved and
    paid later, outside the caller's run and budget."""
    paid: list[str] = []

    @tool(approval=True)
    def pay(to: str) -> str:
        """Pay someone."""
        paid.append(to)
        return f"paid {to}"

    def clerk(request: ModelRequest) -> Answer:
        if observations(request):
            return f"clerk: {observations(request)[0].content}"
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("payroll", {"instruction": "pay bob"}),))
        return "lead: " + observations(request)[0].content

    payroll = Executor(
        [Role(name="clerk", tools=("pay",))], by_role(clerk=clerk), tools=[pay],
        aggregator="concat", planner=lambda task: [("clerk", task)], store=tmp_path / "sub.db",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("payroll",))], by_role(lead=lead),
        tools=[payroll.as_tool("payroll")], aggregator="concat",
    )  # fmt: skip
    result = await executor.run("t", subtasks=ONE)
    assert result.subtasks["s1"].text == f"lead: ## s1 (clerk)\nclerk: denied: {CANNOT_WAIT}"
    assert paid == []
    assert payroll.store is not None
    assert payroll.store.runs() == []  # nothing kept there to approve later


async def test_a_nested_worker_of_a_role_that_stores_results_keeps_its_answer(
    tmp_path: Path,
) -> None:
    """``store_result`` held for the workers of the plan only: one called as a tool
    kept nothing."""
    from runtime.memory import SQLiteMemory
    from workers import RoleMemory

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("researcher", {"instruction": "bees"}),))
        return "lead: " + observations(request)[0].content

    memory = SQLiteMemory(tmp_path / "memory.db")
    researcher = Role(name="researcher", memory=RoleMemory(recall=0, store_result=True))
    executor = Executor(
        [Role(name="lead", tools=("agent:researcher",)), researcher],
        by_role(lead=lead, researcher=lambda request: "Bees dance."),
        aggregator="concat", memory=memory,
    )  # fmt: skip
    result = await executor.run("t", subtasks=ONE)
    assert result.status == "ok"
    [kept] = await memory.list()
    assert (kept.kind, kept.text, kept.role) == ("result", "Bees dance.", "researcher")
    assert kept.worker is not None
    assert kept.worker.startswith("s1/")  # the nested worker's name


async def test_every_worker_started_is_reported_finished_however_it_is_cut_off() -> None:
    """A nested worker cut off by its caller's tool time limit, and a worker of the plan
    cancelled as the run fails fast, had a ``worker.started`` and no ``worker.finished``."""
    events: list[Event] = []
    began = anyio.Event()

    @tool
    async def slow(query: str) -> str:
        """Take long."""
        began.set()
        await anyio.sleep(30)
        return "never"

    def waits(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("slow", {"query": "x"}),))
        return "gave up"

    def lead(request: ModelRequest) -> Answer:
        if not observations(request):
            return AssistantMessage(tool_calls=(call("researcher", {"instruction": "go"}),))
        return "lead: " + observations(request)[0].status

    def fails(request: ModelRequest) -> Answer:
        raise RuntimeError("boom")

    def ends(kind: str) -> dict[str | None, str]:
        started = [e.worker for e in events if e.kind == "worker.started"]
        finished = {e.worker: getattr(e, "status", "") for e in events if e.kind == kind}
        return {w: finished.get(w, "none") for w in started}

    nested = Executor(
        [Role(name="lead", tools=("agent:researcher",), tool_timeout=0.2),
         Role(name="researcher", tools=("slow",))],
        by_role(lead=lead, researcher=waits), tools=[slow], aggregator="concat",
        on_event=[events.append],
    )  # fmt: skip
    await nested.run("t", subtasks=ONE)
    assert list(ends("worker.finished").values()) == ["ok", "cancelled"]
    events.clear()

    async def model(request: ModelRequest) -> Answer:
        if role_of(request) == "bad":
            await began.wait()  # the other worker's call is under way
            return fails(request)
        return waits(request)

    plan = [{"id": "a", "role": "slowpoke", "instruction": "x"},
            {"id": "b", "role": "bad", "instruction": "y"}]  # fmt: skip
    fail_fast = Executor(
        [Role(name="slowpoke", tools=("slow",)), Role(name="bad")], FunctionModel(model),
        tools=[slow], aggregator="concat", policy=Policy(failure="fail_fast"),
        on_event=[events.append],
    )  # fmt: skip
    began = anyio.Event()
    with pytest.raises(RunFailed):
        await fail_fast.run("t", subtasks=plan)
    assert ends("worker.finished") == {"a": "cancelled", "b": "failed"}
