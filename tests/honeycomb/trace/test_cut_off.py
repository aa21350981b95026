"""What a worker's end or a run's end cuts off: each call ends as it stops (its
``*.finished`` event, before its worker's), no later than its worker, with the status
that says why and what it spent; a phase that failed says so."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from functools import partial
from itertools import count
from pathlib import Path

import anyio
import pytest

from honeycomb import Executor, Policy, Role, tool
from honeycomb.run.events import PlanReady, RunFinished, RunStarted, WorkerFinished, WorkerStarted
from honeycomb.run.plan import Plan
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.spans import Span, SpanRecorder
from runtime import (
    AssistantMessage,
    BudgetExceeded,
    Event,
    Limits,
    ModelCallFinished,
    ModelCallStarted,
    ModelRequest,
    PlanError,
    RunFailed,
    ToolCallStarted,
    ToolMessage,
)
from runtime.testing import call

HANG_S = 60.0  # far past any run here: only a cancellation ends a call that waits it


@tool
async def wait(seconds: float) -> str:
    """Wait."""
    await anyio.sleep(seconds)
    return "waited"


def unfinished(events: Sequence[Event]) -> list[tuple[object, ...]]:
    """The model and tool calls whose ``*.started`` has no ``*.finished``."""
    open_calls: Counter[tuple[object, ...]] = Counter()
    for event in events:
        key = (event.worker, getattr(event, "turn", None), getattr(event, "call_id", None))
        if event.kind in ("model_call.started", "tool_call.started"):
            open_calls[key] += 1
        elif event.kind in ("model_call.finished", "tool_call.finished"):
            open_calls[key] -= 1
    return [key for key, count in open_calls.items() if count]


def within_their_workers(spans: Sequence[Span]) -> None:
    """Every call ends no later than its worker (its own span, of its name)."""
    workers = {s.name: s for s in spans if s.kind == "worker"}
    for span in spans:
        if span.kind in ("model_call", "tool_call") and span.worker in workers:
            assert span.end <= workers[span.worker].end + 1e-6, span


def one(spans: Sequence[Span], kind: str, worker: str | None) -> Span:
    [found] = [s for s in spans if s.kind == kind and s.worker == worker]
    return found


def _lead_and_helper(request: ModelRequest) -> AssistantMessage | str:
    """A lead calls its helper (``agent:helper``), whose call waits past the lead's
    tool timeout."""
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return "done"
    if str(request.messages[0].content).startswith("You are the helper worker"):
        return AssistantMessage(tool_calls=(call("wait", {"seconds": HANG_S}),))
    return AssistantMessage(tool_calls=(call("helper", {"instruction": "go"}),))


async def test_a_nested_workers_call_cut_off_by_its_callers_timeout_ends_with_it() -> None:
    roles = [
        Role(name="lead", tools=("agent:helper",), tool_timeout=0.5),
        Role(name="helper", tools=("wait",)),
    ]
    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(roles, FunctionModel(_lead_and_helper), tools=[wait], aggregator="concat")
    result = await executor.run("t", subtasks=[("lead", "go")], on_event=[recorder, events.append])
    assert result.status == "ok"
    assert unfinished(events) == []
    kinds = [(e.kind, e.worker) for e in events]
    nested = "s1/" + one(recorder.spans, "tool_call", "s1").detail
    cut = kinds.index(("tool_call.finished", nested))
    assert cut < kinds.index(("worker.finished", nested))  # the call ends before its worker
    assert one(recorder.spans, "tool_call", nested).status == "cancelled"
    assert one(recorder.spans, "turn", nested).status == "cancelled"
    within_their_workers(recorder.spans)


async def test_a_call_cut_off_as_its_worker_runs_out_of_time_ends_with_it() -> None:
    def hang(request: ModelRequest) -> AssistantMessage | str:
        if (request.conversation or "").endswith("quick"):
            return "done"
        return AssistantMessage(tool_calls=(call("wait", {"seconds": HANG_S}),))

    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", tools=("wait",))], FunctionModel(hang), tools=[wait],
        aggregator="concat", policy=Policy(worker_timeout_s=0.5),
    )  # fmt: skip
    plan = [{"id": "slow", "role": "w", "instruction": "a"}, {"id": "quick", "role": "w",
            "instruction": "b"}]  # fmt: skip
    result = await executor.run("t", subtasks=plan, on_event=[recorder, events.append])
    assert result.status == "partial"
    assert unfinished(events) == []
    assert one(recorder.spans, "tool_call", "slow").status == "cancelled"
    assert one(recorder.spans, "turn", "slow").status == "failed"  # as its worker
    within_their_workers(recorder.spans)


async def test_a_model_call_cut_off_as_the_budget_stops_the_run_ends_with_it() -> None:
    # Worker "slow" waits on its model while "fast" spends the run's model calls.
    async def answer(request: ModelRequest) -> AssistantMessage:
        if (request.conversation or "").endswith("slow"):
            await anyio.sleep(HANG_S)
        seen = sum(isinstance(m, ToolMessage) for m in request.messages)
        return AssistantMessage(tool_calls=(call("wait", {"seconds": seen / 1000}),))

    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(
        [Role(name="w", tools=("wait",))], FunctionModel(answer), tools=[wait],
        aggregator="concat", policy=Policy(budgets=Limits(model_calls=3)),
    )  # fmt: skip
    plan = [{"id": "slow", "role": "w", "instruction": "a"}, {"id": "fast", "role": "w",
            "instruction": "b"}]  # fmt: skip
    with pytest.raises(BudgetExceeded):
        await executor.run("t", subtasks=plan, on_event=[recorder, events.append])
    assert unfinished(events) == []
    [cut] = [e for e in events if e.kind == "model_call.finished" and e.worker == "slow"]
    assert cut.status == "cancelled"  # type: ignore[attr-defined]
    assert one(recorder.spans, "turn", "slow").status == "over_budget"  # not ok
    within_their_workers(recorder.spans)


def _lead_calls_facts(request: ModelRequest) -> AssistantMessage | str:
    """A lead calls the hive tool ``facts``, whose checker's call waits."""
    if str(request.messages[0].content).startswith("You are the checker worker"):
        return AssistantMessage(tool_calls=(call("hang", {}),))
    return AssistantMessage(tool_calls=(call("facts", {"instruction": "find one"}),))


