"""A call's wait for a person's decision is a span of its turn (``approval``): a run
that waited for a person showed a gap between the turn's model call and its tool call,
which no span accounted for."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from honeycomb import (
    ApprovalRequest,
    Approvals,
    Approver,
    Decision,
    Executor,
    Role,
    Subtask,
    tool,
)
from honeycomb.events import ApprovalRequested, WorkerFinished
from honeycomb.testing import ScriptedModel, call
from honeycomb.trace.otel import OpenTelemetryExporter
from honeycomb.trace.spans import Span, SpanRecorder
from tests.support.approvals import payer_beside_reader

PAY = [Subtask(id="s1", role="payer", instruction="pay ann")]


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def _spans(approver: Approver | None, store: Path | None = None) -> list[Span]:
    recorder = SpanRecorder()
    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "ann"}, id="c1"), "done"])
    executor = Executor(
        [payer], model, tools=[pay], approver=approver, store=store, aggregator="concat",
        on_event=[recorder],
    )  # fmt: skip
    await executor.run("pay", subtasks=PAY, run_id="r1")
    return recorder.spans


def _one(spans: list[Span], kind: str) -> Span:
    (found,) = [s for s in spans if s.kind == kind]
    return found


async def test_a_wait_for_the_approver_is_a_span_of_the_turn_before_the_call() -> None:
    async def ann(request: ApprovalRequest) -> Decision:
        await asyncio.sleep(0.1)  # the person's time to decide
        return Decision.approved(by="ann")

    spans = await _spans(ann)
    waited, ran = _one(spans, "approval"), _one(spans, "tool_call")
    turn = next(s for s in spans if s.span_id == waited.parent_id)
    assert (turn.kind, turn.turn) == ("turn", 1)
    assert (waited.name, waited.status, waited.worker, waited.turn) == ("pay", "approved", "s1", 1)
    assert waited.detail == "c1 by ann"
    assert waited.duration_s >= 0.1
    assert ran.start >= waited.end  # the call ran once decided
    assert turn.start <= waited.start


async def test_a_denied_call_waits_as_a_span_saying_why() -> None:
    async def no(request: ApprovalRequest) -> Decision:
        return Decision.denied("not today")

    waited = _one(await _spans(no), "approval")
    assert (waited.status, waited.error) == ("denied", "not today")
    assert waited.detail == "c1 by the run's approver"


async def test_a_call_that_waits_in_the_store_waits_with_its_worker(tmp_path: Path) -> None:
    spans = await _spans(None, tmp_path / "runs.db")
    waited, worker = _one(spans, "approval"), _one(spans, "worker")
    assert (worker.status, waited.status, waited.detail) == ("waiting", "waiting", "c1")
    assert waited.end == worker.end  # it waits on as the run ends


async def test_opentelemetry_names_the_wait_after_its_tool() -> None:
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))

    async def yes(request: ApprovalRequest) -> Decision:
        return Decision.approved()

    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "ann"}, id="c1"), "done"])
    executor = Executor(
        [payer], model, tools=[pay], approver=yes, aggregator="concat",
        on_event=[OpenTelemetryExporter(tracer_provider=provider)],
    )  # fmt: skip
    await executor.run("pay", subtasks=PAY)
    (waited,) = [s for s in exported.get_finished_spans() if s.name == "approval pay"]
    assert waited.attributes is not None
    assert waited.attributes["gen_ai.tool.name"] == "pay"
    assert waited.attributes["honeycomb.status"] == "approved"


async def test_a_call_decided_in_the_store_as_the_run_goes_on_waits_until_taken_up(
    tmp_path: Path,
) -> None:
    recorder, payer_done = SpanRecorder(), anyio.Event()
    service = payer_beside_reader(
        tmp_path / "runs.db", payer_done, {"to": "ann"}, on_event=[recorder]
    )
    plan = [
        Subtask(id="payer", role="payer", instruction="Pay ann."),
        Subtask(id="reader", role="reader", instruction="Read."),
    ]
    decided_at = 0.0
    async with service.stream("pay and read", subtasks=plan, run_id="r1") as events:
        async for event in events:
            if isinstance(event, ApprovalRequested):
                await service.decide("r1", event.call_id, approve=True, by="ann")
                decided_at = time.time()
            if isinstance(event, WorkerFinished) and event.worker == "payer":
                payer_done.set()
    waited = _one(recorder.spans, "approval")
    assert (waited.worker, waited.status, waited.detail) == ("payer", "approved", "c1 by ann")
    assert waited.end >= decided_at  # until the paused worker took the decision up
