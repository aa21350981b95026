"""A run recorded on a model behind HTTP (the local OpenAI-compatible server), then
replayed from its cassette with the server asked nothing: parallel workers, tool
calls, streamed text; and a replay that asks what was not recorded."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from honeycomb import Executor, Policy, Role, RunResult, Subtask, ToolContext, tool
from honeycomb.errors import CassetteMismatch, RunFailed
from honeycomb.events import ModelCallFinished, TextDelta
from honeycomb.models import Cassette, Model, OpenAIModel, cassette, cassette_case
from honeycomb.testing import FunctionModel, call
from runtime import (
    AssistantMessage,
    Event,
    ModelRequest,
    ModelResponse,
    ToolCall,
    ToolMessage,
)
from runtime.errors import ModelHTTPError
from runtime.limits.budget import timed_out
from tests.support.openai_server import Behaviour, OpenAIServer, RecordedRequest, text, tool_calls

pytestmark = pytest.mark.timeout(60)


@tool
def lookup(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


FINDER = Role(name="finder", description="Looks things up.", tools=["lookup"])
PLAN = [
    Subtask(id="s1", role="finder", instruction="Lisbon"),
    Subtask(id="s2", role="finder", instruction="Porto"),
    Subtask(id="s3", role="finder", instruction="Porto"),  # asks what s2 asks
]


def responder() -> object:
    """Each worker calls ``lookup`` for its city, then answers with what it found and
    a number that counts the answers: two workers asking the same thing are answered
    differently, in whatever order their calls arrive."""
    answers = itertools.count(1)

    def answer(request: RecordedRequest) -> Behaviour:
        last = request.body["messages"][-1]
        if last["role"] == "tool":
            return text(f"{last['content']} (answer {next(answers)})")
        city = last["content"].rsplit("\n", 1)[-1].strip()
        return tool_calls(("lookup", {"city": city}))

    return answer


async def run(models: Model) -> tuple[RunResult, list[Event]]:
    events: list[Event] = []
    executor = Executor(
        [FINDER],
        models,
        tools=[lookup],
        aggregator="concat",
        policy=Policy(max_workers=3),
    )
    result = await executor.run(
        "weather", subtasks=PLAN, on_event=[events.append], text_deltas=True
    )
    return result, events


def answers(result: RunResult) -> dict[str, str]:
    return {name: str(sub.output) for name, sub in result.subtasks.items()}


def streamed(events: list[Event]) -> dict[str, str]:
    pieces: dict[str, str] = {}
    for event in events:
        if isinstance(event, TextDelta) and event.worker is not None:
            pieces[event.worker] = pieces.get(event.worker, "") + event.text
    return pieces


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAIServer]:
    monkeypatch.chdir(tmp_path)  # where the cassette goes
    with OpenAIServer(responder()) as serving:  # type: ignore[arg-type]
        yield serving


def model_of(server: OpenAIServer) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.base_url, api_key="sk-test")


async def test_a_replayed_run_answers_as_recorded_with_no_http(server: OpenAIServer) -> None:
    tape = Path("weather.cassette.jsonl")
    recorded, recorded_events = await run(cassette(model_of(server), record=tape))
    asked = len(server.requests)
    replayed, replayed_events = await run(cassette(model_of(server), replay=tape))
    assert len(server.requests) == asked == 6  # three workers, two calls each

    assert recorded.status == replayed.status == "ok"
    assert answers(replayed) == answers(recorded)
    # s2 and s3 asked the same things; each got again what it got when recorded.
    assert answers(recorded)["s2"] != answers(recorded)["s3"]
    assert replayed.usage == recorded.usage
    assert streamed(replayed_events) == streamed(recorded_events) != {}
    looked = [
        m.content
        for sub in replayed.subtasks.values()
        if sub.worker is not None
        for m in sub.worker.transcript.messages
        if isinstance(m, ToolMessage)
    ]
    assert sorted(looked) == ["sunny in Lisbon", "sunny in Porto", "sunny in Porto"]


async def test_a_replayed_call_that_was_not_recorded_names_the_case_worker_and_difference(
    server: OpenAIServer,
) -> None:
    tape = Path("weather.cassette.jsonl")
    with cassette_case("iberia"):
        await run(cassette(model_of(server), record=tape))
    changed = [Subtask(id="s1", role="finder", instruction="Madrid")]
    executor = Executor([FINDER], cassette(model_of(server), replay=tape), tools=[lookup])
    events: list[Event] = []
    with cassette_case("iberia"), pytest.raises(RunFailed):
        await executor.run("weather", subtasks=changed, on_event=[events.append])
    (error,) = [e.error for e in events if isinstance(e, ModelCallFinished) and e.error]
    assert error.startswith("CassetteMismatch: ")
    assert "(case 'iberia', worker 's1')" in error
    # The nearest recorded call is s1's own first one: its task is what changed.
    assert "message 2 (user), content: at character" in error
    assert "recorded 'Lisbon', asked 'Madrid'" in error
    assert {call.case for call in Cassette(tape).calls} == {"iberia"}


async def test_the_mismatch_error_says_what_differs_first() -> None:
    error = CassetteMismatch("t.jsonl", "gpt", "tools: recorded ['a'], asked ['b']", worker="s1")
    assert str(error) == (
        "t.jsonl: a call of model 'gpt' (worker 's1') that the cassette did not record: "
        "tools: recorded ['a'], asked ['b']; record it again if the change is meant"
    )
    assert not error.retryable


@tool
def stamp(context: ToolContext) -> str:
    """Says which run asks."""
    return f"stamped by run {context.run_id}"


def stamping(request: ModelRequest) -> str | ToolCall:
    """Calls ``stamp``, then answers with what it said."""
    last = request.messages[-1]
    return f"done: {last.content}" if isinstance(last, ToolMessage) else call("stamp")


async def test_a_replayed_run_is_answered_as_recorded_where_its_texts_name_its_run(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "stamp.jsonl"
    stamper = Role(name="stamper", tools=["stamp"])
    plan = [("stamper", "stamp it")]

    async def one(models: Model) -> RunResult:
        return await Executor([stamper], models, tools=[stamp]).run("stamp", subtasks=plan)

    recorded = await one(cassette(FunctionModel(stamping), record=tape))
    assert recorded.answer_text.endswith(f"\ndone: stamped by run {recorded.run_id}")
    assert recorded.run_id not in tape.read_text()  # written <run>
    # Another run, of another id: asked what was recorded, answered naming its own.
    replayed = await one(cassette(FunctionModel(stamping), replay=tape))
    assert replayed.answer_text.endswith(f"\ndone: stamped by run {replayed.run_id}")
    assert replayed.usage == recorded.usage


def failing_on_porto(error: Exception | None = None) -> FunctionModel:
    """Answers each worker, merges as the aggregator, and fails Porto's call once (an
    endpoint down after its retries; or with ``error``, a model of one's own's)."""
    failed: list[str] = []

    def answer(request: ModelRequest) -> str:
        system, text = request.messages[0].content or "", request.messages[1].content or ""
        if "Merges" in system:
            return "merged: " + " ".join(text.split()[-12:])
        if "Porto" in text and not failed:
            failed.append(text)
            raise error or ModelHTTPError(503, "overloaded", retry_after=2.0, model="gpt-x")
        return f"about {text.split()[-1]}"

    return FunctionModel(answer)


async def test_a_run_whose_worker_failed_on_its_model_replays_failing_alike(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "failed.jsonl"

    async def one(models: Model) -> RunResult:
        roles = [Role(name="writer"), Role(name="merger", description="Merges")]
        executor = Executor(
            roles, models, aggregator="merger", policy=Policy(failure="best_effort")
        )
        return await executor.run("trip", subtasks=[("writer", "Lisbon"), ("writer", "Porto")])

    recorded = await one(cassette(failing_on_porto(), record=tape))
    replayed = await one(cassette(failing_on_porto(), replay=tape))
    # The merger was told of s2's failure as when recorded: its call was answered.
    assert "FAILED ModelHTTPError: HTTP 503 from model 'gpt-x': overloaded" in (
        replayed.answer_text
    )
    assert replayed.answer_text == recorded.answer_text
    assert replayed.usage == recorded.usage
    error = replayed.subtasks["s2"].error
    assert error is not None
    assert error.type == "ModelHTTPError"
    failure = next(call.error for call in Cassette(tape).calls if call.error is not None)
    assert failure.fields["retry_after"] == 2.0


async def test_a_model_of_ones_own_that_raised_its_own_error_replays_failing_alike(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "failed.jsonl"
    refused = ConnectionError("the endpoint refused the connection")

    async def one(models: Model) -> RunResult:
        roles = [Role(name="writer"), Role(name="merger", description="Merges")]
        executor = Executor(
            roles, models, aggregator="merger", policy=Policy(failure="best_effort")
        )
        return await executor.run("trip", subtasks=[("writer", "Lisbon"), ("writer", "Porto")])

    recorded = await one(cassette(failing_on_porto(refused), record=tape))
    replayed = await one(cassette(failing_on_porto(), replay=tape))
    # Named as the model it is, not its recording: the merger is told alike replayed.
    told = "FAILED ModelCallError: model FunctionModel('answer') raised ConnectionError: the"
    assert told in recorded.answer_text
    assert replayed.answer_text == recorded.answer_text
    error = replayed.subtasks["s2"].error
    assert error is not None
    assert error.type == "ModelCallError"


class TimingOut:
    """A model whose endpoint did not answer its first attempt of each call in time
    (its call counts the prompt then) and answered the second."""

    tells_attempts = True

    async def complete(self, request: ModelRequest) -> ModelResponse:
        timed_out()
        return ModelResponse(message=AssistantMessage(content="answered at last"))


async def test_a_replayed_call_counts_the_attempts_that_timed_out_when_recorded(
    tmp_path: Path,
) -> None:
    tape = tmp_path / "slow.jsonl"

    async def one(models: Model) -> RunResult:
        executor = Executor([Role(name="writer")], models, aggregator="concat")
        return await executor.run("trip", subtasks=[("writer", "Lisbon")])

    recorded = await one(cassette(TimingOut(), record=tape))
    replayed = await one(cassette(TimingOut(), replay=tape))
    assert recorded.usage.input_tokens > 0  # only the prompt of the attempt cut off
    assert replayed.usage == recorded.usage
    assert [call.timeouts for call in Cassette(tape).calls] == [1]
