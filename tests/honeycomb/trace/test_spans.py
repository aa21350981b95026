"""Spans: the tree a run's events make, its times and usage, and where it is kept."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from itertools import count
from pathlib import Path

import anyio
import pytest
from msgspec.structs import astuple

from honeycomb import Executor, Guards, RetryPolicy, Role, Subtask, tool
from honeycomb.models import RetryingModel
from honeycomb.run.events import PlanReady, RunFinished, RunStarted, WorkerFinished, WorkerStarted
from honeycomb.run.plan import Plan
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.spans import Span, SpanRecorder, from_jsonl, to_jsonl
from honeycomb.trace.timeline import build_timeline
from runtime import (
    AssistantMessage,
    Event,
    ModelCallFinished,
    ModelCallStarted,
    ModelHTTPError,
    ModelRequest,
    Price,
    PricedModel,
    ToolCallFinished,
    ToolCallStarted,
    ToolMessage,
    Tracer,
)
from runtime.testing import call
from tests.support.concurrency import Overlap


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    await anyio.sleep(0.02)
    if key == "bad":
        raise ValueError("no such key")
    return f"value of {key}"


async def answer(request: ModelRequest) -> AssistantMessage | str:
    await anyio.sleep(0.01)
    if not any(isinstance(m, ToolMessage) for m in request.messages):
        key = "bad" if (request.conversation or "").endswith("b") else "k"
        return AssistantMessage(tool_calls=(call("lookup", {"key": key}),))
    return f"done {request.conversation}"


def executor(**options: object) -> Executor:
    model = PricedModel(FunctionModel(answer), Price(input_per_mtok=2.0, output_per_mtok=8.0))
    roles = [Role(name="worker", description="Looks things up.", tools=("lookup",))]
    return Executor(roles, model, tools=[lookup], aggregator="concat", **options)  # type: ignore[arg-type]


PLAN = [
    Subtask(id="a", role="worker", instruction="first"),
    Subtask(id="b", role="worker", instruction="second"),
    Subtask(id="c", role="worker", instruction="after a", depends_on=("a",)),
]


def by_kind(spans: list[Span], kind: str) -> list[Span]:
    return [s for s in spans if s.kind == kind]


async def test_a_run_makes_one_tree_of_spans() -> None:
    recorder = SpanRecorder()
    result = await executor().run("look things up", subtasks=PLAN, on_event=[recorder])
    spans = recorder.spans
    ids = {s.span_id: s for s in spans}
    assert len(ids) == len(spans)  # unique ids
    [run] = by_kind(spans, "run")
    assert run.parent_id is None
    assert run.name == "look things up"
    workers = by_kind(spans, "worker")
    assert sorted(w.name for w in workers) == ["a", "b", "c"]
    assert all(w.parent_id == run.span_id for w in workers)
    assert [p.parent_id for p in by_kind(spans, "plan")] == [run.span_id]
    for span in spans:  # every child lies within its parent
        if span.parent_id is not None:
            parent = ids[span.parent_id]
            assert parent.start <= span.start + 1e-6
            assert span.end <= parent.end + 1e-6
    turns = by_kind(spans, "turn")
    assert len(turns) == 6  # two turns per worker
    for kind in ("model_call", "tool_call"):
        assert all(ids[s.parent_id].kind == "turn" for s in by_kind(spans, kind) if s.parent_id)
    # c waited for a: it starts after a ends
    start = {w.name: w for w in workers}
    assert start["c"].start >= start["a"].end - 1e-3
    # b's tool raised: its span says so, and the others did not
    tools = {s.worker: s for s in by_kind(spans, "tool_call")}
    assert tools["b"].status == "error"
    assert tools["b"].error is not None
    assert "no such key" in tools["b"].error
    assert tools["a"].status == "ok"
    # usage adds up the tree, and matches the run's result
    models = by_kind(spans, "model_call")
    assert run.input_tokens == sum(m.input_tokens for m in models) == result.usage.input_tokens
    assert run.output_tokens == result.usage.output_tokens
    assert run.cost == pytest.approx(result.usage.cost)
    assert result.usage.cost == pytest.approx(
        (result.usage.input_tokens * 2.0 + result.usage.output_tokens * 8.0) / 1e6
    )
    assert result.usage.cost > 0


async def test_a_stored_run_keeps_its_spans(tmp_path: Path) -> None:
    recorder = SpanRecorder()
    db = tmp_path / "runs.db"
    await executor(store=db).run("look", subtasks=PLAN, run_id="r1", on_event=[recorder])
    kept = RunStore(db).spans("r1")
    assert sorted(kept, key=lambda s: s.span_id) != []
    kinds = {"run", "plan", "worker", "aggregate", "turn", "model_call", "tool_call"}
    assert {s.kind for s in kept} == kinds
    assert len(kept) == len(recorder.spans)
    [summary] = RunStore(db).runs()
    assert summary.cost > 0


def ticks() -> Callable[[], float]:
    return map(float, count()).__next__


def test_a_runs_events_make_its_tree_of_spans() -> None:
    recorder = SpanRecorder(clock=ticks())
    tracer = Tracer(recorder, log=False)
    tracer.emit(RunStarted(run_id="r", task="t"))
    tracer.emit(PlanReady(run_id="r", plan=Plan(subtasks=()), duration_s=0.0))
    for name in ("a", "b"):
        tracer.emit(WorkerStarted(worker=name, run_id="r", role="worker"))
    for turn in (1, 2):
        tracer.emit(ModelCallStarted(worker="a", run_id="r", turn=turn))
        tracer.emit(
            ModelCallFinished(
                worker="a", run_id="r", turn=turn, duration_s=0.1, status="ok", model="m",
                input_tokens=10, output_tokens=5, cost=0.5, tool_calls=1, error=None,
                attempts=turn, retry_wait_s=0.5 * (turn - 1), reasoning_tokens=3,
            )
        )  # fmt: skip
        tracer.emit(ToolCallStarted(worker="a", run_id="r", turn=turn, call_id="c", tool="t"))
        tracer.emit(
            ToolCallFinished(
                worker="a", run_id="r", turn=turn, call_id="c", tool="t", status="error",
                duration_s=0.1, error="ValueError: no",
            )
        )  # fmt: skip
    tracer.emit(WorkerFinished(worker="a", run_id="r", role="worker", status="ok", duration_s=1))
    tracer.emit(ModelCallStarted(worker="b", run_id="r", turn=1))  # in flight when it ends
    tracer.emit(ToolCallStarted(worker="b", run_id="r", turn=1, call_id="d", tool="t"))
    tracer.emit(RunFinished(run_id="r", status="interrupted", wall_s=1.0))

    spans = recorder.spans
    assert len(spans) == 13
    by_id = {s.span_id: s for s in spans}
    [run] = [s for s in spans if s.kind == "run"]
    assert all(s.parent_id in by_id for s in spans if s is not run)
    assert [s.status for s in spans if s.worker == "b" and s.kind != "worker"] == [
        "cancelled", "cancelled", "cancelled",
    ]  # fmt: skip
    model_calls = [s for s in spans if s.kind == "model_call" and s.worker == "a"]
    assert [(s.attempts, s.reasoning_tokens) for s in model_calls] == [(1, 3), (2, 3)]
    [worker] = [s for s in spans if s.kind == "worker" and s.name == "a"]
    assert worker.reasoning_tokens == 6  # summed as tokens are
    assert {s.status for s in spans if s.worker == "b"} == {"cancelled"}


async def test_a_stored_run_keeps_the_spans_its_events_make(tmp_path: Path) -> None:
    recorder = SpanRecorder()
    db = tmp_path / "runs.db"
    await executor(store=db).run("look", subtasks=PLAN, run_id="r1", on_event=[recorder])

    def shape(spans: list[Span]) -> Counter[tuple[object, ...]]:
        """Each span without its id and times, with its parent's kind and name."""
        by_id = {s.span_id: s for s in spans}
        parents = {s.span_id: by_id[s.parent_id] if s.parent_id else None for s in spans}
        return Counter(
            (*astuple(s)[2:4], *astuple(s)[6:], p.kind if p else None, p.name if p else None)
            for s in spans
            for p in [parents[s.span_id]]
        )

    assert shape(RunStore(db).spans("r1")) == shape(recorder.spans)


