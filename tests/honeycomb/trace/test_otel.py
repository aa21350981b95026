"""OpenTelemetry export: a run becomes one trace with GenAI-convention spans, exported
to an in-memory exporter on a local tracer provider."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from honeycomb import (
    Approvals,
    AssistantMessage,
    Executor,
    ModelRequest,
    Policy,
    Role,
    RunFailed,
    tool,
)
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.trace.otel import OpenTelemetryExporter
from honeycomb.trace.spans import Span
from runtime import Model, ModelHTTPError
from runtime.testing import call

ROLES = [Role(name="researcher", tools=("lookup",)), Role(name="aggregator")]
WRITERS = [Role(name="writer")]


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


@tool
async def lookup(city: str) -> str:
    """Weather by city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"{city}: sunny"


@pytest.fixture
def exported() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    yield provider, memory
    provider.shutdown()


def writers(provider: TracerProvider, model: Model, **options: Any) -> Executor:
    """An executor of writers that exports to ``provider``, concatenating answers."""
    exporter = OpenTelemetryExporter(tracer_provider=provider)
    return Executor(WRITERS, model, aggregator="concat", on_event=[exporter], **options)


def by_id(spans: tuple[ReadableSpan, ...]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans if s.context is not None}


def parent_of(span: ReadableSpan, spans: dict[int, ReadableSpan]) -> ReadableSpan | None:
    return spans[span.parent.span_id] if span.parent is not None else None


