"""``OpenAIResponsesModel`` through the real ``openai`` client, over real HTTP, against
the local test server's ``POST /v1/responses``."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic import BaseModel

from runtime import (
    AssistantMessage,
    ConfigError,
    Message,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    ModelTimeout,
    OpenAIModel,
    OpenAIResponsesModel,
    OutputSchema,
    ReasoningItem,
    RetryPolicy,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from runtime.models.openai.request import split_settings
from runtime.models.pricing import Price, PricedModel
from tests.support.openai_server import OpenAIServer, Raw, Reply, error, text, tool_calls

MakeModel = Callable[..., OpenAIResponsesModel]

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def fast(attempts: int = 3) -> RetryPolicy:
    return RetryPolicy(attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0)


def ask(*messages: Message, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (UserMessage(content="hi"),), **kwargs)


@pytest.fixture
async def make_model(openai_server: OpenAIServer) -> AsyncIterator[MakeModel]:
    made: list[OpenAIResponsesModel] = []

    def make(model: str = "gpt-test", **kwargs: Any) -> OpenAIResponsesModel:
        kwargs.setdefault("base_url", openai_server.base_url)
        kwargs.setdefault("retry", fast())
        made.append(OpenAIResponsesModel(model, **kwargs))
        return made[-1]

    yield make
    for model in made:
        with contextlib.suppress(ConfigError):
            await model.client.close()


def sent(server: OpenAIServer, index: int = -1) -> Any:
    request = server.requests[index]
    assert request.path == "/v1/responses"
    return request.body


# --- what goes out ---------------------------------------------------------------------


async def test_the_conversation_goes_out_as_input_items_keyed_by_call_id(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    model = make_model(settings={"temperature": 0.2, "max_output_tokens": 300, "top_k": 40})
    call = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}')
    await model.complete(
        ask(
            SystemMessage(content="Be brief."),
            UserMessage(content="Weather in Paris?"),
            AssistantMessage(content="Looking.", tool_calls=(call,)),
            ToolMessage(tool_call_id="call_a", name="get_weather", content="sunny"),
            tools=(WEATHER,),
        )
    )
    body = sent(openai_server)
    assert body["model"] == "gpt-test"
    assert body["input"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "call_a",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_a", "output": "sunny"},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": WEATHER.parameters,
            "strict": False,
        }
    ]
    assert (body["temperature"], body["max_output_tokens"], body["top_k"]) == (0.2, 300, 40)
    for absent in ("tool_choice", "parallel_tool_calls", "text", "messages", "include"):
        assert absent not in body


async def test_tool_choice_and_serial_calls_are_sent_in_the_responses_forms(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    model = make_model()
    for choice in ("none", "required", "get_weather"):
        await model.complete(ask(tools=(WEATHER,), tool_choice=choice, parallel_tool_calls=False))
    bodies = [r.body for r in openai_server.requests]
    assert [b["tool_choice"] for b in bodies] == [
        "none",
        "required",
        {"type": "function", "name": "get_weather"},
    ]
    assert all(b["parallel_tool_calls"] is False for b in bodies)


async def test_bad_arguments_go_back_as_an_empty_object(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    call = ToolCall(id="c", name="get_weather", arguments='{"city": ')
    await make_model().complete(
        ask(
            UserMessage(content="x"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id="c", name="get_weather", status="error", content="bad"),
        )
    )
    assert sent(openai_server)["input"][1]["arguments"] == "{}"


class Answer(BaseModel):
    city: str
    celsius: int


async def test_structured_output_is_asked_for_as_text_format_json_schema(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(text('{"city": "Paris", "celsius": 21}'))
    model = make_model(settings={"text": {"verbosity": "low"}})
    schema = OutputSchema.for_model(Answer)
    response = await model.complete(ask(output=schema))
    assert response.message.content == '{"city": "Paris", "celsius": 21}'
    assert sent(openai_server)["text"] == {
        "verbosity": "low",
        "format": {
            "type": "json_schema",
            "name": "Answer",
            "schema": schema.json_schema,
            "strict": False,
        },
    }


async def test_a_refused_json_schema_falls_back_to_json_object_then_instructions(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    refused = error(400, "text.format of type json_schema is not supported by this model")
    openai_server.enqueue(refused, error(400, "json_object is not supported"), text("{}"))
    model = make_model()
    schema = OutputSchema.for_model(Answer)
    await model.complete(ask(SystemMessage(content="Be brief."), output=schema))
    bodies = [r.body for r in openai_server.requests]
    assert [b.get("text", {}).get("format", {}).get("type") for b in bodies] == [
        "json_schema",
        "json_object",
        None,
    ]
    instructions = bodies[-1]["input"][0]["content"]
    assert instructions.startswith("Be brief.\n\nAnswer with one JSON object")
    assert model.output_mode == "instructions"


async def test_store_false_asks_for_the_reasonings_encrypted_content(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    await make_model(settings={"store": False, "include": ["file_search_call.results"]}).complete(
        ask()
    )
    body = sent(openai_server)
    assert body["store"] is False
    assert body["include"] == ["file_search_call.results", "reasoning.encrypted_content"]


@pytest.mark.parametrize("key", ["input", "previous_response_id", "conversation", "tools"])
def test_a_setting_honeycomb_sets_itself_is_a_config_error(key: str) -> None:
    with pytest.raises(ConfigError, match=repr(key)):
        OpenAIResponsesModel("gpt-test", base_url="http://127.0.0.1:9/v1", settings={key: 1})


def test_settings_are_split_by_what_responses_create_names() -> None:
    settings = {"max_output_tokens": 5, "reasoning": {"effort": "low"}, "top_k": 3}
    assert split_settings(settings, "responses") == (
        {"max_output_tokens": 5, "reasoning": {"effort": "low"}},
        {"top_k": 3},
    )
    # chat completions name neither of the first two
    assert split_settings(settings)[1] == settings


# --- what comes back --------------------------------------------------------------------


async def test_text_usage_and_model_are_mapped(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        Reply(
            content="hello",
            prompt_tokens=30,
            completion_tokens=12,
            reasoning_tokens=5,
            cached_tokens=20,
            model="gpt-test-2025",
        )
    )
    response = await make_model().complete(ask())
    assert response.message == AssistantMessage(content="hello")
    assert (response.usage.input_tokens, response.usage.output_tokens) == (30, 12)
    assert response.usage.reasoning_tokens == 5
    assert (response.finish_reason, response.model) == ("stop", "gpt-test-2025")


async def test_cached_input_tokens_are_counted(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Reply(content="hi", prompt_tokens=30, cached_tokens=20))
    response = await make_model().complete(ask())
    assert response.usage.cached_input_tokens == 20


async def test_tool_calls_round_trip_by_call_id(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        tool_calls(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"})),
        text("Paris is sunny, Rome rainy."),
    )
    model = make_model()
    first = await model.complete(ask(tools=(WEATHER,)))
    calls = first.message.tool_calls
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("call_0", "get_weather", {"city": "Paris"}),
        ("call_1", "get_weather", {"city": "Rome"}),
    ]
    assert first.finish_reason == "tool_calls"
    observations = [
        ToolMessage(tool_call_id=c.id, name=c.name, content=w)
        for c, w in zip(calls, ("sunny", "rainy"), strict=True)
    ]
    second = await model.complete(
        ask(UserMessage(content="hi"), first.message, *observations, tools=(WEATHER,))
    )
    assert second.message.content == "Paris is sunny, Rome rainy."
    items = sent(openai_server)["input"][1:]
    assert [(i["type"], i["call_id"]) for i in items] == [
        ("function_call", "call_0"),
        ("function_call", "call_1"),
        ("function_call_output", "call_0"),
        ("function_call_output", "call_1"),
    ]


async def test_reasoning_items_are_kept_and_passed_back_before_their_calls(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        Reply(
            reasoning="Need the weather first.",
            reasoning_encrypted="gAAAA-opaque",
            reasoning_tokens=9,
            tool_calls=(("call_w", "get_weather", '{"city": "Oslo"}'),),
        )
    )
    model = make_model(settings={"store": False})
    first = await model.complete(ask(tools=(WEATHER,)))
    item = ReasoningItem(
        id="rs_test1", summary=("Need the weather first.",), encrypted_content="gAAAA-opaque"
    )
    assert first.message.reasoning_items == (item,)
    assert first.message.reasoning == "Need the weather first."
    assert first.usage.reasoning_tokens == 9

    observation = ToolMessage(tool_call_id="call_w", name="get_weather", content="-3C")
    await model.complete(ask(UserMessage(content="hi"), first.message, observation))
    assert sent(openai_server)["input"][1:] == [
        {
            "type": "reasoning",
            "id": "rs_test1",
            "summary": [{"type": "summary_text", "text": "Need the weather first."}],
            "encrypted_content": "gAAAA-opaque",
        },
        {
            "type": "function_call",
            "call_id": "call_w",
            "name": "get_weather",
            "arguments": '{"city": "Oslo"}',
        },
        {"type": "function_call_output", "call_id": "call_w", "output": "-3C"},
    ]


async def test_an_answer_cut_at_max_output_tokens_finishes_for_length(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Reply(content="The weather in", finish_reason="length"))
    response = await make_model().complete(ask())
    assert (response.message.content, response.finish_reason) == ("The weather in", "length")


# --- failures: retried, translated ------------------------------------------------------


async def test_429_and_5xx_are_retried_honouring_retry_after(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(429, retry_after=0.05), error(503), text("at last"))
    response = await make_model(retry=fast(attempts=3)).complete(ask())
    assert response.message.content == "at last"
    requests = openai_server.requests
    assert len(requests) == 3
    assert requests[1].at - requests[0].at >= 0.05


async def test_retries_spent_raise_the_last_http_error(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(500), error(502), error(500, "still down"))
    with pytest.raises(ModelHTTPError) as raised:
        await make_model(retry=fast(attempts=3)).complete(ask())
    assert raised.value.status == 500
    assert "still down" in str(raised.value)
    assert len(openai_server.requests) == 3


async def test_client_errors_are_not_retried(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(400, "Invalid 'input[2].call_id'"))
    with pytest.raises(ModelHTTPError) as raised:
        await make_model().complete(ask())
    assert raised.value.status == 400
    assert not raised.value.retryable
    assert len(openai_server.requests) == 1


async def test_a_slow_answer_past_the_timeout_is_a_model_timeout(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(text("late", delay_s=1.0))
    with pytest.raises(ModelTimeout):
        await make_model(retry=fast(attempts=1)).complete(ask(timeout=0.2))


async def test_a_refused_connection_is_a_model_connection_error(make_model: MakeModel) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = make_model(base_url=f"http://127.0.0.1:{port}/v1", retry=fast(attempts=1))
    with pytest.raises(ModelConnectionError):
        await model.complete(ask())


async def test_a_200_that_is_not_json_is_retried(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    nested = b'{"output": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"  # past the recursion limit
    openai_server.enqueue(
        Raw(200, content=b"<html>bad gateway</html>"), Raw(200, content=nested), text("ok")
    )
    response = await make_model().complete(ask())
    assert response.message.content == "ok"
    assert len(openai_server.requests) == 3


async def test_a_failed_response_is_an_error_retried_when_the_server_failed(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    def failed(code: str) -> dict[str, Any]:
        return {"status": "failed", "output": [], "error": {"code": code, "message": "x"}}

    openai_server.enqueue(
        Raw(200, body=failed("server_error")), text("ok"), Raw(200, body=failed("invalid_prompt"))
    )
    model = make_model()
    assert (await model.complete(ask())).message.content == "ok"
    with pytest.raises(ModelResponseError, match="invalid_prompt") as raised:
        await model.complete(ask())
    assert not raised.value.retryable
    assert len(openai_server.requests) == 3


@pytest.mark.parametrize("status", ["failed", "cancelled", "unheard-of"])
async def test_a_response_that_is_not_an_answer_and_says_no_error_is_not_taken_as_one(
    openai_server: OpenAIServer, make_model: MakeModel, status: str
) -> None:
    openai_server.enqueue(Raw(200, body={"status": status, "error": None, "output": []}))
    with pytest.raises(ModelResponseError) as caught:
        await make_model().complete(ask())
    assert f"status {status!r}" in str(caught.value)
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("status", ["in_progress", "queued"])
async def test_a_response_sent_before_it_was_finished_is_retried(
    openai_server: OpenAIServer, make_model: MakeModel, status: str
) -> None:
    openai_server.enqueue(
        Raw(200, body={"status": status, "error": None, "output": []}), text("ok")
    )
    assert (await make_model().complete(ask())).message.content == "ok"
    assert len(openai_server.requests) == 2


async def test_an_incomplete_response_is_an_answer_cut_off(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    item = {"type": "message", "content": [{"type": "output_text", "text": "Half"}]}
    cut = {"reason": "max_output_tokens"}
    openai_server.enqueue(
        Raw(200, body={"status": "incomplete", "output": [item]}),
        Raw(200, body={"status": "incomplete", "incomplete_details": cut, "output": [item]}),
    )
    model = make_model()
    first, second = await model.complete(ask()), await model.complete(ask())
    assert (first.message.content, first.finish_reason) == ("Half", "incomplete")
    assert (second.message.content, second.finish_reason) == ("Half", "length")


@pytest.mark.parametrize("api", [OpenAIModel, OpenAIResponsesModel])
async def test_cached_input_tokens_are_never_more_than_the_input_tokens(
    openai_server: OpenAIServer, api: type[OpenAIModel | OpenAIResponsesModel]
) -> None:
    """A server (a proxy summing over calls) that reports more cached tokens than
    input tokens: both adapters count them as all of the input, and the cost of the
    call stays above zero."""
    openai_server.enqueue(
        Reply(content="x", prompt_tokens=10, completion_tokens=10, cached_tokens=500)
    )
    price = Price(input_per_mtok=1.0, output_per_mtok=4.0, cached_input_per_mtok=0.1)
    model = api("gpt-test", base_url=openai_server.base_url, retry=fast())
    try:
        usage = (await PricedModel(model, price).complete(ask())).usage
    finally:
        await model.client.close()
    assert (usage.input_tokens, usage.cached_input_tokens) == (10, 10)
    assert usage.cost == pytest.approx((10 * 0.1 + 10 * 4.0) / 1e6)


async def test_a_key_an_error_echoes_is_masked(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    key = "sk-test-0123456789abcdef"
    openai_server.enqueue(error(401, f"bad key {key}"))
    with pytest.raises(ModelHTTPError) as raised:
        await make_model(api_key=key).complete(ask())
    assert key not in str(raised.value)
    assert key not in repr(raised.value.body)
    assert "[api key hidden]" in str(raised.value)
