"""Token streaming through the loop and the Executor: text deltas from models that
stream, one-shot calls for those that do not, and the wrappers passing streams on."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest
import structlog

from honeycomb import Approvals, Executor, Role, WrapperModel, tool
from honeycomb.events import ModelCallFinished, RunFinished, TextDelta
from honeycomb.testing import ScriptedModel
from runtime import (
    Event,
    LimitedModel,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    Price,
    PricedModel,
    RetryingModel,
    RetryPolicy,
    StreamInterrupted,
    TextToolModel,
)
from runtime.messages import AssistantMessage
from runtime.model import TextSink, call_model
from runtime.testing import call, text_pieces

ROLES = [Role(name="researcher"), Role(name="aggregator")]
FAST = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0)


def executor(model: object) -> Executor:
    return Executor(
        ROLES,
        model,  # type: ignore[arg-type]
        planner=lambda task: [("researcher", "look"), ("researcher", "see")],
    )


def scripted() -> ScriptedModel:
    def script(key: str) -> list[object]:
        if key.endswith("/aggregator"):
            return ["The merged answer, written word by word."]
        return [call("nothing"), f"found it for {key.rsplit('/', 1)[-1]}"]

    return ScriptedModel(script)  # type: ignore[arg-type]


async def test_stream_yields_each_answers_text_as_deltas_before_its_call_finishes() -> None:
    model = scripted()
    seen: list[Event] = []
    async with executor(model).stream("task") as events:
        async for event in events:
            seen.append(event)
    assert events.result is not None
    assert events.result.status == "ok"
    texts: dict[tuple[str | None, int], str] = defaultdict(str)
    for index, event in enumerate(seen):
        if isinstance(event, TextDelta):
            texts[event.worker, event.turn] += event.text
            at = (event.worker, event.turn)
            finished = [
                e
                for e in seen[index:]
                if isinstance(e, ModelCallFinished) and (e.worker, e.turn) == at
            ]
            assert finished, "a delta came after its model call finished"
    assert texts["aggregator", 1] == "The merged answer, written word by word."
    assert texts["s1", 2] == "found it for s1"
    assert texts["s2", 2] == "found it for s2"
    assert ("s1", 1) not in texts  # a turn of tool calls alone has no text
    assert events.result.answer_text == "The merged answer, written word by word."
    assert sum(isinstance(e, TextDelta) for e in seen) > len(texts)  # pieces, not whole
    assert isinstance(seen[-1], RunFinished)


class OneShot:
    """A model with ``complete`` only."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        return ModelResponse(message=AssistantMessage(content="whole"))


async def test_a_model_that_cannot_stream_runs_one_shot_and_shows_no_deltas() -> None:
    model = OneShot()
    async with executor(model).stream("task") as events:
        kinds = [type(e) async for e in events]
    assert events.result is not None
    assert events.result.answer_text == "whole"
    assert model.calls == 3
    assert TextDelta not in kinds


async def test_run_calls_models_one_shot_unless_asked_for_text_deltas() -> None:
    model = scripted()
    seen: list[Event] = []
    result = await executor(model).run("task", on_event=[seen.append])
    assert result.status == "ok"
    assert not any(isinstance(e, TextDelta) for e in seen)
    seen.clear()
    await executor(scripted()).run("task", on_event=[seen.append], text_deltas=True)
    assert any(isinstance(e, TextDelta) for e in seen)


async def test_no_deltas_without_listeners_even_when_asked() -> None:
    """Nobody listens: no model call streams (text_deltas with no handler is moot)."""

    class Counting(ScriptedModel):
        streamed = 0

        async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
            Counting.streamed += 1
            return await super().stream(request, on_text)

    await executor(Counting(["ok"])).run("task", text_deltas=True)
    assert Counting.streamed == 0


async def test_deltas_are_not_logged() -> None:
    with structlog.testing.capture_logs() as logs:
        async with executor(scripted()).stream("task") as events:
            assert any([isinstance(e, TextDelta) async for e in events])
    kinds = {entry["event"] for entry in logs}
    assert "model_call.finished" in kinds
    assert TextDelta.kind not in kinds


def test_text_pieces_join_to_the_text() -> None:
    for text in ["", "one", " two  words ", "line\nbreak\n\n and more"]:
        assert "".join(text_pieces(text)) == text
    assert text_pieces("a b c") == ["a ", "b ", "c"]


class Broken:
    """Streams ``shown`` then fails with ``error``, ``fails`` times; then answers."""

    def __init__(self, shown: str, error: Exception, fails: int = 1) -> None:
        self.shown, self.error, self.fails = shown, error, fails
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        raise AssertionError("a streamed call must not fall back to complete")

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        self.calls += 1
        if self.calls <= self.fails:
            if self.shown:
                on_text(self.shown)
            raise self.error
        on_text("fine")
        return ModelResponse(message=AssistantMessage(content="fine"))


def request() -> ModelRequest:
    return ModelRequest(messages=())