async def test_a_hive_call_cut_off_keeps_what_its_sub_run_spent(tmp_path: Path) -> None:
    hanging = anyio.Event()

    @tool
    async def hang() -> str:
        """Wait for good."""
        hanging.set()
        await anyio.sleep(HANG_S)
        return "never"

    model = FunctionModel(_lead_calls_facts)
    facts = Executor(
        [Role(name="checker", tools=("hang",))], model, tools=[hang],
        planner=lambda task: [("checker", task)], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("facts",))], model, tools=[facts.as_tool("facts")],
        aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    async with anyio.create_task_group() as tg:  # the run is cancelled as the call waits
        tg.start_soon(partial(executor.run, "t", subtasks=[("lead", "go")], run_id="r1"))
        await hanging.wait()
        tg.cancel_scope.cancel()
    spans = RunStore(tmp_path / "runs.db").spans("r1")
    calls = [s for s in spans if s.kind == "model_call"]
    inner = [s for s in calls if (s.worker or "").startswith("s1/")]
    assert inner  # the sub-run's call, under the hive call
    facts_call = one(spans, "tool_call", "s1")
    assert facts_call.status == "cancelled"
    assert facts_call.input_tokens == sum(s.input_tokens for s in inner) > 0
    [run] = [s for s in spans if s.kind == "run"]
    assert run.input_tokens == sum(s.input_tokens for s in calls)
    assert run.output_tokens == sum(s.output_tokens for s in calls)


def started(recorder: SpanRecorder, *workers: str) -> None:
    """Tell ``recorder`` run ``r`` started, planned, and its ``workers`` started."""
    recorder(RunStarted(run_id="r", task="t"))
    recorder(PlanReady(run_id="r", plan=Plan(subtasks=()), duration_s=0.0))
    for name in workers:
        recorder(WorkerStarted(worker=name, run_id="r", role="w"))


def test_calls_that_never_said_how_they_ended_end_with_their_worker() -> None:
    # (A worker on an actor that died: its calls' ends were never told.) They were
    # drawn to the run's end, past their worker's.
    recorder = SpanRecorder(clock=map(float, count()).__next__)
    started(recorder, "a")
    recorder(ToolCallStarted(worker="a", run_id="r", turn=1, call_id="c", tool="t"))
    recorder(WorkerFinished(worker="a", run_id="r", role="w", status="failed", duration_s=1))
    recorder(RunFinished(run_id="r", status="partial", wall_s=9.0))
    tool_call, turn, worker = (one(recorder.spans, k, "a") for k in ("tool_call", "turn", "worker"))
    assert tool_call.end == turn.end == worker.end < one(recorder.spans, "run", None).end
    assert (tool_call.status, turn.status) == ("cancelled", "failed")


