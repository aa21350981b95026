"""Streaming meets output guards: the text of an answer a guard may still refuse is
held until its guards pass, so no listener (an ``on_event`` handler, a ``RunStream``,
the example service's clients) ever sees refused text; an answer that passes is
delivered whole, in its pieces; an answer nobody guards streams as it is written."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import httpx
import pytest

from examples.service import create_app
from honeycomb import (
    AssistantMessage,
    Event,
    Executor,
    GuardCheck,
    GuardrailTripped,
    Guards,
    ModelRequest,
    ModelResponse,
    RetryPolicy,
    Role,
    RunFailed,
    RunStream,
    SubtaskResult,
)
from honeycomb.errors import ModelHTTPError
from honeycomb.events import ModelCallFinished, RunFinished, TextDelta
from honeycomb.models import RetryingModel
from honeycomb.run.aggregator import AggregatorLike
from honeycomb.store import RunStore
from honeycomb.testing import FunctionModel, ScriptedModel
from honeycomb.trace.timeline import build_timeline
from runtime.model import TextSink
from runtime.testing import call
from tests.support.asgi_server import ThreadedServer
from tests.support.model_requests import role_of
from tests.support.role_tools import Summary

SECRET = "The password is hunter2."
REFUSAL = "I cannot share that."


def no_secrets(check: GuardCheck) -> str | None:
    return "it mentions a password" if "password" in check.text.lower() else None


def deltas(events: list[Event], worker: str | None = None) -> str:
    return "".join(
        e.text for e in events if isinstance(e, TextDelta) and worker in (None, e.worker)
    )


def guarded_writer() -> Executor:
    """A writer whose output guard refuses its first answer; it answers again."""
    return Executor(
        [Role(name="writer", guards=Guards(output=(no_secrets,)))],
        ScriptedModel([SECRET, REFUSAL]),
        planner=lambda task: [("writer", task)],
        aggregator="concat",
    )


async def test_a_worker_guard_refusal_never_reaches_an_event_handler() -> None:
    seen: list[Event] = []
    result = await guarded_writer().run(
        "What is the password?", on_event=[seen.append], text_deltas=True
    )
    assert result.status == "ok"
    assert result.subtasks["s1"].text == REFUSAL
    written = deltas(seen, "s1")
    assert "hunter2" not in written
    assert written == REFUSAL  # the retry's text, accepted, is delivered once


async def test_a_worker_guard_refusal_never_reaches_a_run_stream() -> None:
    seen: list[Event] = []
    async with guarded_writer().stream("What is the password?") as events:
        async for event in events:
            seen.append(event)
    assert events.result is not None
    assert events.result.status == "ok"
    assert deltas(seen) == REFUSAL


def leaky_aggregator(*, guarded: bool) -> Executor:
    """Workers answer safely; the aggregator writes the secret; the run's output
    guard (a tripwire) refuses it, when ``guarded``."""

    def script(key: str) -> list[object]:
        return [SECRET] if key.endswith("/aggregator") else ["a safe finding"]

    return Executor(
        [Role(name="researcher"), Role(name="aggregator")],
        ScriptedModel(script),  # type: ignore[arg-type]
        guards=Guards(output=(no_secrets,)) if guarded else None,
    )


async def test_a_run_output_tripwire_lets_no_delta_of_the_refused_answer_out() -> None:
    seen: list[Event] = []
    with pytest.raises(GuardrailTripped):
        await leaky_aggregator(guarded=True).run(
            "t", subtasks=[("researcher", "look")], on_event=[seen.append], text_deltas=True
        )
    assert "hunter2" not in deltas(seen)
    assert deltas(seen, "s1") == "a safe finding"  # a worker's accepted answer is its own
    streamed: list[Event] = []
    stream = leaky_aggregator(guarded=True).stream("t", subtasks=[("researcher", "look")])
    with pytest.raises(GuardrailTripped):
        await read_all(stream, streamed)
    assert "hunter2" not in deltas(streamed)
    assert isinstance(streamed[-1], RunFinished)
    assert streamed[-1].status == "failed"


def the_workers_answer(task: str, results: Sequence[SubtaskResult]) -> str:
    return results[0].text


@pytest.mark.parametrize("aggregator", ["concat", the_workers_answer], ids=["concat", "function"])
async def test_a_workers_text_that_is_the_refused_answer_never_reaches_a_listener(
    aggregator: AggregatorLike,
) -> None:
    """With ``concat`` or a function, the answer is made of the workers' text: the run's
    guards check it, so it is held from the start, and a tripwire drops it."""

    def executor(guarded: bool) -> Executor:
        return Executor(
            [Role(name="researcher")],
            ScriptedModel([SECRET]),
            aggregator=aggregator,
            guards=Guards(output=(no_secrets,)) if guarded else None,
        )

    seen: list[Event] = []
    with pytest.raises(GuardrailTripped):
        await executor(True).run(
            "t", subtasks=[("researcher", "look")], on_event=[seen.append], text_deltas=True
        )
    assert "hunter2" not in deltas(seen)
    streamed: list[Event] = []
    with pytest.raises(GuardrailTripped):
        await read_all(executor(True).stream("t", subtasks=[("researcher", "look")]), streamed)
    assert "hunter2" not in deltas(streamed)
    # Unguarded, the same worker's text streams: the hold is the guard's doing.
    await executor(False).run(
        "t", subtasks=[("researcher", "look")], on_event=[seen.append], text_deltas=True
    )
    assert deltas(seen, "s1") == SECRET


async def test_workers_text_the_run_s_guards_pass_is_delivered_once_after_them() -> None:
    checked = 0

    def passes(check: GuardCheck) -> str | None:
        nonlocal checked
        checked += 1
        return None

    seen: list[Event] = []
    executor = Executor(
        [Role(name="researcher")],
        ScriptedModel(lambda key: [f"finding of {key.rsplit('/', 1)[-1]}"]),
        aggregator="concat",
        guards=Guards(output=(passes,)),
    )

    def before_the_guard(event: Event) -> None:
        if isinstance(event, TextDelta):
            assert checked == 1, "a worker's text came before the run's guards passed it"
        seen.append(event)

    subtasks = [("researcher", "a"), ("researcher", "b")]
    result = await executor.run("t", subtasks=subtasks, on_event=[before_the_guard],
                                text_deltas=True)  # fmt: skip
    assert result.status == "ok"
    assert deltas(seen, "s1") == "finding of s1"
    assert deltas(seen, "s2") == "finding of s2"


async def read_all(stream: AbstractAsyncContextManager[RunStream], into: list[Event]) -> None:
    async with stream as events:
        async for event in events:
            into.append(event)


async def test_an_answer_its_guards_pass_is_delivered_whole() -> None:
    def polite(check: GuardCheck) -> str | None:
        return None

    executor = Executor(
        [Role(name="researcher", guards=Guards(output=(polite,))), Role(name="aggregator")],
        ScriptedModel(lambda key: ["The merged answer, word by word." if "agg" in key else "ok"]),
        guards=Guards(output=(polite,)),
    )
    seen: list[Event] = []
    result = await executor.run(
        "t", subtasks=[("researcher", "look")], on_event=[seen.append], text_deltas=True
    )
    assert deltas(seen, "aggregator") == result.answer_text == "The merged answer, word by word."
    assert deltas(seen, "s1") == "ok"
    # In one piece: nobody could read held text as it was written, so it was not streamed.
    assert sum(isinstance(e, TextDelta) and e.worker == "aggregator" for e in seen) == 1


class BreaksOffOnce:
    """A model whose first answer to ``role`` breaks off with a 503 after some text:
    mid-stream when streamed, at once when not. It answers anyone else at once."""

    name = "breaks-off-once"

    def __init__(self, role: str) -> None:
        self.role = role
        self.attempts = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.stream(request, lambda text: None)

    async def stream(self, request: ModelRequest, on_text: TextSink) -> ModelResponse:
        if role_of(request) != self.role:
            return ModelResponse(message=AssistantMessage(content="ok"))
        self.attempts += 1
        on_text("alpha ")
        if self.attempts == 1:
            raise ModelHTTPError(503, "overloaded")
        on_text("beta gamma")
        return ModelResponse(message=AssistantMessage(content="alpha beta gamma"))


@pytest.mark.parametrize("held_by", ["the role's guards", "the run's guards"])
async def test_a_held_answer_whose_model_breaks_off_is_retried(held_by: str) -> None:
    """Held text reaches nobody as it is written: a call whose answer is held is
    retried after an error as any call is (a streamed one that had shown text would
    fail with StreamInterrupted), and its listener gets the answer once."""

    def polite(check: GuardCheck) -> str | None:
        return None

    guards = Guards(output=(polite,))
    role_held = held_by == "the role's guards"
    writer = "w" if role_held else "aggregator"
    flaky = BreaksOffOnce(writer)
    model = RetryingModel(flaky, RetryPolicy(attempts=2, initial_wait_s=0.0, jitter_s=0.0))
    roles = [Role(name="w", guards=guards if role_held else None), Role(name="aggregator")]
    executor = Executor(roles, model, guards=None if role_held else guards)
    seen: list[Event] = []
    result = await executor.run(
        "t", subtasks=[("w", "x")], on_event=[seen.append], text_deltas=True
    )
    assert result.status == "ok"
    assert flaky.attempts == 2
    assert deltas(seen, "s1" if role_held else writer) == "alpha beta gamma"


async def test_an_unguarded_answer_still_streams_before_its_call_finishes() -> None:
    seen: list[Event] = []
    executor = leaky_aggregator(guarded=False)
    await executor.run("t", subtasks=[("researcher", "look")], on_event=[seen.append],
                       text_deltas=True)  # fmt: skip
    first = next(i for i, e in enumerate(seen) if isinstance(e, TextDelta))
    finished = next(
        i for i, e in enumerate(seen) if isinstance(e, ModelCallFinished) and e.worker == "s1"
    )
    assert first < finished


async def sse(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    kind = ""
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: "):
            yield kind, json.loads(line[len("data: ") :])


async def test_the_service_sends_its_clients_no_refused_text() -> None:
    with ThreadedServer(create_app(guarded_writer()), name="service") as server:
        async with (
            httpx.AsyncClient(timeout=30) as client,
            client.stream("POST", f"{server.url}/stream", json={"task": "t"}) as response,
        ):
            seen = [event async for event in sse(response)]
    written = "".join(data["text"] for kind, data in seen if kind == "model_call.text")
    assert "hunter2" not in written
    assert written == REFUSAL
    assert seen[-1][0] == "result"
    assert seen[-1][1]["answer"].endswith(REFUSAL)


async def test_text_beside_tool_calls_is_shown_and_a_refused_last_try_is_not() -> None:
    answers = [AssistantMessage(content="Looking it up. ", tool_calls=(call("nothing"),)), SECRET]
    executor = Executor(
        [Role(name="writer", output_retries=0, guards=Guards(output=(no_secrets,)))],
        ScriptedModel(answers),  # type: ignore[arg-type]
        planner=lambda task: [("writer", task)],
        aggregator="concat",
    )
    seen: list[Event] = []
    with pytest.raises(RunFailed):  # its only subtask failed
        await executor.run("t", on_event=[seen.append], text_deltas=True)
    assert deltas(seen) == "Looking it up. "


def facts_and_lead(request: ModelRequest) -> str | AssistantMessage:
    """A fact worker's answer; a lead's call to the facts hive, then its answer."""
    if "fact worker" in (request.messages[0].content or ""):
        return "a fact"
    if any(m.role == "tool" for m in request.messages):
        return "done"
    return AssistantMessage(tool_calls=(call("facts", {"instruction": "find one"}),))


async def test_a_hive_tools_calls_are_in_the_trace_of_a_run_whose_answer_is_held(
    tmp_path: Path,
) -> None:
    """The run's output guards check an answer made of its workers' (concat): their
    text is held in front of the run's listeners, and the hive a worker called as a
    tool found no recorder of the run's spans behind the hold: its model call was in
    the result's usage and missing from the stored trace."""
    model = FunctionModel(facts_and_lead)
    facts = Executor(
        [Role(name="fact")], model, planner=lambda t: [("fact", t)], aggregator="concat"
    )
    executor = Executor(
        [Role(name="lead", tools=("facts",))], model, tools=[facts.as_tool("facts")],
        aggregator="concat", store=tmp_path / "runs.db", guards=Guards(output=(no_secrets,)),
    )  # fmt: skip
    async with executor.stream("t", subtasks=[("lead", "go")], run_id="r1") as events:
        written = deltas([event async for event in events])
    assert events.result is not None
    assert written == "done"  # held, then passed
    timeline = build_timeline(RunStore(tmp_path / "runs.db").spans("r1"))
    assert timeline.model_calls == events.result.usage.model_calls == 3  # lead x2, fact


