"""The tool protocols on the real model (SmolLM2-135M on llama.cpp in the test
process, tests/support/llama.py), each with other features on at once, judged on what
Honeycomb promises, not on the model's wit. Outputs are short, the seed is fixed, the
server is the session's."""

from __future__ import annotations

import asyncio
import json

from pydantic import BaseModel

from honeycomb import Executor, Role, Worker, tool
from runtime import (
    AssistantMessage,
    Dispatcher,
    JsonToolModel,
    ModelRequest,
    TextToolModel,
    ToolMessage,
    ToolRegistry,
    ToolSchema,
    UserMessage,
)
from runtime.models.llama import LlamaModel
from runtime.models.llama_server import LlamaServer
from tests.support.llama import REAL_MODEL
from tests.support.weather_tools import get_weather
from workers import AgentLoop, Final, LoopSettings

pytestmark = REAL_MODEL

WEATHER = "tests.support.weather_tools:get_weather"


async def test_a_call_the_models_own_limit_cut_short_is_told_that_limit(
    llama_server: LlamaServer,
) -> None:
    """The JSON protocol's grammar makes the model write a call, which the max_tokens of
    its settings cuts off: the observation named the request's limit (4096 tokens),
    which the model never had."""
    model = LlamaModel(server=llama_server, settings={"max_tokens": 12, "temperature": 0.2})
    role = Role(name="met", instructions="Use get_weather for the city.", tools=(WEATHER,))
    result = await Worker(role.model_copy(update={"max_turns": 1}), JsonToolModel(model)).run(
        "What is the weather in Oslo?"
    )
    told = [m for m in result.transcript.messages if isinstance(m, ToolMessage)]
    assert told, result.transcript.messages
    assert "cut off at its output limit (12 tokens) while writing them" in told[0].content


class Pick(BaseModel):
    tool: str
    why: str


async def test_a_wrap_up_answer_held_to_the_schema_is_the_answer_through_the_text_protocol(
    llama_server: LlamaServer,
) -> None:
    """The wrap-up asks for the output schema as the response format, so the grammar
    makes the model write a Pick: its ``tool`` field was read as an action, which the
    wrap-up drops, and the worker failed with MaxTurnsExceeded."""
    model = LlamaModel(server=llama_server, settings={"max_tokens": 60, "temperature": 0.2})
    loop = AgentLoop(
        TextToolModel(model),
        Dispatcher(ToolRegistry([get_weather])),
        instructions="Say which tool fits the job, and why.",
        settings=LoopSettings(max_turns=1, output_type=Pick),
    )
    result = await loop.run("Which tool drives nails?")
    assert isinstance(result, Final), result
    assert isinstance(result.output, Pick)
    assert result.state.wrapped_up  # the answer the grammar held to the schema


async def test_several_calls_of_one_answer_to_a_side_effecting_tool_run_in_order_one_by_one(
    llama_server: LlamaServer,
) -> None:
    """The JSON protocol's ``calls`` (the model writes two in one answer with this seed):
    a side-effecting tool's calls run one at a time, in the order written, and each
    has one observation, in that order."""
    ran: list[tuple[str, str]] = []

    @tool(name="get_weather", side_effects=True)
    async def logged_weather(city: str) -> str:
        """The weather in a city today.

        Args:
            city: The city's name.
        """
        ran.append(("start", city))
        await asyncio.sleep(0.02)  # a call that overlapped another would start meanwhile
        ran.append(("end", city))
        return f"{city}: sunny"

    model = LlamaModel(
        server=llama_server, settings={"max_tokens": 120, "temperature": 0.7, "seed": 5}
    )
    role = Role(
        name="clerk",
        instructions="Record each note the user gives, one record call per note, all at once.",
        tools=("get_weather",),
        max_turns=1,
    )
    executor = Executor([role], JsonToolModel(model), tools=[logged_weather], aggregator="concat")
    result = await executor.run("t", subtasks=[("clerk", "Notes: 'buy milk', 'call Ann'.")])
    messages = result.subtasks["s1"].worker.transcript.messages
    calls = next(m.tool_calls for m in messages if isinstance(m, AssistantMessage))
    assert len(calls) >= 2, calls  # what this seed makes it write
    told = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in told] == [c.id for c in calls]
    cities = [json.loads(c.arguments)["city"] for c in calls]
    assert ran == [(edge, city) for city in cities for edge in ("start", "end")]


async def test_a_tool_whose_schema_names_another_document_is_called_through_the_json_protocol(
    llama_server: LlamaServer,
) -> None:
    """llama.cpp refused every turn that offered the tool (HTTP 400, 'unsupported $ref
    https://...'): the turn's schema kept the reference, which it cannot fetch."""
    tag = ToolSchema(
        name="tag",
        description="Tag a text.",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}, "label": {"$ref": "https://x.test/l.json"}},
            "required": ["text", "label"],
        },
    )
    model = JsonToolModel(LlamaModel(server=llama_server, settings={"temperature": 0.2}))
    request = ModelRequest(
        messages=(UserMessage(content="Tag 'hello'."),),
        tools=(tag,),
        tool_choice="required",
        max_output_tokens=24,
    )
    answer = await model.complete(request)
    assert [c.name for c in answer.message.tool_calls] == ["tag"]