async def test_spans_round_trip_through_json_lines() -> None:
    recorder = SpanRecorder()
    await executor().run("look", subtasks=PLAN[:1], on_event=[recorder])
    text = to_jsonl(recorder.spans)
    assert len(text.splitlines()) == len(recorder.spans)
    assert from_jsonl(text) == recorder.spans


async def test_a_cancelled_run_closes_its_open_spans() -> None:
    recorder = SpanRecorder()
    calling = Overlap()
    both_calling = anyio.Event()

    async def slow(request: ModelRequest) -> str:
        async with calling:
            if calling.now == 2:
                both_calling.set()
            await anyio.sleep_forever()
        return "never"

    roles = [Role(name="worker", description="Waits.")]
    stalled = Executor(roles, FunctionModel(slow), aggregator="concat")
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: stalled.run("wait", subtasks=PLAN[:2], on_event=[recorder]))
        with anyio.fail_after(15):
            await both_calling.wait()  # each worker's model call is open
        tg.cancel_scope.cancel()
    statuses = Counter((s.kind, s.status) for s in recorder.spans)
    assert statuses[("run", "interrupted")] == 1
    assert statuses[("worker", "cancelled")] == 2
    assert statuses[("model_call", "cancelled")] == 2


async def test_a_cost_budget_stops_a_run_that_would_spend_more() -> None:
    from honeycomb import BudgetExceeded, Budgets, Policy

    plan = [Subtask(id=f"w{i}", role="worker", instruction="go") for i in range(6)]
    free = await executor().run("look", subtasks=plan)
    per_worker = free.usage.cost / 6
    capped = executor(policy=Policy(budgets=Budgets(cost=per_worker * 2), max_workers=1))
    with pytest.raises(BudgetExceeded) as caught:
        await capped.run("look", subtasks=plan)
    assert caught.value.limit == "cost"
    partial = caught.value.partial
    assert partial is not None
    assert 2 * per_worker <= partial.usage.cost < free.usage.cost
    assert sum(1 for s in partial.subtasks.values() if s.ok) < 6


