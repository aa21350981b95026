"""One Executor on one ``OpenAIModel``, run by consecutive ``asyncio.run()`` calls (a
script's or a worker process's way of running it), over real HTTP to the local test
server; and what a run records of the retries its model absorbed."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from honeycomb import Executor, Policy, Role, tool
from honeycomb.trace.spans import SpanRecorder
from runtime import Model, OpenAIModel, OpenAIResponsesModel, RetryPolicy
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    RecordedRequest,
    Reply,
    error,
    text,
    tool_calls,
)

pytestmark = pytest.mark.timeout(60)


@tool
async def lookup(query: str) -> str:
    """Look something up."""
    return f"found {query}"


def agent(request: RecordedRequest) -> Behaviour:
    """One lookup, then ``done: <task>``."""
    messages = request.body["messages"]
    if any(m["role"] == "tool" for m in messages):
        return text(f"done: {messages[1]['content']}")
    return tool_calls(("lookup", {"query": "x"}))


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(agent) as server:
        yield server


def executor(model: Model) -> Executor:
    return Executor(
        [Role(name="researcher", tools=("lookup",))],
        model,
        tools=[lookup],
        aggregator="concat",
        policy=Policy(max_workers=4, model_concurrency=2),
    )


def test_one_executor_serves_consecutive_event_loops(server: OpenAIServer) -> None:
    retry = RetryPolicy(attempts=1)
    model = OpenAIModel("gpt-test", base_url=server.base_url, retry=retry, max_concurrency=2)
    runs = executor(model)
    plan = [("researcher", f"part {i}") for i in range(4)]

    results = [asyncio.run(runs.run("research", subtasks=plan)) for _ in range(3)]

    for result in results:
        assert result.status == "ok", [str(f.error) for f in result.failures]
        assert [s.text for s in result.subtasks.values()] == [f"done: part {i}" for i in range(4)]
    assert len(server.requests) == 3 * 4 * 2


async def test_a_runs_spans_carry_the_attempts_its_model_calls_took(
    server: OpenAIServer,
) -> None:
    server.enqueue(error(429, retry_after=0.05), error(503))
    retry = RetryPolicy(attempts=4, initial_wait_s=0.01, jitter_s=0)
    model = OpenAIModel("gpt-test", base_url=server.base_url, retry=retry)
    recorder = SpanRecorder()

    result = await executor(model).run(
        "research", subtasks=[("researcher", "a")], on_event=[recorder]
    )
    await model.client.close()

    assert result.status == "ok"
    calls = [s for s in recorder.spans if s.kind == "model_call"]
    assert [(s.turn, s.attempts) for s in calls] == [(1, 3), (2, 1)]


def strict_numbering_from_zero(request: RecordedRequest) -> Behaviour:
    """A server that names the calls of every turn from ``call_0``, as some Gemini and
    Ollama bridges do, and refuses a conversation that repeats an id, as strict ones do."""
    messages = request.body["messages"]
    ids = [c["id"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls", [])]
    if len(ids) != len(set(ids)):
        return error(400, f"duplicate tool call ids {ids}")
    turns = sum(m["role"] == "assistant" for m in messages)
    if turns < 2:
        return tool_calls(("lookup", {"query": f"q{turns}"}))  # its id: call_0, every turn
    return text("done")


async def test_call_ids_a_server_repeats_every_turn_go_back_distinct() -> None:
    with OpenAIServer(strict_numbering_from_zero) as server:
        model = OpenAIModel("gpt-test", base_url=server.base_url, retry=RetryPolicy(attempts=1))
        result = await executor(model).run("research", subtasks=[("researcher", "a")])
        await model.client.close()

    assert result.status == "ok", [str(f.error) for f in result.failures]
    last = server.requests[-1].body["messages"]
    sent = [c["id"] for m in last if m["role"] == "assistant" for c in m["tool_calls"]]
    assert sent == ["call_0", "call_0_t2"]
    assert [m["tool_call_id"] for m in last if m["role"] == "tool"] == sent


def responses_agent(request: RecordedRequest) -> Behaviour:
    """The Responses API's ``agent``: one lookup (after thinking), then ``done: <task>``."""
    items = request.body["input"]
    if any(i.get("type") == "function_call_output" for i in items):
        assert items[2]["type"] == "reasoning"  # passed back, before its call
        return text(f"done: {items[1]['content']}")
    return Reply(reasoning="look it up", tool_calls=(("call_0", "lookup", '{"query": "x"}'),))


async def test_an_executor_runs_its_workers_on_the_responses_api() -> None:
    with OpenAIServer(responses_agent) as server:
        model = OpenAIResponsesModel(
            "gpt-test", base_url=server.base_url, retry=RetryPolicy(attempts=1)
        )
        plan = [("researcher", f"part {i}") for i in range(3)]
        result = await executor(model).run("research", subtasks=plan)
        await model.client.close()

    assert result.status == "ok", [str(f.error) for f in result.failures]
    assert [s.text for s in result.subtasks.values()] == [f"done: part {i}" for i in range(3)]
    assert {r.path for r in server.requests} == {"/v1/responses"}
    assert len(server.requests) == 3 * 2