def named(spans: tuple[ReadableSpan, ...], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def attr(span: ReadableSpan, key: str) -> object:
    assert span.attributes is not None
    return span.attributes.get(key)


async def test_a_run_is_one_trace_of_genai_spans(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    model = ScriptedModel(
        {
            "r/s1": [call("lookup", {"city": "Lisbon"}, id="c1"), "Lisbon is sunny"],
            "r/s2": [call("lookup", {"city": "Atlantis"}, id="c2"), "no data"],
            "r/aggregator": ["final"],
        }
    )
    executor = Executor(
        ROLES, model, tools=[lookup], on_event=[OpenTelemetryExporter(tracer_provider=provider)]
    )
    result = await executor.run(
        "weather", subtasks=[("researcher", "Lisbon"), ("researcher", "Atlantis")], run_id="r"
    )
    spans = memory.get_finished_spans()
    assert sorted(s.name for s in spans) == sorted(
        ["invoke_workflow honeycomb", "plan", "aggregate", "turn 1", "chat scripted"]
        + ["invoke_agent researcher", "turn 1", "turn 2", "chat scripted", "chat scripted"] * 2
        + ["execute_tool lookup"] * 2
    )
    assert len({s.context.trace_id for s in spans if s.context is not None}) == 1
    ids = by_id(spans)

    (root,) = [s for s in spans if s.parent is None]
    assert root.name == "invoke_workflow honeycomb"
    assert attr(root, "gen_ai.operation.name") == "invoke_workflow"
    assert attr(root, "honeycomb.run_id") == "r"
    assert attr(root, "honeycomb.status") == "ok"
    assert root.status.status_code is StatusCode.UNSET

    for span in spans:  # every child lies within its parent
        parent = parent_of(span, ids)
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.start_time <= span.end_time
        if parent is not None:
            assert parent.start_time is not None
            assert parent.end_time is not None
            assert parent.start_time <= span.start_time
            assert span.end_time <= parent.end_time, span.name

    workers = named(spans, "invoke_agent researcher")
    assert {attr(w, "honeycomb.worker") for w in workers} == {"s1", "s2"}
    for worker in workers:
        assert parent_of(worker, ids) is root
        assert attr(worker, "gen_ai.operation.name") == "invoke_agent"
        assert attr(worker, "gen_ai.agent.name") == "researcher"
        assert worker.status.status_code is StatusCode.UNSET
    assert parent_of(named(spans, "plan")[0], ids) is root
    assert parent_of(named(spans, "aggregate")[0], ids) is root

    chats = named(spans, "chat scripted")
    for chat in chats:
        turn = parent_of(chat, ids)
        assert turn is not None
        assert turn.name == f"turn {attr(chat, 'honeycomb.turn')}"
        assert chat.kind is SpanKind.CLIENT
        assert attr(chat, "gen_ai.operation.name") == "chat"
        assert attr(chat, "gen_ai.response.model") == "scripted"
        assert attr(chat, "gen_ai.conversation.id") == f"r/{attr(chat, 'honeycomb.worker')}"
    usage = result.usage
    assert sum(int(str(attr(c, "gen_ai.usage.input_tokens"))) for c in chats) == (
        usage.input_tokens
    )
    assert sum(int(str(attr(c, "gen_ai.usage.output_tokens"))) for c in chats) == (
        usage.output_tokens
    )
    assert usage.input_tokens > 0
    for worker in workers:  # a worker's usage is its chats' sum
        own = [c for c in chats if attr(c, "honeycomb.worker") == attr(worker, "honeycomb.worker")]
        assert len(own) == 2
        assert attr(worker, "gen_ai.usage.input_tokens") == sum(
            int(str(attr(c, "gen_ai.usage.input_tokens"))) for c in own
        )

    tools = {attr(t, "gen_ai.tool.call.id"): t for t in named(spans, "execute_tool lookup")}
    assert set(tools) == {"c1", "c2"}
    for call_id, worker_name in (("c1", "s1"), ("c2", "s2")):
        span = tools[call_id]
        turn = parent_of(span, ids)
        assert turn is not None
        assert turn.name == "turn 1"
        owner = parent_of(turn, ids)
        assert owner is not None
        assert attr(owner, "honeycomb.worker") == worker_name
        assert attr(span, "gen_ai.operation.name") == "execute_tool"
        assert attr(span, "gen_ai.tool.name") == "lookup"
    assert tools["c1"].status.status_code is StatusCode.UNSET
    failed = tools["c2"].status
    assert failed.status_code is StatusCode.ERROR
    assert failed.description is not None
    assert "no such city" in failed.description
    assert attr(tools["c2"], "error.type") == "error"


async def test_errors_mark_the_chat_worker_and_run_spans(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    model = ScriptedModel({"r/s1": [ModelHTTPError(401, "no key")]})
    executor = writers(provider, model, policy=Policy(failure="fail_fast"))
    with pytest.raises(RunFailed):
        await executor.run("t", subtasks=[("writer", "a")], run_id="r")
    spans = memory.get_finished_spans()
    failing = {s.name: s for s in spans if s.status.status_code is StatusCode.ERROR}
    # The turn too: its model call failed, so it has no answer.
    assert set(failing) == {"chat", "turn 1", "invoke_agent writer", "invoke_workflow honeycomb"}
    chat = failing["chat"]  # no response: no model name
    assert attr(chat, "gen_ai.response.model") is None
    assert chat.status.description is not None
    assert "401" in chat.status.description
    assert attr(failing["invoke_agent writer"], "error.type") == "failed"
    assert attr(failing["invoke_workflow honeycomb"], "honeycomb.status") == "failed"


async def test_a_cancelled_run_is_still_exported(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    executor = writers(provider, ScriptedModel(lambda key: ["late"], latency=5))
    with anyio.move_on_after(0.1):
        await executor.run("t", subtasks=[("writer", "a")], run_id="r")
    spans = {s.name: s for s in memory.get_finished_spans()}
    root = spans["invoke_workflow honeycomb"]
    assert attr(root, "honeycomb.status") == "interrupted"
    assert root.status.status_code is StatusCode.ERROR
    chat = spans["chat"]  # cut off before the model answered
    assert attr(chat, "honeycomb.status") == "cancelled"
    assert chat.status.status_code is StatusCode.ERROR


async def test_the_run_span_is_a_child_of_the_callers_span(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    executor = writers(provider, ScriptedModel(["done"]))
    with provider.get_tracer("app").start_as_current_span("request") as request:
        await executor.run("t", subtasks=[("writer", "a")])
    spans = memory.get_finished_spans()
    (root,) = named(spans, "invoke_workflow honeycomb")
    assert root.parent is not None
    assert root.parent.span_id == request.get_span_context().span_id
    assert {s.context.trace_id for s in spans if s.context is not None} == {
        request.get_span_context().trace_id
    }


async def test_concurrent_runs_are_separate_traces(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    executor = writers(provider, ScriptedModel(lambda key: ["done"], latency=0.05))
    async with anyio.create_task_group() as tg:
        for run_id in ("a", "b"):
            tg.start_soon(partial(executor.run, "t", subtasks=[("writer", run_id)], run_id=run_id))
    traces: dict[int, set[object]] = {}
    for span in memory.get_finished_spans():
        assert span.context is not None
        traces.setdefault(span.context.trace_id, set()).add(attr(span, "honeycomb.run_id"))
    assert sorted(traces.values(), key=str) == [{"a"}, {"b"}]


async def test_a_resumed_runs_later_life_links_to_the_earlier_one(
    exported: tuple[TracerProvider, InMemorySpanExporter], tmp_path: Path
) -> None:
    """Each life of a run is a trace of its own (it is exported as it ends); the run
    span of a later life links to the earlier life's, whether exported as it ran or
    read back from the store."""
    provider, memory = exported
    exporter = OpenTelemetryExporter(tracer_provider=provider)

    def answer(request: ModelRequest) -> str | AssistantMessage:
        return "done" if request.messages[-1].role == "tool" else call("pay", {"to": "ann"})

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    executor = Executor(
        [payer], FunctionModel(answer), tools=[pay], store=tmp_path / "runs.db", on_event=[exporter]
    )
    assert (await executor.run("t", subtasks=[("payer", "pay")], run_id="r1")).status == "waiting"
    (pending,) = await executor.pending("r1")
    await executor.decide("r1", pending.call_id, approve=True)
    assert (await executor.resume("r1")).status == "ok"

    def lives() -> list[ReadableSpan]:
        found = sorted(named(memory.get_finished_spans(), "invoke_workflow honeycomb"),
                       key=lambda s: s.start_time or 0)  # fmt: skip
        assert all(not s.links for s in memory.get_finished_spans() if s not in found)
        return found

    first, second = lives()
    assert first.context is not None
    assert second.context is not None
    assert first.context.trace_id != second.context.trace_id  # a trace a life
    assert not first.links
    (link,) = second.links
    assert link.context == first.context
    assert link.attributes == {"honeycomb.link": "earlier life"}

    assert executor.store is not None
    stored = executor.store.spans("r1")
    for again in (OpenTelemetryExporter(tracer_provider=provider), exporter):
        # Read back from the store, by an exporter that saw neither life, and by the one
        # that exported both as they ran: a life links to the life before it, never later.
        memory.clear()
        again.export(stored, run_id="r1")
        first, second = lives()
        assert not first.links
        assert [link.context for link in second.links] == [first.context]


def test_export_keeps_recorded_times_and_links(
    exported: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, memory = exported
    a, b, c, d, e, f = (letter * 16 for letter in "abcdef")
    stored = [  # as a store gives them back: by start; children end first
        Span(span_id=a, parent_id=None, kind="run", name="task", start=100.0, end=109.0,
             status="partial"),
        Span(span_id=b, parent_id=a, kind="worker", name="s1", start=101.0, end=105.5,
             worker="s1", detail="writer"),
        Span(span_id=c, parent_id=b, kind="turn", name="turn 1", start=101.25, end=105.0,
             worker="s1", turn=1),
        Span(span_id=d, parent_id=c, kind="tool_call", name="search", start=102.0, end=102.5,
             status="timeout", error="timed out after 0.5s", worker="s1", turn=1,
             detail="call_7"),
        Span(span_id=e, parent_id=f, kind="worker", name="s2", start=103.0, end=104.0,
             worker="s2"),  # parent lost
    ]  # fmt: skip
    OpenTelemetryExporter(tracer_provider=provider, workflow="trip").export(
        reversed(stored), run_id="r9"
    )
    spans = {str(attr(s, "honeycomb.span_id")): s for s in memory.get_finished_spans()}
    assert set(spans) == {s.span_id for s in stored}
    for span in stored:
        otel_span = spans[span.span_id]
        assert otel_span.start_time == round(span.start * 1e9)
        assert otel_span.end_time == round(span.end * 1e9)
        assert attr(otel_span, "honeycomb.run_id") == "r9"
        parent = otel_span.parent
        if span.parent_id is None or span.parent_id not in spans:
            assert parent is None, "a span whose parent is missing starts a trace"
        else:
            assert parent is not None
            assert parent == spans[span.parent_id].context
    assert spans["a" * 16].name == "invoke_workflow trip"
    assert spans["a" * 16].status.status_code is StatusCode.UNSET  # partial is no error
    assert spans["e" * 16].name == "invoke_agent s2"  # no role: its name
    tool_span = spans["d" * 16]
    assert tool_span.name == "execute_tool search"
    assert tool_span.status.status_code is StatusCode.ERROR
    assert tool_span.status.description == "timed out after 0.5s"
    assert attr(tool_span, "error.type") == "timeout"
    assert attr(tool_span, "gen_ai.tool.call.id") == "call_7"


def test_importing_honeycomb_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, honeycomb\n"
        "loaded = [m for m in sys.modules if m.startswith('opentelemetry')]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