SUMMARY = '{"title": "t", "points": ["a"]}'


def refused_then_summary(writer: str) -> FunctionModel:
    """``writer``'s first answer fails the ``Summary`` schema and its second matches it;
    the other roles answer plain text."""

    def answer(request: ModelRequest) -> str:
        if not role_of(request).startswith(writer):
            return "a finding"
        told = any(isinstance(m, AssistantMessage) for m in request.messages)
        return SUMMARY if told else 'REFUSED {"title": 3}'

    return FunctionModel(answer)


@pytest.mark.parametrize("run_guards", [False, True], ids=["alone", "with the run's guards"])
@pytest.mark.parametrize("checked_by", ["output_schema", "output_type"])
async def test_an_answer_its_schema_refuses_never_reaches_a_listener(
    checked_by: str, run_guards: bool
) -> None:
    """A role's ``output_schema`` (its worker's text made into the answer by ``concat``)
    or the run's ``output_type`` (the aggregator's answer) refuses the first answer: the
    model is told and answers again, and the deltas are the accepted answer's alone,
    whether or not the run's output guards hold the text too."""

    def passes(check: GuardCheck) -> str | None:
        return None

    in_role = checked_by == "output_schema"
    schema = "tests.support.role_tools:Summary" if in_role else None
    executor = Executor(
        [Role(name="w", output_schema=schema), Role(name="aggregator")],
        refused_then_summary("w" if in_role else "aggregator"),
        aggregator="concat" if in_role else "aggregator",
        output_type=None if in_role else Summary,
        guards=Guards(output=(passes,)) if run_guards else None,
    )
    async with executor.stream("t", subtasks=[("w", "sum up")]) as events:
        seen = [event async for event in events]
    assert events.result is not None
    assert events.result.status == "ok"
    assert "REFUSED" not in deltas(seen)
    assert deltas(seen, "s1" if in_role else "aggregator") == SUMMARY
    if not in_role:  # the text the model wrote, of which the answer is made
        assert Summary.model_validate_json(deltas(seen, "aggregator")) == events.result.answer
