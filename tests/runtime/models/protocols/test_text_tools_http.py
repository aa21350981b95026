"""``TextToolModel`` over real HTTP: the real ``openai`` client against the local
server playing a model without function calling, which refuses any request carrying
``tools`` (as Ollama and llama.cpp do for such a model)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import (
    Dispatcher,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    TextToolModel,
    ToolRegistry,
    ToolSchema,
    UserMessage,
    tool,
)
from tests.runtime.models.protocols.test_text_tools import Verdict, block, fetch, record
from tests.support.concurrency import Overlap, Rendezvous
from tests.support.openai_server import OpenAIServer
from tests.support.tool_less import NO_TOOLS, scripted, tool_less
from workers import AgentLoop, Final, LoopSettings

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


@pytest.fixture
def server(openai_server: OpenAIServer) -> OpenAIServer:
    """The shared server, refusing tools; each test says what it answers."""
    return openai_server


def model_on(server: OpenAIServer) -> OpenAIModel:
    return OpenAIModel("llama3.1:8b", base_url=server.base_url, retry=RetryPolicy(attempts=1))


def bodies(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.requests]


async def test_the_server_refuses_tools_so_a_native_call_fails_and_a_text_one_does_not(
    server: OpenAIServer,
) -> None:
    from runtime import ModelHTTPError

    server.default = tool_less(scripted(block("get_weather", city="Paris")))
    native = model_on(server)
    request = ModelRequest(messages=(UserMessage(content="Weather in Paris?"),), tools=(WEATHER,))
    with pytest.raises(ModelHTTPError, match=NO_TOOLS):
        await native.complete(request)
    response = await TextToolModel(native).complete(request)
    await native.client.close()
    (call,) = response.message.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("get_weather", {"city": "Paris"})
    refused, body = bodies(server)
    assert "tools" in refused
    assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)
    assert body["messages"][0]["role"] == "system"
    assert '"name": "get_weather"' in body["messages"][0]["content"]


async def test_a_loop_runs_parallel_and_serial_actions_over_http(server: OpenAIServer) -> None:
    fetching, meet = Overlap(), Rendezvous(2)  # one after the other, they never meet

    @tool(name="fetch")
    async def meeting_fetch(key: str) -> str:
        """Fetch a key (parallel-safe)."""
        async with fetching:
            await meet.meet()
        return f"value-of-{key}"

    reply = "I need three things.\n" + "\n".join(
        [block("fetch", key="a"), block("fetch", key="b"), block("record", note="n1")]
    )
    server.default = tool_less(scripted(reply, '```json\n{"city": "Paris", "warm": true}\n```'))
    model = model_on(server)
    loop = AgentLoop(
        TextToolModel(model),
        Dispatcher(ToolRegistry([meeting_fetch, record])),
        instructions="You are a test worker.",
        settings=LoopSettings(output_type=Verdict),
        worker="w1",
    )
    result = await loop.run("Is Paris warm?")
    await model.client.close()
    assert isinstance(result, Final), result
    assert result.output == Verdict(city="Paris", warm=True)
    assert fetching.peak == 2  # the fetches were in at once
    first, second = bodies(server)
    for body in (first, second):
        assert "tools" not in body
        assert {m["role"] for m in body["messages"]} <= {"system", "user", "assistant"}
    assert "response_format" not in first  # the schema is in the instructions
    assistant, observations = second["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert assistant["content"].startswith("I need three things.\n\n```json\n")
    assert observations["content"].split("\n\n") == [
        "Observation for call_1 (fetch): value-of-a",
        "Observation for call_2 (fetch): value-of-b",
        "Observation for call_3 (record): recorded n1",
    ]


async def test_unknown_tools_and_bad_json_from_the_server_are_error_observations(
    server: OpenAIServer,
) -> None:
    server.default = tool_less(
        scripted(
            block("teleport", to="Mars")
            + '\n```json\n{"tool": "fetch", "arguments": {"key": }}\n```',
            "gave up",
        )
    )
    model = model_on(server)
    loop = AgentLoop(
        TextToolModel(model), Dispatcher(ToolRegistry([fetch])), instructions="t", worker="w1"
    )
    result = await loop.run("t")
    await model.client.close()
    assert isinstance(result, Final)
    assert result.output == "gave up"
    observed = bodies(server)[1]["messages"][-1]["content"].split("\n\n")
    assert observed[0].startswith("Observation for call_1 (teleport, error): Error: unknown tool")
    assert observed[1].startswith("Observation for call_2 (fetch, error): ")
    assert "not valid JSON" in observed[1]
