"""Tracing where it meets a memory with priced embeddings: each call the memory makes
to its embeddings model is an ``embedding`` span with what it spent, so the trace
(``honeycomb trace``, a span recorder, OpenTelemetry, a hive tool's sub-run) counts
what the run's usage and budget count."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from honeycomb import Executor, Role, RoleMemory, RunResult, SQLiteMemory
from honeycomb.cli.main import main
from honeycomb.models import OpenAIEmbeddings, Price
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel
from honeycomb.trace.format import format_cost
from honeycomb.trace.otel import OpenTelemetryExporter
from honeycomb.trace.spans import SpanRecorder
from honeycomb.trace.timeline import build_timeline
from runtime import AssistantMessage, ModelRequest, ToolMessage
from runtime.testing import call
from tests.support.openai_server import OpenAIServer

PRICE = Price(input_per_mtok=1000.0, output_per_mtok=0.0)  # the models are free
NOTE = "the old tram stops by the castle"


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAIServer]:
    pytest.importorskip("sqlite_vec")
    with OpenAIServer() as running:
        yield running


def remembers(request: ModelRequest) -> AssistantMessage | str:
    """Keeps a note with its ``remember`` tool, then answers."""
    if any(isinstance(m, ToolMessage) for m in request.messages):
        return "the castle by tram"
    return AssistantMessage(tool_calls=(call("remember", {"text": NOTE}),))


def guide(
    server: OpenAIServer, path: Path, model: FunctionModel | None = None, **options: Any
) -> Executor:
    """A guide whose memory recalls at its start, keeps notes and keeps its answer."""
    embeddings = OpenAIEmbeddings("embed-small", base_url=server.base_url, price=PRICE)
    memory = SQLiteMemory(path / "memory.db", embeddings=embeddings)
    role = Role(name="guide", memory=RoleMemory(recall=2, store_result=True))
    return Executor([role], model or FunctionModel(remembers), memory=memory, **options)


def test_honeycomb_trace_counts_what_the_memorys_embeddings_spent(
    server: OpenAIServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    executor = guide(server, tmp_path, store=RunStore(db))

    async def run() -> RunResult:
        return await executor.run("trip", subtasks=[("guide", "Lisbon sights")], run_id="r1")

    result = anyio.run(run)
    assert result.status == "ok"
    usage = result.usage
    assert usage.cost > 0.01  # its recall at its start, its note, its answer kept
    spans = RunStore(db).spans("r1")
    embedded = [s for s in spans if s.kind == "embedding"]
    assert len(embedded) == 3
    by_id = {s.span_id: s for s in spans}
    parents = [by_id[s.parent_id or ""].kind for s in embedded]
    assert parents == ["worker", "turn", "worker"]  # its recall, its tool's, its answer's
    timeline = build_timeline(spans)
    assert (timeline.input_tokens, timeline.output_tokens) == (
        usage.input_tokens,
        usage.output_tokens,
    )
    assert timeline.cost == pytest.approx(usage.cost)
    [root] = [s for s in spans if s.kind == "run"]
    assert (root.input_tokens, root.cost) == (usage.input_tokens, pytest.approx(usage.cost))
    capsys.readouterr()
    assert main(["trace", "r1", "--store", str(db)]) == 0
    [cost] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("cost")]
    assert cost.split() == ["cost", format_cost(usage.cost)]


async def test_an_embedding_is_an_embeddings_client_span_in_opentelemetry(
    server: OpenAIServer, tmp_path: Path
) -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    result = await guide(server, tmp_path).run(
        "trip", subtasks=[("guide", "Lisbon sights")], on_event=[OpenTelemetryExporter(provider)]
    )
    spans = exported.get_finished_spans()
    embeddings = [s for s in spans if s.name == "embeddings embed-small"]
    assert len(embeddings) == 3
    attributes = [s.attributes or {} for s in embeddings]
    assert {a["gen_ai.operation.name"] for a in attributes} == {"embeddings"}
    tokens = sum(int(str(a["gen_ai.usage.input_tokens"])) for a in attributes)
    cost = sum(float(str(a["honeycomb.cost"])) for a in attributes)
    assert tokens * PRICE.input_per_mtok / 1e6 == pytest.approx(result.usage.cost)
    assert cost == pytest.approx(result.usage.cost)


def calls_the_guide(request: ModelRequest) -> AssistantMessage | str:
    """The lead calls the hive tool ``guides``; the guide keeps a note."""
    if str(request.messages[0].content).startswith("You are the lead worker"):
        if any(isinstance(m, ToolMessage) for m in request.messages):
            return "done"
        return AssistantMessage(tool_calls=(call("guides", {"instruction": "Lisbon"}),))
    return remembers(request)


async def test_a_hive_tools_embeddings_count_in_its_callers_trace(
    server: OpenAIServer, tmp_path: Path
) -> None:
    model = FunctionModel(calls_the_guide)
    guides = guide(
        server, tmp_path, model, planner=lambda task: [("guide", task)], aggregator="concat"
    )
    lead = Executor(
        [Role(name="lead", tools=("guides",))], model, tools=[guides.as_tool("guides")],
        aggregator="concat",
    )  # fmt: skip
    recorder = SpanRecorder()
    result = await lead.run("trip", subtasks=[("lead", "go")], on_event=[recorder])
    assert result.status == "ok"
    assert result.usage.cost > 0.01
    [root] = [s for s in recorder.spans if s.kind == "run"]
    assert (root.input_tokens, root.cost) == (
        result.usage.input_tokens,
        pytest.approx(result.usage.cost),
    )
    embedded = [s.worker or "" for s in recorder.spans if s.kind == "embedding"]
    assert len(embedded) == 3  # the guide's, named under the lead's call
    assert all(w.startswith("s1/call_") and w.endswith("/s1") for w in embedded), embedded
