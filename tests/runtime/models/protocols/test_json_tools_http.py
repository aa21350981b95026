"""``JsonToolModel`` over real HTTP: the real ``openai`` client against the local server
playing a model without function calling (it refuses any request carrying ``tools``),
answering under the turn's JSON schema; and a server that refuses ``json_schema``
too, which is asked the next way, as for any structured output."""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from runtime import Dispatcher, JsonToolModel, OpenAIModel, RetryPolicy, ToolRegistry
from tests.runtime.models.protocols.test_json_tools import get_weather
from tests.support.openai_server import Behaviour, OpenAIServer, RecordedRequest, error
from tests.support.tool_less import scripted, tool_less
from workers import AgentLoop, Final

CALLS = json.dumps({"calls": [{"tool": "get_weather", "arguments": {"city": c}}
                              for c in ("Oslo", "Rome")]})  # fmt: skip
ANSWER = json.dumps({"answer": "Rome is warmer."})


def model_on(server: OpenAIServer) -> OpenAIModel:
    return OpenAIModel("smollm2", base_url=server.base_url, retry=RetryPolicy(attempts=1))


def schema_of(body: dict[str, Any]) -> dict[str, Any]:
    response_format = body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "tool_call_or_answer"
    found: dict[str, Any] = response_format["json_schema"]["schema"]
    return found


async def loop_on(model: OpenAIModel) -> Final:
    loop = AgentLoop(
        JsonToolModel(model), Dispatcher(ToolRegistry([get_weather])), instructions="Compare."
    )
    result = await loop.run("Which is warmer, Oslo or Rome?")
    await model.client.close()
    assert isinstance(result, Final), result
    return result


async def test_each_turn_asks_for_the_schema_and_the_calls_reach_the_tool(
    openai_server: OpenAIServer,
) -> None:
    openai_server.default = tool_less(scripted(CALLS, ANSWER))
    result = await loop_on(model_on(openai_server))
    assert result.output == "Rome is warmer."
    observed = [m.content for m in result.state.messages if m.role == "tool"]
    assert observed == ["snow, -3C", "sun, 18C"]  # the tool ran, with valid arguments
    first, second = (r.body for r in openai_server.requests)
    for body in (first, second):
        assert not {"tools", "tool_choice", "parallel_tool_calls"} & set(body)
        assert {m["role"] for m in body["messages"]} <= {"system", "user", "assistant"}
    schema = schema_of(first)
    assert schema == schema_of(second)
    consts = [schema["$defs"][o["$ref"].rpartition("/")[2]]["properties"]["tool"]
              for o in schema["oneOf"] if "$ref" in o]  # fmt: skip
    assert consts == [{"const": "get_weather"}]
    validator = jsonschema.Draft202012Validator(schema)
    assert validator.is_valid(json.loads(CALLS))
    assert validator.is_valid(json.loads(ANSWER))
    assert not validator.is_valid({"tool": "get_weather", "arguments": {"town": "Oslo"}})
    assert second["messages"][-2] == {"role": "assistant", "content": CALLS}


async def test_a_server_that_refuses_json_schema_is_asked_the_next_way(
    openai_server: OpenAIServer,
) -> None:
    replies = scripted(CALLS, ANSWER)

    def refusing(request: RecordedRequest) -> Behaviour:
        if request.body.get("response_format", {}).get("type") == "json_schema":
            return error(400, "This response_format type is unavailable now")
        return replies(request)

    openai_server.default = tool_less(refusing)
    result = await loop_on(model_on(openai_server))
    assert result.output == "Rome is warmer."
    refused, asked, then = (r.body for r in openai_server.requests)
    assert refused["response_format"]["type"] == "json_schema"
    for body in (asked, then):  # from then on, json_object and the schema in words
        assert body["response_format"] == {"type": "json_object"}
        assert "named tool_call_or_answer" in body["messages"][0]["content"]


async def test_a_plain_reply_of_an_unenforcing_server_is_still_read(
    openai_server: OpenAIServer,
) -> None:
    fenced = '```json\n{"tool": "get_weather", "arguments": {"city": "Rome"}}\n```'
    openai_server.default = tool_less(scripted(fenced, "Rome: sun."))
    result = await loop_on(model_on(openai_server))
    assert result.output == "Rome: sun."