async def test_spans_with_lone_surrogates_go_to_json_lines_replaced() -> None:
    recorder = SpanRecorder()
    await executor().run("look \udcff", subtasks=PLAN[:1], on_event=[recorder])
    text = to_jsonl(recorder.spans)
    text.encode("utf-8")
    assert [s.name for s in from_jsonl(text) if s.kind == "run"] == ["look \ufffd"]


def test_every_kind_of_usage_reaches_the_spans_above_its_call() -> None:
    """Each usage field of a model call is on its span, its turn, its worker and the
    run, even one a call reports alone; a tool call's span spends nothing."""
    recorder = SpanRecorder(clock=ticks())
    tracer = Tracer(recorder, log=False)
    tracer.emit(RunStarted(run_id="r", task="t"))
    tracer.emit(PlanReady(run_id="r", plan=Plan(subtasks=()), duration_s=0.0))
    tracer.emit(WorkerStarted(worker="a", run_id="r", role="worker"))
    usages = [
        {"input_tokens": 10, "output_tokens": 5, "cost": 0.25, "reasoning_tokens": 2,
         "cached_input_tokens": 4},
        {"cost": 0.5}, {"reasoning_tokens": 3}, {"cached_input_tokens": 6},
    ]  # fmt: skip
    for turn, usage in enumerate(usages, start=1):
        tracer.emit(ModelCallStarted(worker="a", run_id="r", turn=turn))
        tracer.emit(
            ModelCallFinished(
                worker="a", run_id="r", turn=turn, duration_s=0.1, status="ok", **usage
            )
        )
        tracer.emit(ToolCallStarted(worker="a", run_id="r", turn=turn, call_id="c", tool="t"))
        tracer.emit(
            ToolCallFinished(
                worker="a", run_id="r", turn=turn, call_id="c", tool="t", status="ok",
                duration_s=0.1,
            )
        )  # fmt: skip
    tracer.emit(WorkerFinished(worker="a", run_id="r", role="worker", status="ok", duration_s=1))
    tracer.emit(RunFinished(run_id="r", status="ok", wall_s=1.0))

    fields = ("input_tokens", "output_tokens", "cost", "reasoning_tokens", "cached_input_tokens")

    def spent(span: Span) -> dict[str, float]:
        return {f: getattr(span, f) for f in fields if getattr(span, f)}

    by_kind: dict[str, list[Span]] = {}
    for span in recorder.spans:
        by_kind.setdefault(span.kind, []).append(span)
    assert [spent(s) for s in by_kind["model_call"]] == usages
    assert [spent(s) for s in by_kind["turn"]] == usages
    assert [spent(s) for s in by_kind["tool_call"]] == [{}] * 4
    total = {"input_tokens": 10, "output_tokens": 5, "cost": 0.75, "reasoning_tokens": 5,
             "cached_input_tokens": 10}  # fmt: skip
    assert spent(by_kind["worker"][0]) == total
    assert spent(by_kind["run"][0]) == total


def _judged_and_nested(request: ModelRequest) -> AssistantMessage | str:
    """A lead whose instruction a judge checks, and who calls a hive tool (``facts``)
    whose sub-run has a worker of its own."""
    system = request.messages[0].content
    if "You are a guard" in system:
        return "PASS"
    if system.startswith("You are the fact worker"):
        return "a fact"
    if system.startswith("You are the lead worker") and not any(
        isinstance(m, ToolMessage) for m in request.messages
    ):
        return AssistantMessage(tool_calls=(call("facts", {"instruction": "find one"}),))
    return "done"