def test_a_hive_call_the_runs_end_cuts_off_keeps_what_its_sub_run_spent() -> None:
    # (Its end was never told.) The run's end cut it off without the usage held for it.
    recorder = SpanRecorder()
    started(recorder, "s1")
    recorder(ToolCallStarted(worker="s1", run_id="r", turn=1, call_id="c", tool="facts"))
    sub_run = recorder.nested("s1", 1, "c")
    sub_run(ModelCallStarted(worker="s1", run_id="r/s1/c", turn=1))
    sub_run(
        ModelCallFinished(
            worker="s1", run_id="r/s1/c", turn=1, duration_s=0.1, status="ok",
            input_tokens=30, output_tokens=5, cost=0.5,
        )
    )  # fmt: skip
    recorder(RunFinished(run_id="r", status="interrupted", wall_s=1.0))
    facts = one(recorder.spans, "tool_call", "s1")
    assert (facts.status, facts.input_tokens, facts.output_tokens, facts.cost) == (
        "cancelled", 30, 5, 0.5,
    )  # fmt: skip
    for kind in ("turn", "worker"):
        assert one(recorder.spans, kind, "s1").input_tokens == 30
    assert one(recorder.spans, "run", None).input_tokens == 30


def _lead_calls_payer(request: ModelRequest) -> AssistantMessage | str:
    """A lead calls its payer (``agent:payer``), whose payment waits for a person."""
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return "done"
    if str(request.messages[0].content).startswith("You are the payer worker"):
        return AssistantMessage(tool_calls=(call("pay", {"to": "bob"}),))
    return AssistantMessage(tool_calls=(call("payer", {"instruction": "pay bob"}),))


@tool(side_effects=True, approval=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def test_a_call_whose_nested_worker_waits_for_a_person_waits(tmp_path: Path) -> None:
    roles = [Role(name="lead", tools=("agent:payer",)), Role(name="payer", tools=("pay",))]
    events: list[Event] = []
    recorder = SpanRecorder()
    executor = Executor(
        roles, FunctionModel(_lead_calls_payer), tools=[pay], aggregator="concat",
        store=tmp_path / "runs.db",
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("lead", "go")], on_event=[recorder, events.append])
    assert result.status == "waiting"
    assert unfinished(events) == []
    paused = one(recorder.spans, "tool_call", "s1")
    assert (paused.name, paused.status) == ("payer", "waiting")  # not cancelled, an error
    assert one(recorder.spans, "turn", "s1").status == "waiting"


async def test_a_plan_that_failed_is_an_error() -> None:
    recorder = SpanRecorder()
    roles = [Role(name="planner"), Role(name="w")]
    executor = Executor(roles, FunctionModel(lambda request: "not a plan"))
    with pytest.raises(PlanError):
        await executor.run("t", on_event=[recorder])
    [plan] = [s for s in recorder.spans if s.kind == "plan"]
    assert plan.status == "error"
    assert plan.error is not None
    assert plan.error.startswith("PlanError")


async def test_an_aggregation_that_failed_is_an_error() -> None:
    def broken(results: object, task: str) -> str:
        raise ValueError("my aggregator broke")

    recorder = SpanRecorder()
    executor = Executor([Role(name="w")], FunctionModel(lambda request: "x"), aggregator=broken)
    with pytest.raises(RunFailed, match="broke"):
        await executor.run("t", subtasks=[("w", "a")], on_event=[recorder])
    [aggregate] = [s for s in recorder.spans if s.kind == "aggregate"]
    told = "RunFailed: the aggregator failed: ValueError: my aggregator broke"
    assert (aggregate.status, aggregate.error) == ("error", told)


async def test_a_turn_whose_model_call_failed_is_an_error() -> None:
    """It closed ok, under its failed call and its failed worker."""

    def fails(request: ModelRequest) -> str:
        raise ConnectionError("the endpoint went away")

    recorder = SpanRecorder()
    executor = Executor([Role(name="w")], FunctionModel(fails), aggregator="concat")
    with pytest.raises(RunFailed):
        await executor.run("t", subtasks=[("w", "go")], on_event=[recorder])
    model_call = one(recorder.spans, "model_call", "s1")
    turn = one(recorder.spans, "turn", "s1")
    assert model_call.status == "error"
    assert (turn.status, turn.error) == ("error", model_call.error)
    assert one(recorder.spans, "worker", "s1").status == "failed"
