"""``JsonToolModel``: the schema each turn asks for (a ``oneOf`` of one object per tool,
several calls, the answer; narrowed by ``tool_choice``), what the inner model is sent
(no tools; the catalogue and the conversation as text), and what its replies become
(tool calls the loop runs as with function calling, with the loop's handling of
anything malformed), on the scripted and function models."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    Dispatcher,
    JsonToolModel,
    ModelRequest,
    ModelResponse,
    SystemMessage,
    ToolMessage,
    ToolRegistry,
    ToolSchema,
    UserMessage,
    tool,
)
from runtime.models.protocols.json_wire import SCHEMA_NAME, turn_schema
from runtime.testing import FunctionModel, ScriptedModel
from workers import AgentLoop, Final, LoopSettings

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSchema(name="now", description="The time.", parameters={"type": "object"})
ASK = (UserMessage(content="Weather in Oslo?"),)


def valid(schema: dict[str, Any], value: Any) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def test_a_turns_schema_is_one_object_per_tool_several_calls_or_the_answer() -> None:
    schema = turn_schema(ModelRequest(messages=ASK, tools=(WEATHER, CLOCK)))
    assert len(schema["oneOf"]) == 4  # each tool, the calls, the answer
    call = {"tool": "get_weather", "arguments": {"city": "Oslo"}}
    assert valid(schema, call)
    assert valid(schema, {"tool": "now", "arguments": {}})
    assert valid(schema, {"calls": [call, {"tool": "now", "arguments": {}}]})
    assert valid(schema, {"answer": "Snow."})
    assert not valid(schema, {"tool": "get_forecast", "arguments": {"city": "Oslo"}})
    assert not valid(schema, {"tool": "get_weather", "arguments": {"city": 3}})
    assert not valid(schema, {"tool": "get_weather", "arguments": {}})  # city is required
    assert not valid(schema, {"tool": "get_weather", "arguments": {"city": "Oslo"}, "x": 1})
    assert not valid(schema, {"calls": []})
    assert not valid(schema, "Snow.")
    assert [o.get("$ref") for o in schema["oneOf"][:2]] == ["#/$defs/call_0", "#/$defs/call_1"]
    assert schema["$defs"]["call_0"]["properties"]["tool"] == {"const": "get_weather"}
    assert schema["$defs"]["call_0"]["properties"]["arguments"] == WEATHER.parameters


@pytest.mark.parametrize(
    ("choice", "parallel", "allowed"),
    [
        ("auto", True, {"get_weather", "now", "calls", "answer"}),
        ("auto", False, {"get_weather", "now", "answer"}),
        ("required", True, {"get_weather", "now", "calls"}),
        ("now", False, {"now"}),
        ("none", True, {"answer"}),
    ],
)
def test_tool_choice_narrows_the_schema(choice: str, parallel: bool, allowed: set[str]) -> None:
    request = ModelRequest(
        messages=ASK, tools=(WEATHER, CLOCK), tool_choice=choice, parallel_tool_calls=parallel
    )
    schema = turn_schema(request)
    instances = {
        "get_weather": {"tool": "get_weather", "arguments": {"city": "Oslo"}},
        "now": {"tool": "now", "arguments": {}},
        "calls": {"calls": [{"tool": "now", "arguments": {}}]},
        "answer": {"answer": "done"},
    }
    assert {name for name, value in instances.items() if valid(schema, value)} == allowed


class Item(BaseModel):
    name: str


class Basket(BaseModel):
    items: list[Item]


class Order(BaseModel):
    item: Item
    count: int


def test_tools_with_definitions_of_one_name_keep_their_own() -> None:
    basket = ToolSchema(name="basket", parameters=Basket.model_json_schema())
    order = ToolSchema(name="order", parameters=Order.model_json_schema())
    schema = turn_schema(ModelRequest(messages=ASK, tools=(basket, order)))
    assert {"call_0.Item", "call_1.Item"} <= set(schema["$defs"])
    assert valid(schema, {"tool": "basket", "arguments": {"items": [{"name": "tea"}]}})
    assert valid(schema, {"tool": "order", "arguments": {"item": {"name": "tea"}, "count": 2}})
    assert not valid(schema, {"tool": "order", "arguments": {"item": {"nom": "tea"}, "count": 2}})


def test_a_tools_references_to_parts_of_itself_hold_where_it_is_embedded() -> None:
    """``#/properties/...`` (as zod-to-json-schema writes a part used twice, in many MCP
    servers' schemas) and ``#`` named the turn's schema, where the tool's is not the
    root: the references led nowhere, and llama.cpp refused the turn ('cannot resolve
    $ref #/properties/to')."""
    person = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    mail = ToolSchema(
        name="mail",
        parameters={
            "type": "object",
            "properties": {"to": person, "cc": {"$ref": "#/properties/to"}},
            "required": ["to"],
        },
    )
    tree = ToolSchema(
        name="tree",
        parameters={
            "type": "object",
            "properties": {
                "leaf": {"type": "string"},
                "kids": {"type": "array", "items": {"$ref": "#"}},
            },
        },
    )
    # The call object the root (one tool, required), or one of several.
    for tools, choice in [((mail,), "required"), ((mail, tree, CLOCK), "auto")]:
        request = ModelRequest(
            messages=ASK, tools=tools, tool_choice=choice, parallel_tool_calls=False
        )
        schema = turn_schema(request)
        ann = {"name": "Ann"}
        assert valid(schema, {"tool": "mail", "arguments": {"to": ann, "cc": ann}})
        assert not valid(schema, {"tool": "mail", "arguments": {"to": ann, "cc": {"nom": "x"}}})
    kids = {"leaf": "a", "kids": [{"leaf": "b", "kids": []}]}
    assert valid(schema, {"tool": "tree", "arguments": kids})
    assert not valid(schema, {"tool": "tree", "arguments": {"kids": [{"leaf": 3}]}})


def test_a_reference_to_another_document_takes_any_value_in_the_turns_schema() -> None:
    """A tool schema that names a part by another document's address: the turn's
    schema kept the reference, which no server that decodes under it fetches, and
    llama.cpp refused every call of the turn ('unsupported $ref http://...')."""
    note = ToolSchema(
        name="note",
        parameters={
            "type": "object",
            "properties": {"text": {"type": "string"}, "tag": {"$ref": "https://x.test/t.json"}},
            "required": ["text", "tag"],
        },
    )
    schema = turn_schema(ModelRequest(messages=ASK, tools=(note,), tool_choice="required"))
    assert "https://x.test/t.json" not in json.dumps(schema)
    assert valid(schema, {"tool": "note", "arguments": {"text": "a", "tag": {"any": 1}}})
    assert not valid(schema, {"tool": "note", "arguments": {"text": 3, "tag": "b"}})


class Verdict(BaseModel):
    city: str
    warm: bool


def test_a_structured_answer_is_the_output_schema_under_answer() -> None:
    from runtime import OutputSchema

    output = OutputSchema.for_model(Verdict)
    schema = turn_schema(ModelRequest(messages=ASK, tools=(WEATHER,), output=output))
    assert valid(schema, {"answer": {"city": "Oslo", "warm": False}})
    assert not valid(schema, {"answer": "Oslo is cold."})


@tool
async def get_weather(city: str) -> str:
    """The weekend forecast for a city."""
    return {"Oslo": "snow, -3C", "Rome": "sun, 18C"}[city]


async def test_a_loop_calls_tools_and_answers_through_the_schema() -> None:
    replies = [
        json.dumps(
            {"calls": [{"tool": "get_weather", "arguments": {"city": c}} for c in ("Oslo", "Rome")]}
        ),
        json.dumps({"answer": "Rome is warmer."}),
    ]
    inner = ScriptedModel(replies)
    loop = AgentLoop(
        JsonToolModel(inner), Dispatcher(ToolRegistry([get_weather])), instructions="Compare."
    )
    result = await loop.run("Which is warmer, Oslo or Rome?")
    assert isinstance(result, Final)
    assert result.output == "Rome is warmer."
    first, second = inner.requests
    assert first.tools == second.tools == ()
    assert first.output is not None
    assert first.output.name == SCHEMA_NAME
    assert first.output.strict is False
    system = first.messages[0]
    assert isinstance(system, SystemMessage)
    assert '"name": "get_weather"' in system.content
    assert '{"answer": "<your answer>"}' in system.content
    # the conversation as text: the calls as the JSON that asked for them, the
    # observations as one user message
    assert second.messages[-2] == AssistantMessage(content=replies[0])
    observations = second.messages[-1]
    assert isinstance(observations, UserMessage)
    assert "(get_weather): snow, -3C" in observations.content
    assert "(get_weather): sun, 18C" in observations.content
    calls = result.state.messages[0]
    assert isinstance(calls, AssistantMessage)
    assert [json.loads(c.arguments) for c in calls.tool_calls] == [
        {"city": "Oslo"}, {"city": "Rome"},
    ]  # fmt: skip


async def test_malformed_calls_become_error_observations_and_go_back_as_empty_arguments() -> None:
    replies = [
        json.dumps({"tool": "get_forecast", "arguments": {"city": "Oslo"}}),
        json.dumps({"tool": "get_weather", "arguments": "Oslo"}),
        json.dumps({"answer": "I could not tell."}),
    ]
    inner = ScriptedModel(replies)
    loop = AgentLoop(JsonToolModel(inner), Dispatcher(ToolRegistry([get_weather])))
    result = await loop.run("Weather in Oslo?")
    assert isinstance(result, Final)
    observations = [m for m in result.state.messages if isinstance(m, ToolMessage)]
    assert [o.status for o in observations] == ["error", "error"]
    assert "get_forecast" in observations[0].content
    # what the third request says of the second call: its arguments as {}
    sent_back = inner.requests[2].messages[-2]
    assert json.loads(sent_back.content or "") == {"tool": "get_weather", "arguments": {}}


async def test_a_server_that_ignores_the_schema_is_read_leniently() -> None:
    fenced = "```json\n{'tool': 'get_weather', 'arguments': {'city': 'Oslo'}}\n```"
    inner = ScriptedModel([fenced, "It snows in Oslo."])
    loop = AgentLoop(JsonToolModel(inner), Dispatcher(ToolRegistry([get_weather])))
    result = await loop.run("Weather in Oslo?")
    assert isinstance(result, Final)
    assert result.output == "It snows in Oslo."  # prose with no call: the answer
    assert [m.content for m in result.state.messages if isinstance(m, ToolMessage)] == ["snow, -3C"]


async def test_an_answer_cut_off_at_the_limit_keeps_its_text_as_far_as_it_goes() -> None:
    cut = ModelResponse(
        message=AssistantMessage(content='{"answer": "It snows in Oslo \\u00e0 l'),
        finish_reason="length",
    )
    loop = AgentLoop(JsonToolModel(ScriptedModel([cut])), Dispatcher(ToolRegistry([get_weather])))
    result = await loop.run("Weather in Oslo?")
    assert isinstance(result, Final)
    assert result.output == "It snows in Oslo à l"


async def test_a_structured_answer_after_tools_validates_as_the_output_type() -> None:
    replies = [
        json.dumps({"tool": "get_weather", "arguments": {"city": "Oslo"}}),
        json.dumps({"answer": {"city": "Oslo", "warm": False}}),
    ]
    loop = AgentLoop(
        JsonToolModel(ScriptedModel(replies)),
        Dispatcher(ToolRegistry([get_weather])),
        settings=LoopSettings(output_type=Verdict),
    )
    result = await loop.run("Is Oslo warm?")
    assert isinstance(result, Final)
    assert result.output == Verdict(city="Oslo", warm=False)


async def test_a_call_with_no_tools_in_its_conversation_goes_through_untouched() -> None:
    inner = FunctionModel(lambda request: "a plan")
    request = ModelRequest(messages=ASK, max_output_tokens=100)
    response = await JsonToolModel(inner).complete(request)
    assert inner.requests == [request]
    assert response.message.content == "a plan"