async def test_the_trace_counts_a_judges_call_and_a_hive_tools_sub_run(tmp_path: Path) -> None:
    # honeycomb trace, honeycomb runs and the result say the same: every model call,
    # a judge's and those of a hive called as a tool included, with their tokens.
    model = FunctionModel(_judged_and_nested)
    facts = Executor(
        [Role(name="fact")], model, planner=lambda task: [("fact", task)], aggregator="concat"
    )
    lead = Role(name="lead", tools=("facts",), guards=Guards(input=("judge",)))
    executor = Executor(
        [lead, Role(name="judge")], model, tools=[facts.as_tool("facts")],
        aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("lead", "go")], run_id="r1")
    assert result.usage.model_calls == len(model.requests) == 4  # lead x2, judge, fact
    timeline = build_timeline(RunStore(tmp_path / "runs.db").spans("r1"))
    assert (timeline.model_calls, timeline.total_tokens) == (4, result.usage.total_tokens)


async def test_a_judges_retried_call_counts_its_attempts() -> None:
    # The judge's call was made with no report: its retry went to no listener, and its
    # span said 1 attempt where the planner's retried call says 2.
    judged = Counter[str]()

    def answer(request: ModelRequest) -> str:
        if "You are a guard" in str(request.messages[0].content):
            judged["calls"] += 1
            if judged["calls"] == 1:
                raise ModelHTTPError(503, "a hiccup")
            return "PASS"
        return "an answer"

    model = RetryingModel(FunctionModel(answer), RetryPolicy(initial_wait_s=0, jitter_s=0))
    worker = Role(name="w", guards=Guards(output=("judge",)))
    executor = Executor([worker, Role(name="judge")], model, aggregator="concat")
    recorder, events = SpanRecorder(), list[Event]()
    await executor.run("t", subtasks=[("w", "a")], on_event=[recorder, events.append])
    [guard] = by_kind(recorder.spans, "guard")
    [judges] = [s for s in recorder.spans if s.parent_id == guard.span_id]
    assert (judges.kind, judges.attempts) == ("model_call", 2)
    [retried] = [e for e in events if e.kind == "model_call.retrying"]
    assert (retried.worker, getattr(retried, "turn", None)) == ("s1", 1)  # the turn it checked


def _hive_in_hive(request: ModelRequest) -> AssistantMessage | str:
    """A lead calls the hive tool ``outer``, whose worker calls the hive tool ``inner``,
    whose worker answers."""
    system = str(request.messages[0].content)
    answered = any(isinstance(m, ToolMessage) for m in request.messages)
    for role, tool_name in (("lead", "outer"), ("middle", "inner")):
        if system.startswith(f"You are the {role} worker") and not answered:
            return AssistantMessage(tool_calls=(call(tool_name, {"instruction": "go on"}),))
    return "done"


async def test_the_trace_counts_the_calls_of_a_hive_tool_a_hive_tool_calls(
    tmp_path: Path,
) -> None:
    # A sub-run's own sub-run had no spans: the trace counted fewer calls and tokens
    # than the result (and its cost, with prices).
    model = FunctionModel(_hive_in_hive)
    inner = Executor(
        [Role(name="leaf")], model, planner=lambda task: [("leaf", task)], aggregator="concat"
    )
    outer = Executor(
        [Role(name="middle", tools=("inner",))], model, tools=[inner.as_tool("inner")],
        planner=lambda task: [("middle", task)], aggregator="concat",
    )  # fmt: skip
    executor = Executor(
        [Role(name="lead", tools=("outer",))], model, tools=[outer.as_tool("outer")],
        aggregator="concat", store=tmp_path / "runs.db",
    )  # fmt: skip
    result = await executor.run("t", subtasks=[("lead", "go")], run_id="r1")
    assert result.usage.model_calls == len(model.requests) == 5  # lead x2, middle x2, leaf
    spans = RunStore(tmp_path / "runs.db").spans("r1")
    timeline = build_timeline(spans)
    assert (timeline.model_calls, timeline.total_tokens) == (5, result.usage.total_tokens)
    # The leaf's one call, under the middle worker's call, under the lead's.
    (leaf,) = [s for s in spans if s.kind == "model_call" and s.worker.count("/") == 4]
    assert leaf.worker.split("/")[::2] == ["s1", "s1", "s1"]  # WORKER/CALL/WORKER/CALL/WORKER
