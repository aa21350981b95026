"""A hive called as a tool: its sub-run's calls are in every trace of the calling run
(its store's, and each listener's: a span recorder, an OpenTelemetry exporter), however
deep the hives call hives, so each trace counts what the result counts."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from honeycomb import Executor, Role
from honeycomb.testing import FunctionModel
from honeycomb.trace.otel import OpenTelemetryExporter
from honeycomb.trace.spans import SpanRecorder
from runtime import AssistantMessage, EventHandler, ModelRequest, ToolMessage
from runtime.testing import call


def _hive_in_hive(request: ModelRequest) -> AssistantMessage | str:
    """A lead calls the hive tool ``outer``, whose worker calls the hive tool ``inner``,
    whose worker answers."""
    system = str(request.messages[0].content)
    answered = any(isinstance(m, ToolMessage) for m in request.messages)
    for role, tool_name in (("lead", "outer"), ("middle", "inner")):
        if system.startswith(f"You are the {role} worker") and not answered:
            return AssistantMessage(tool_calls=(call(tool_name, {"instruction": "go on"}),))
    return "done"


def hives(model: FunctionModel) -> Executor:
    """A lead's hive, which calls a hive that calls a hive; no store."""
    inner = Executor(
        [Role(name="leaf")], model, planner=lambda task: [("leaf", task)], aggregator="concat"
    )
    outer = Executor(
        [Role(name="middle", tools=("inner",))], model, tools=[inner.as_tool("inner")],
        planner=lambda task: [("middle", task)], aggregator="concat",
    )  # fmt: skip
    return Executor(
        [Role(name="lead", tools=("outer",))], model, tools=[outer.as_tool("outer")],
        aggregator="concat",
    )  # fmt: skip


async def run(listener: EventHandler) -> tuple[int, int, int]:
    """The model calls, tokens in and tokens out of a run of :func:`hives`, as its
    result counts them, ``listener`` given to ``on_event``."""
    model = FunctionModel(_hive_in_hive)
    result = await hives(model).run("t", subtasks=[("lead", "go")], on_event=[listener])
    assert result.usage.model_calls == len(model.requests) == 5  # lead x2, middle x2, leaf
    usage = result.usage
    return usage.model_calls, usage.input_tokens, usage.output_tokens


async def test_a_span_recorder_given_to_a_run_counts_its_hive_tools_calls() -> None:
    recorder = SpanRecorder()
    counted = await run(recorder)
    calls = [s for s in recorder.spans if s.kind == "model_call"]
    [root] = [s for s in recorder.spans if s.kind == "run"]
    assert (len(calls), root.input_tokens, root.output_tokens) == counted
    # The leaf's one call, under the middle worker's call, under the lead's.
    (leaf,) = [s for s in calls if (s.worker or "").count("/") == 4]
    assert (leaf.worker or "").split("/")[::2] == ["s1", "s1", "s1"]


async def test_an_opentelemetry_exporter_counts_a_runs_hive_tools_calls() -> None:
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    counted = await run(OpenTelemetryExporter(tracer_provider=provider))
    chats = [s for s in memory.get_finished_spans() if s.name.startswith("chat")]
    tokens = [dict(s.attributes or {}) for s in chats]
    assert (
        len(chats),
        sum(int(str(t["gen_ai.usage.input_tokens"])) for t in tokens),
        sum(int(str(t["gen_ai.usage.output_tokens"])) for t in tokens),
    ) == counted
    assert len({s.context.trace_id for s in memory.get_finished_spans() if s.context}) == 1
    provider.shutdown()


async def test_an_exporter_on_every_executor_exports_a_hive_tools_calls_once() -> None:
    """One exporter given to the hive and to the hives it calls as tools (as a service
    gives it to each Executor it makes): their sub-runs' calls are in the caller's
    trace, once; each sub-run was exported as a trace of its own too, so its calls
    and tokens were there twice."""
    provider = TracerProvider()
    memory = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    otel = OpenTelemetryExporter(tracer_provider=provider)
    model = FunctionModel(_hive_in_hive)
    inner = Executor(
        [Role(name="leaf")], model, planner=lambda task: [("leaf", task)], aggregator="concat",
        on_event=[otel],
    )  # fmt: skip
    outer = Executor(
        [Role(name="middle", tools=("inner",))], model, tools=[inner.as_tool("inner")],
        planner=lambda task: [("middle", task)], aggregator="concat", on_event=[otel],
    )  # fmt: skip
    lead = Executor(
        [Role(name="lead", tools=("outer",))], model, tools=[outer.as_tool("outer")],
        aggregator="concat", on_event=[otel],
    )  # fmt: skip
    result = await lead.run("t", subtasks=[("lead", "go")])
    spans = memory.get_finished_spans()
    chats = [s for s in spans if s.name.startswith("chat")]
    assert len(chats) == result.usage.model_calls == 5
    assert len({s.context.trace_id for s in spans if s.context}) == 1
    assert [s.name for s in spans].count("invoke_workflow honeycomb") == 1
    provider.shutdown()
    assert otel.recorder_for(result.run_id) is None  # nothing of the runs kept


async def test_a_span_recorder_of_a_hive_tools_executor_too_keeps_one_tree() -> None:
    """A span recorder given to a run and to the Executor of a hive it calls: the
    sub-run gives it none of its events itself, its spans reaching it under the call;
    its run.started and worker.finished took the caller's run and worker spans over,
    and its calls were counted twice."""
    recorder = SpanRecorder()
    model = FunctionModel(_hive_in_hive)
    inner = Executor(
        [Role(name="leaf")], model, planner=lambda task: [("leaf", task)],
        aggregator="concat", on_event=[recorder],
    )  # fmt: skip
    lead = Executor(
        [Role(name="lead", tools=("outer",))], model, tools=[inner.as_tool("outer")],
        aggregator="concat",
    )  # fmt: skip
    result = await lead.run("t", subtasks=[("lead", "go")], on_event=[recorder])
    [root] = [s for s in recorder.spans if s.kind == "run"]
    assert (root.name, root.status) == ("t", "ok")
    calls = [s for s in recorder.spans if s.kind == "model_call"]
    assert len(calls) == result.usage.model_calls == 3  # lead x2, leaf
    assert (root.input_tokens, root.output_tokens) == (
        result.usage.input_tokens,
        result.usage.output_tokens,
    )
    [worker] = [s for s in recorder.spans if s.kind == "worker"]
    assert (worker.name, worker.parent_id) == ("s1", root.span_id)