async def test_retrying_model_retries_a_stream_that_failed_before_any_text() -> None:
    inner = Broken("", ModelConnectionError("reset"), fails=2)
    shown: list[str] = []
    response = await RetryingModel(inner, FAST).stream(request(), shown.append)
    assert response.message.content == "fine"
    assert inner.calls == 3
    assert shown == ["fine"]


async def test_retrying_model_never_retries_a_stream_that_showed_text() -> None:
    inner = Broken("half an ans", ModelConnectionError("reset"))
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await RetryingModel(inner, FAST).stream(request(), shown.append)
    assert inner.calls == 1
    assert shown == ["half an ans"]
    assert caught.value.shown_chars == len("half an ans")
    assert "ModelConnectionError" in caught.value.reason
    assert isinstance(caught.value.__cause__, ModelConnectionError)
    assert not caught.value.retryable


@pytest.mark.parametrize(
    "error",
    [ModelHTTPError(500), ConnectionResetError("peer reset")],
    ids=["a model error", "an error of the model's own code"],
)
async def test_a_retry_policy_that_retries_everything_still_stops_after_text(
    error: Exception,
) -> None:
    inner = Broken("shown", error)
    policy = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0, retry_on=lambda e: True)
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await RetryingModel(inner, policy).stream(request(), shown.append)
    assert inner.calls == 1
    assert shown == ["shown"]  # once: no second attempt wrote it again
    assert caught.value.__cause__ is error


async def test_wrappers_pass_the_stream_on() -> None:
    import anyio

    shown: list[str] = []
    model = PricedModel(
        LimitedModel(TextToolModel(ScriptedModel(["two words"])), anyio.CapacityLimiter(1)),
        Price(input_per_mtok=1e6, output_per_mtok=0),
    )
    response = await call_model(model, request(), shown.append)
    assert shown == ["two ", "words"]
    assert response.usage.cost > 0


async def test_a_wrapper_that_adds_to_complete_alone_keeps_its_behaviour_when_streamed() -> None:
    class Shouting(WrapperModel):
        async def complete(self, request: ModelRequest) -> ModelResponse:
            response = await self.inner.complete(request)
            loud = (response.message.content or "").upper()
            return ModelResponse(message=AssistantMessage(content=loud))

    shown: list[str] = []
    response = await call_model(Shouting(ScriptedModel(["quiet"])), request(), shown.append)
    assert response.message.content == "QUIET"
    assert shown == []  # no deltas rather than deltas its behaviour never saw
    plain: list[str] = []
    await call_model(WrapperModel(ScriptedModel(["passed on"])), request(), plain.append)
    assert plain == ["passed ", "on"]


async def test_a_text_tool_model_answers_a_request_with_tools_whole() -> None:
    """Its text may be actions, not an answer: nothing of it is shown."""
    from runtime import ToolSchema

    inner = ScriptedModel(['```json\n{"tool": "look", "arguments": {}}\n```'])
    shown: list[str] = []
    with_tools = ModelRequest(messages=(), tools=(ToolSchema(name="look"),))
    response = await call_model(TextToolModel(inner), with_tools, shown.append)
    assert [c.name for c in response.message.tool_calls] == ["look"]
    assert shown == []


@tool
async def noop() -> str:
    """Do nothing."""
    return "nothing"


async def test_a_text_tool_models_answer_to_a_request_with_tools_is_shown_whole() -> None:
    """Read as an answer (no calls), the text of a turn answered whole is shown as one
    delta: a worker with tools on a text-protocol model shows its answer too."""
    inner = ScriptedModel(['```json\n{"tool": "noop", "arguments": {}}\n```', "It is 42."])
    ex = Executor(
        [Role(name="w", tools=("noop",))], TextToolModel(inner), tools=[noop], aggregator="concat"
    )
    seen: list[Event] = []
    await ex.run("t", subtasks=[("w", "ask")], on_event=[seen.append], text_deltas=True)
    shown = [(e.worker, e.turn, e.text) for e in seen if isinstance(e, TextDelta)]
    assert shown == [("s1", 2, "It is 42.")]


@tool(side_effects=True)
async def pay(to: str) -> str:
    """Pay someone."""
    return f"paid {to}"


async def test_a_resumed_run_streams_its_text_when_asked(tmp_path: Path) -> None:
    """``Executor.resume(..., text_deltas=True)`` shows what the run writes as it goes
    on, as ``run`` does (and ``session.resume``)."""
    payer = Role(name="payer", tools=("pay",), approvals=Approvals(tools=("pay",)))
    model = ScriptedModel([call("pay", {"to": "bob"}), "Paid bob in full."])
    ex = Executor([payer], model, tools=[pay], store=tmp_path / "runs.db", aggregator="concat")
    waiting = await ex.run("Pay bob", subtasks=[("payer", "pay bob")], run_id="r1")
    (asked,) = waiting.pending
    await ex.decide("r1", asked.call_id, approve=True)
    seen: list[Event] = []
    done = await ex.resume("r1", on_event=[seen.append], text_deltas=True)
    assert done.status == "ok"
    assert "".join(e.text for e in seen if isinstance(e, TextDelta)) == "Paid bob in full."
