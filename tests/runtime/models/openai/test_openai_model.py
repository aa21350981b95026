"""``OpenAIModel`` through the real ``openai`` client, over real HTTP, against the local
OpenAI-compatible server in :mod:`tests.support.openai_server`."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import gc
import itertools
import json
import re
import socket
import time
import warnings
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel
from structlog.testing import capture_logs

from runtime import (
    AdaptiveLimiter,
    AssistantMessage,
    ConfigError,
    ConfigErrors,
    Event,
    Message,
    ModelConnectionError,
    ModelHTTPError,
    ModelRequest,
    ModelResponse,
    ModelResponseError,
    ModelTimeout,
    OpenAIModel,
    OutputSchema,
    RetryAfterPastDeadline,
    RetryPolicy,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    Tracer,
    Usage,
    UserMessage,
)
from runtime.events import CallReport, ModelCallRetrying, current_call
from runtime.models.openai.request import sdk_parameters, split_settings
from tests.conftest import RealNetworkUsed
from tests.support.openai_server import (
    Behaviour,
    OpenAIServer,
    Raw,
    RecordedRequest,
    Reply,
    _completion,
    error,
    text,
    tool_calls,
)

MakeModel = Callable[..., OpenAIModel]

WEATHER = ToolSchema(
    name="get_weather",
    description="Current weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
WEATHER_OUT = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "parameters": WEATHER.parameters,
    },
}


def fast(attempts: int = 3, **kwargs: Any) -> RetryPolicy:
    """A retry policy whose own backoff is negligible (10-50 ms, no jitter)."""
    return RetryPolicy(
        attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05, jitter_s=0, **kwargs
    )


def ask(*messages: Message, **kwargs: Any) -> ModelRequest:
    return ModelRequest(messages=messages or (UserMessage(content="hi"),), **kwargs)


@pytest.fixture
async def make_model(openai_server: OpenAIServer) -> AsyncIterator[MakeModel]:
    """Makes models aimed at the server (fast retries); closes their clients afterwards."""
    made: list[OpenAIModel] = []

    def make(model: str = "gpt-test", **kwargs: Any) -> OpenAIModel:
        kwargs.setdefault("base_url", openai_server.base_url)
        kwargs.setdefault("retry", fast())
        made.append(OpenAIModel(model, **kwargs))
        return made[-1]

    yield make
    for model in made:
        with contextlib.suppress(ConfigError):
            await model.client.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


# --- mapping out: what the client sends ----------------------------------------------


async def test_messages_tools_and_settings_are_sent_in_openai_shape(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    model = make_model(settings={"temperature": 0.2, "seed": 7})
    call = ToolCall(id="call_a", name="get_weather", arguments='{"city": "Paris"}')
    await model.complete(
        ask(
            SystemMessage(content="Be terse."),
            UserMessage(content="Weather in Paris?"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id="call_a", name="get_weather", content="18C, sunny"),
            tools=(WEATHER,),
            parallel_tool_calls=False,
        )
    )

    [sent] = openai_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == {
        "model": "gpt-test",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_a", "content": "18C, sunny"},
        ],
        "tools": [WEATHER_OUT],
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "seed": 7,
    }


async def test_text_with_lone_surrogates_goes_out_as_valid_utf8(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    # Lone surrogates: what Python makes of bytes that are not UTF-8 (argv, file names).
    call = ToolCall(id="call_a", name="ls", arguments='{"dir": "d\udcff"}')
    response = await make_model().complete(
        ask(
            SystemMessage(content="Be terse \ud800."),
            UserMessage(content="weather in Lisbon \udcff"),
            AssistantMessage(content="looking \udcfe", tool_calls=(call,), reasoning="r\udcff"),
            ToolMessage(tool_call_id="call_a", name="ls", content="report\udcff.txt"),
        )
    )

    assert response.message.content == "ok"
    [sent] = openai_server.requests
    [system, user, assistant, observation] = sent.body["messages"]
    assert system["content"] == "Be terse \ufffd."
    assert user["content"] == "weather in Lisbon \ufffd"
    assert assistant["content"] == "looking \ufffd"
    assert assistant["reasoning_content"] == "r\ufffd"
    assert assistant["tool_calls"][0]["function"]["arguments"] == '{"dir": "d\ufffd"}'
    assert observation["content"] == "report\ufffd.txt"


async def test_a_request_without_tools_or_output_sends_none_of_their_fields(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    await make_model().complete(ask())

    assert openai_server.requests[0].body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice_forms(
    openai_server: OpenAIServer, make_model: MakeModel, choice: str, sent: Any
) -> None:
    await make_model().complete(ask(tools=(WEATHER,), tool_choice=choice))

    assert openai_server.requests[0].body["tool_choice"] == sent


async def test_the_api_defaults_auto_and_parallel_tool_calls_are_not_sent(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    # LiteLLM without drop_params rejects either for several providers (ollama_chat ...).
    await make_model().complete(ask(tools=(WEATHER,), tool_choice="auto"))

    body = openai_server.requests[0].body
    assert body["tools"] == [WEATHER_OUT]
    assert "tool_choice" not in body
    assert "parallel_tool_calls" not in body


class Forecast(BaseModel):
    city: str
    celsius: float


async def test_structured_output_is_requested_as_a_json_schema_response_format(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(text('{"city": "Paris", "celsius": 18.5}'))

    response = await make_model().complete(ask(output=OutputSchema.for_model(Forecast)))

    assert openai_server.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {
            "name": "Forecast",
            "schema": Forecast.model_json_schema(),
            "strict": False,
        },
    }
    assert response.message.content is not None
    assert Forecast.model_validate_json(response.message.content) == Forecast(
        city="Paris", celsius=18.5
    )


async def test_strict_output_schema_is_sent_strict(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    await make_model().complete(ask(output=OutputSchema(name="count", json_schema=schema)))

    sent = openai_server.requests[0].body["response_format"]["json_schema"]
    assert sent == {"name": "count", "schema": schema, "strict": True}


async def test_settings_the_sdk_does_not_name_are_sent_in_the_body(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    # vLLM, llama.cpp and Ollama take sampling keys that OpenAI's API does not have.
    settings = {
        "temperature": 0.2,
        "top_k": 40,
        "min_p": 0.05,
        "extra_body": {"repetition_penalty": 1.1, "top_k": 20},
        "extra_headers": {"x-team": "bees"},
    }
    await make_model(settings=settings).complete(ask())

    [sent] = openai_server.requests
    assert sent.body == {
        "model": "gpt-test",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0.2,
        "top_k": 20,  # the settings' own extra_body wins
        "min_p": 0.05,
        "repetition_penalty": 1.1,
    }
    assert sent.headers["x-team"] == "bees"


def test_known_settings_are_the_installed_sdks_own_parameters() -> None:
    sdk, extra = split_settings({"temperature": 0.2, "seed": 1, "top_k": 40, "min_p": 0.1})
    assert sdk == {"temperature": 0.2, "seed": 1}
    assert extra == {"top_k": 40, "min_p": 0.1}
    assert sdk_parameters() >= {"temperature", "top_p", "seed", "max_tokens", "stop"}
    assert "self" not in sdk_parameters()


@pytest.mark.parametrize("key", ["model", "messages", "tools", "tool_choice", "stream", "timeout"])
def test_a_setting_honeycomb_sets_itself_is_a_config_error(key: str) -> None:
    with pytest.raises(ConfigError, match=f"'{key}' cannot be a setting") as caught:
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", settings={key: 1})
    assert caught.value.field == f"settings.{key}"


def test_extra_body_that_is_not_a_mapping_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="extra_body must be a mapping"):
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", settings={"extra_body": [1]})


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"extra_headers": ["x-team"]}, "settings.extra_headers"),
        ({"extra_headers": {"x-ids": [1, 2]}}, "settings.extra_headers"),  # names no header
        ({"extra_headers": {"x-none": None}}, "settings.extra_headers"),
        ({"extra_query": ["a"]}, "settings.extra_query"),
        ({"extra_query": {"a": {"b": 1}}}, "settings.extra_query.a"),
    ],
)
def test_headers_or_query_of_the_wrong_shape_are_a_config_error_at_once(
    settings: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", settings=settings)
    assert caught.value.field == field


HEADER_TOKEN = "sk-header-0123456789"


@pytest.mark.parametrize(
    ("given", "told"),
    [
        ({"timeout": 0}, "timeout must be a positive number of seconds (one attempt's), got 0"),
        ({"timeout": float("nan")}, "timeout must be a positive number of seconds"),
        ({"max_concurrency": 0}, "max_concurrency must be at least 1 (None: no limit), got 0"),
        ({"context_tokens": 0}, "context_tokens must be a positive number of tokens, got 0"),
        ({"api_key_env": ""}, "api_key_env must name an environment variable, got ''"),
        ({"api_key_env": HEADER_TOKEN}, "api_key_env must name an environment variable ("),
    ],
)
def test_a_number_or_name_no_call_can_use_is_refused_naming_the_model(
    given: dict[str, Any], told: str
) -> None:
    """A timeout of 0 timed every call out, retried, and one of NaN failed it with a
    bare ValueError; max_concurrency=0 was the limiter's ValueError, naming neither the
    model nor the argument; api_key_env="" was told as 'the environment variable ,
    which is not set' at the first call, and a key given as api_key_env (its variable's
    name) as 'the environment variable sk-..., which is not set', the key shown."""
    with pytest.raises(ConfigError) as caught:
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", **given)
    assert str(caught.value).startswith(f"model 'gpt-test': {told}")
    assert HEADER_TOKEN not in str(caught.value)


@pytest.mark.parametrize(
    ("name", "told"),
    [
        ("Authorization:", "holds ':' after 'Authorization'"),
        (f"Authorization: Bearer {HEADER_TOKEN}", "holds ':' after 'Authorization'"),
        ("X Team", "holds ' ' after 'X'"),
        ("X-Tëam", "holds 'ë' after 'X-T'"),
        ("", "is empty"),
    ],
)
def test_a_header_name_no_request_can_carry_is_refused_naming_the_model(
    name: str, told: str
) -> None:
    """Such a name was taken, and every call failed in httpx's words: 'Illegal header
    name' (quoting the name, a token written in it too), or a bare UnicodeEncodeError."""
    settings = {"extra_headers": {name: f"Bearer {HEADER_TOKEN}"}}
    with pytest.raises(ConfigError) as caught:
        OpenAIModel("gpt-test", base_url="http://127.0.0.1:9/v1", settings=settings)
    assert caught.value.field == "settings.extra_headers"
    assert f"model 'gpt-test': a header's name {told}" in str(caught.value)
    assert HEADER_TOKEN not in str(caught.value)


def test_every_setting_honeycomb_sets_is_reported_at_once() -> None:
    with pytest.raises(ConfigErrors) as caught:
        OpenAIModel("m", base_url="http://127.0.0.1:9/v1", settings={"stream": 1, "tools": 2})
    assert [e.field for e in caught.value.errors] == ["settings.stream", "settings.tools"]


async def test_header_numbers_and_booleans_are_sent_as_text(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    headers = {"x-retries": 3, "x-debug": True, "x-ratio": 0.5}
    await make_model(settings={"extra_headers": headers, "extra_query": {"n": [1, 2]}}).complete(
        ask()
    )

    [sent] = openai_server.requests
    assert (sent.headers["x-retries"], sent.headers["x-debug"]) == ("3", "true")
    assert sent.headers["x-ratio"] == "0.5"


# --- structured output: falling back when the endpoint refuses json_schema -------------

REFUSED = error(400, "This response_format type is unavailable now")


async def test_a_refused_json_schema_falls_back_to_json_object_once_and_remembers(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(REFUSED, text('{"city": "Paris", "celsius": 18.5}'))
    model = make_model(retry=fast(attempts=1))  # the fallback is not one of the retries
    output = OutputSchema.for_model(Forecast)
    system = SystemMessage(content="Be terse.")

    with capture_logs() as logs:
        first = await model.complete(ask(system, UserMessage(content="Paris?"), output=output))
    await model.complete(ask(UserMessage(content="Oslo?"), output=output))

    assert first.message.content == '{"city": "Paris", "celsius": 18.5}'
    refused, retried, later = (r.body for r in openai_server.requests)
    assert refused["response_format"]["type"] == "json_schema"
    for body in (retried, later):
        assert body["response_format"] == {"type": "json_object"}
        instructions = body["messages"][0]
        assert instructions["role"] == "system"
        assert (
            json.dumps(Forecast.model_json_schema(), separators=(",", ":"))
            in (instructions["content"])
        )
    assert retried["messages"][0]["content"].startswith("Be terse.\n\n")  # one system message
    assert [m["role"] for m in retried["messages"]] == ["system", "user"]
    assert [m["role"] for m in later["messages"]] == ["system", "user"]
    assert model.output_mode == "json_object"
    [fallback] = [e for e in logs if e["event"] == "model_call.output_fallback"]
    assert (fallback["refused"], fallback["now"]) == ("json_schema", "json_object")


async def test_a_refused_json_object_falls_back_to_instructions_alone(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        REFUSED,
        error(422, "response_format json_object is not supported by this model"),
        text('{"city": "Oslo", "celsius": 4}'),
    )
    model = make_model()

    await model.complete(ask(output=OutputSchema.for_model(Forecast)))

    last = openai_server.requests[-1].body
    assert len(openai_server.requests) == 3
    assert "response_format" not in last
    assert "JSON schema" in last["messages"][0]["content"]
    assert model.output_mode == "instructions"


@pytest.mark.parametrize(
    "answer",
    [
        error(400, "messages: field required"),  # a 400 about something else
        error(401, "response_format needs a paid plan"),  # not a 400 or 422
    ],
    ids=["other-400", "401"],
)
async def test_other_client_errors_are_not_a_fallback(
    openai_server: OpenAIServer, make_model: MakeModel, answer: Raw
) -> None:
    openai_server.enqueue(answer)
    model = make_model()

    with pytest.raises(ModelHTTPError):
        await model.complete(ask(output=OutputSchema.for_model(Forecast)))

    assert len(openai_server.requests) == 1
    assert model.output_mode == "json_schema"


async def test_a_refusal_with_plain_instructions_is_an_error(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = REFUSED
    model = make_model()

    with pytest.raises(ModelHTTPError, match="response_format"):
        await model.complete(ask(output=OutputSchema.for_model(Forecast)))

    assert len(openai_server.requests) == 3  # json_schema, json_object, instructions
    assert model.output_mode == "instructions"


async def test_a_request_without_an_output_schema_never_falls_back(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(REFUSED)
    model = make_model()

    with pytest.raises(ModelHTTPError):
        await model.complete(ask())
    assert model.output_mode == "json_schema"


# --- turns that must alternate ----------------------------------------------------------

ALTERNATE = "Conversation roles must alternate user/assistant/user/assistant/..."


def alternating_template(request: RecordedRequest) -> Behaviour:
    """A server whose chat template raises on two user messages in a row (Gemma's,
    on vLLM: a 400 with the template's message)."""
    roles = [m["role"] for m in request.body["messages"]]
    if any(a == b == "user" for a, b in itertools.pairwise(roles)):
        return error(400, ALTERNATE)
    return text("noted")


async def test_an_endpoint_that_wants_turns_to_alternate_gets_user_messages_as_one(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    """The task and a summary after it (as compaction sends them) are refused; the
    call is made again with the two as one message, and so is every later call."""
    openai_server.default = alternating_template
    model = make_model(retry=fast(attempts=1))  # making it again is not one of the retries
    system = SystemMessage(content="Be terse.")
    task, summary = UserMessage(content="Read the log."), UserMessage(content="[Summary] x")

    with capture_logs() as logs:
        first = await model.complete(ask(system, task, summary))
        later = await model.complete(
            ask(system, task, summary, AssistantMessage(content="ok"), UserMessage(content="a"))
        )

    assert (first.message.content, later.message.content) == ("noted", "noted")
    refused, again, after = (r.body["messages"] for r in openai_server.requests)
    assert [m["role"] for m in refused] == ["system", "user", "user"]
    assert again == [
        {"role": "system", "content": "Be terse."},
        {"role": "user", "content": "Read the log.\n\n[Summary] x"},
    ]
    assert [m["role"] for m in after] == ["system", "user", "assistant", "user"]
    assert model.alternating
    [switched] = [e for e in logs if e["event"] == "model_call.alternating"]
    assert ALTERNATE in switched["error"]


async def test_a_refusal_to_alternate_with_nothing_to_join_is_the_calls_error(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = error(400, ALTERNATE)
    model = make_model(retry=fast(attempts=1))

    with pytest.raises(ModelHTTPError, match="must alternate"):
        await model.complete(ask())
    assert len(openai_server.requests) == 2  # as it was, then alternating: no further


# --- mapping back: what the client makes of the answer --------------------------------


async def test_text_answer_usage_and_model_are_mapped(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        Reply(content="Hello.", prompt_tokens=123, completion_tokens=45, model="gpt-test-0613")
    )

    response = await make_model().complete(ask())

    assert response.message == AssistantMessage(content="Hello.")
    assert response.usage == Usage(input_tokens=123, output_tokens=45)
    assert response.usage.total_tokens == 168
    assert response.finish_reason == "stop"
    assert response.model == "gpt-test-0613"


async def test_tool_calls_are_mapped_back_and_round_trip(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(
        tool_calls(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Oslo"})),
        text("Paris is warmer."),
    )
    model = make_model()
    first = UserMessage(content="Compare Paris and Oslo.")

    response = await model.complete(ask(first, tools=(WEATHER,)))

    assert response.finish_reason == "tool_calls"
    assert response.message == AssistantMessage(
        content=None,
        tool_calls=(
            ToolCall(id="call_0", name="get_weather", arguments='{"city": "Paris"}'),
            ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}'),
        ),
    )
    observations = [
        ToolMessage(tool_call_id=c.id, name=c.name, content="ok")
        for c in response.message.tool_calls
    ]
    await model.complete(ask(first, response.message, *observations, tools=(WEATHER,)))

    # The assistant turn goes back exactly as the server sent it.
    sent = openai_server.requests[1].body["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
            },
        ],
    }
    assert [(m["role"], m["tool_call_id"]) for m in sent[2:]] == [
        ("tool", "call_0"),
        ("tool", "call_1"),
    ]


async def test_malformed_tool_arguments_pass_through_as_raw_text(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    broken = '{"city": "Paris",'  # the dispatcher, not the adapter, reports this
    openai_server.enqueue(tool_calls(("get_weather", broken), content="Let me check."))

    response = await make_model().complete(ask(tools=(WEATHER,)))

    assert response.message.content == "Let me check."
    assert response.message.tool_calls == (
        ToolCall(id="call_0", name="get_weather", arguments=broken),
    )
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.message.tool_calls[0].arguments)
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize(
    "arguments",
    ['{"city": "Os', "", "[1, 2]", "null", '"Oslo"', "{} {}", "[" * 3000 + "]" * 3000],
    ids=["cut-off", "empty", "list", "null", "string", "two-objects", "nested-too-deep"],
)
async def test_bad_tool_arguments_go_back_on_the_wire_as_an_empty_object(
    openai_server: OpenAIServer, make_model: MakeModel, arguments: str
) -> None:
    # llama.cpp's server answers every later turn with a 500 when they go back verbatim.
    call = ToolCall(id="call_a", name="get_weather", arguments=arguments)
    observation = ToolMessage(
        tool_call_id="call_a", name="get_weather", status="error", content="bad arguments"
    )

    await make_model().complete(
        ask(UserMessage(content="Weather?"), AssistantMessage(tool_calls=(call,)), observation)
    )

    [sent_call] = openai_server.requests[0].body["messages"][1]["tool_calls"]
    assert sent_call["function"]["arguments"] == "{}"
    assert call.arguments == arguments  # the transcript keeps what the model wrote


@pytest.mark.parametrize("missing", ["", None], ids=["empty", "absent"])
async def test_tool_calls_without_an_id_get_one_unique_in_the_conversation(
    openai_server: OpenAIServer, make_model: MakeModel, missing: str | None
) -> None:
    def answer(*calls: tuple[str, str]) -> Raw:
        body = _completion(Reply(tool_calls=tuple((c, n, "{}") for c, n in calls)), "m", 1)
        for sent in body["choices"][0]["message"]["tool_calls"]:
            if missing is None:
                del sent["id"]
            else:
                sent["id"] = missing
        return Raw(200, body=body)

    # Gemini's OpenAI-compatible endpoint and LM Studio send "id": "".
    openai_server.enqueue(
        answer(("x", "get_weather"), ("x", "get_weather")), answer(("x", "get_weather"))
    )
    model = make_model()
    conversation: list[Message] = [UserMessage(content="Weather in Paris and Oslo?")]
    for _ in range(2):
        response = await model.complete(ask(*conversation, tools=(WEATHER,)))
        conversation.append(response.message)
        conversation += [
            ToolMessage(tool_call_id=c.id, name=c.name, content="18C")
            for c in response.message.tool_calls
        ]
    await model.complete(ask(*conversation, tools=(WEATHER,)))

    ids = [c.id for m in conversation if isinstance(m, AssistantMessage) for c in m.tool_calls]
    assert len(ids) == 3
    assert all(ids)
    assert len(set(ids)) == 3
    sent = openai_server.requests[2].body["messages"]
    assert [c["id"] for m in sent if m["role"] == "assistant" for c in m["tool_calls"]] == ids
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == ids


async def test_reasoning_is_kept_counted_and_sent_back_where_the_server_sent_it(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    # DeepSeek's thinking mode answers 400 on the next turn of a tool loop without it.
    openai_server.enqueue(
        Reply(
            reasoning="The user wants Paris; call the tool.",
            tool_calls=(("call_0", "get_weather", '{"city": "Paris"}'),),
            completion_tokens=40,
            reasoning_tokens=31,
        ),
    )
    model = make_model()
    first = UserMessage(content="Weather in Paris?")

    response = await model.complete(ask(first, tools=(WEATHER,)))
    observation = ToolMessage(tool_call_id="call_0", name="get_weather", content="18C")
    plain = AssistantMessage(content="Noted.")
    await model.complete(ask(first, response.message, observation, plain, tools=(WEATHER,)))

    assert response.message.reasoning == "The user wants Paris; call the tool."
    assert response.usage.reasoning_tokens == 31
    assert response.usage.output_tokens == 40  # reasoning tokens are among the output's
    sent = openai_server.requests[1].body["messages"]
    assert sent[1]["reasoning_content"] == "The user wants Paris; call the tool."
    assert "reasoning_content" not in sent[3]  # not made up where the server sent none


async def test_an_answer_without_choices_raises_model_response_error(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(Raw(200, body={"id": "x", "object": "chat.completion", "choices": []}))

    with pytest.raises(ModelResponseError, match="no choices"):
        await make_model().complete(ask())
    assert len(openai_server.requests) == 1


# --- configuration -------------------------------------------------------------------


async def test_api_key_and_base_url_are_read_from_the_environment(
    openai_server: OpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_server.base_url)
    model = OpenAIModel("gpt-test")

    response = await model.complete(ask())
    await model.client.close()

    assert response.message.content == "ok"
    assert model.base_url == openai_server.base_url
    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-from-env"


async def test_an_explicit_api_key_wins_over_the_environment(
    openai_server: OpenAIServer, make_model: MakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")

    await make_model(api_key="sk-explicit").complete(ask())

    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-explicit"


async def test_a_key_variable_named_is_read_as_the_client_is_made(
    openai_server: OpenAIServer, make_model: MakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    model = make_model(api_key_env="DEEPSEEK_API_KEY")
    missing = model.missing_key()  # unset, even for a local endpoint: it was named
    assert missing is not None
    assert "DEEPSEEK_API_KEY, which is not set" in missing.message

    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-deepseek-key")
    await model.complete(ask())

    assert openai_server.requests[0].headers["authorization"] == "Bearer sk-deepseek-key"
    with pytest.raises(ConfigError, match="not both"):
        make_model(api_key="sk-explicit", api_key_env="DEEPSEEK_API_KEY")


async def test_a_local_base_url_needs_no_api_key(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    response = await make_model().complete(ask())

    assert response.message.content == "ok"
    assert openai_server.requests[0].headers["authorization"].startswith("Bearer ")


async def test_no_api_key_for_openai_itself_is_a_config_error(
    no_real_network: list[str],
) -> None:
    model = OpenAIModel("gpt-4o-mini", retry=fast())

    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        await model.complete(ask())
    assert no_real_network == []  # it failed before trying to connect


async def test_a_key_given_empty_sends_the_placeholder_not_another_endpoints_key(
    openai_server: OpenAIServer, make_model: MakeModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An empty key for an endpoint of its own is no key (a hive's ``${NAME:-}`` of a
    variable not set gives one): OPENAI_API_KEY, another endpoint's, does not go
    there in its place, and a refusal says that no key was given."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    model = make_model(api_key="")
    assert model.missing_key() is None
    await model.complete(ask())
    assert openai_server.requests[0].headers["authorization"] == "Bearer unused"
    openai_server.enqueue(error(401, "no key"))
    with pytest.raises(ModelHTTPError, match="wants an API key and none was given"):
        await model.complete(ask())


@pytest.mark.parametrize(
    ("given", "source"),
    [
        ({}, "read from OPENAI_API_KEY"),
        ({"api_key_env": "HC_TEST_KEY"}, "read from HC_TEST_KEY"),
        ({"api_key": "sk-given-key-0123\r"}, "given as the model's api_key"),
    ],
)
async def test_a_key_with_the_end_of_its_line_is_refused_before_any_call(
    openai_server: OpenAIServer,
    make_model: MakeModel,
    monkeypatch: pytest.MonkeyPatch,
    given: dict[str, str],
    source: str,
) -> None:
    """A key read with the end of its line (a Windows .env's \r) is no header value:
    every call failed as 'cannot reach the model endpoint ...: Illegal header value',
    retried as if the endpoint were away. It is a ConfigError naming where the key
    came from, before any request."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env-key-0123456\r")
    monkeypatch.setenv("HC_TEST_KEY", "sk-variable-key-0123\n")
    model = make_model(**given)
    with pytest.raises(ConfigError) as caught:
        await model.complete(ask())
    assert caught.value.message == (
        f"model 'gpt-test': the API key {source} begins or ends with a space or a line "
        "break (read with the end of its line?): remove it"
    )
    assert openai_server.requests == []


async def test_a_key_pasted_with_a_character_no_header_carries_is_refused_before_any_call(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    """A key with a character that is not ASCII (pasted with a typographic '…') passed
    for one, and every call failed with httpx's UnicodeEncodeError (header
    'Authorization'), neither a ConfigError nor said of the key."""
    with pytest.raises(ConfigError) as caught:
        await make_model(api_key="sk-abc…").complete(ask())
    assert caught.value.message == (
        "model 'gpt-test': the API key given as the model's api_key holds a character that is "
        "not ASCII, which no HTTP header carries (pasted?): remove it"
    )
    assert openai_server.requests == []


NOT_FOUND = (
    'model "llama3" not found, try pulling it first with `ollama pull llama3`; none of the '
    "EMPTY slots match"
)


@pytest.mark.parametrize("placeholder", ["ollama", "EMPTY", "none", "unused"])
async def test_a_placeholder_key_is_not_masked_in_the_words_of_an_error(
    openai_server: OpenAIServer, make_model: MakeModel, placeholder: str
) -> None:
    # Local servers take any key: Ollama's docs use "ollama", vLLM's "EMPTY".
    openai_server.enqueue(error(404, NOT_FOUND))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(api_key=placeholder).complete(ask())
    assert NOT_FOUND in str(caught.value)
    assert "hidden" not in str(caught.value)


async def test_a_key_an_error_echoes_is_masked_wherever_it_stands(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    key = "sk-proj-abcdefghijklmnop"
    echoed = f"Incorrect API key provided: {key}. Keys look like {key}_v2 or x{key}"
    openai_server.enqueue(error(401, echoed))
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(api_key=key).complete(ask())
    shown = str(caught.value)
    assert "Incorrect API key provided: [api key hidden]." in shown
    # glued to other text, it is still the key: shown, it would be read off
    assert "[api key hidden]_v2 or x[api key hidden]" in shown
    assert caught.value.__cause__ is None  # the SDK's error, which holds it, is dropped


async def test_a_given_client_has_its_sdk_retries_turned_off(
    openai_server: OpenAIServer,
) -> None:
    openai_server.default = error(500)
    client = openai.AsyncOpenAI(api_key="sk-x", base_url=openai_server.base_url, max_retries=5)
    model = OpenAIModel("gpt-test", client=client, retry=RetryPolicy(attempts=1))

    with pytest.raises(ModelHTTPError):
        await model.complete(ask())
    await client.close()

    assert len(openai_server.requests) == 1


# --- errors and retries --------------------------------------------------------------


async def test_429_then_200_succeeds_after_exactly_two_requests(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(429, "slow down"), text("done"))

    response = await make_model().complete(ask())

    assert response.message.content == "done"
    assert len(openai_server.requests) == 2


async def test_a_429_without_retry_after_reports_the_limiters_cooldown_as_its_wait(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(429), text("ok"))
    model = make_model(limiter=AdaptiveLimiter(4, cooldown_s=0.3))
    events: list[Event] = []
    report = CallReport(Tracer(events.append, log=False), worker="w", run_id=None, turn=1)
    current_call.set(report)
    await model.complete(ask())
    [retrying] = events
    assert isinstance(retrying, ModelCallRetrying)
    first, second = openai_server.requests
    waited = second.at - first.at
    assert retrying.wait_s >= 0.3 * 0.9  # the cool-down, not the 10 ms backoff
    assert retrying.wait_s * 0.9 <= waited <= retrying.wait_s + 0.5
    assert report.retry_wait_s == retrying.wait_s


@pytest.mark.parametrize(
    "answer",
    [
        error(429, retry_after=0.3),
        error(429, retry_after_ms=300),
        # A 503, not a 429: the limiter's own cool-down after a 429 would wait 0.5s anyway.
        error(503, retry_after=0.3),
        # LiteLLM's proxy forwards the provider's header under its own names.
        error(503, headers={"llm_provider-retry-after": "0.3"}),
        error(503, headers={"llm_provider-retry-after-ms": "300"}),
    ],
    ids=["retry-after", "retry-after-ms", "503", "llm_provider-retry-after", "llm_provider-ms"],
)
async def test_retry_after_is_honoured_even_past_the_backoff_cap(
    openai_server: OpenAIServer, make_model: MakeModel, answer: Raw
) -> None:
    openai_server.enqueue(answer, text("done"))

    # fast() caps its own backoff at 0.05s; the endpoint's 0.3s must still be waited.
    response = await make_model().complete(ask())

    first, second = openai_server.requests
    assert response.message.content == "done"
    assert second.at - first.at >= 0.3


async def test_retry_after_ms_takes_precedence_over_retry_after(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(429, retry_after=5, retry_after_ms=200), text("done"))

    started = time.monotonic()
    await make_model().complete(ask())

    first, second = openai_server.requests
    assert second.at - first.at >= 0.2
    assert time.monotonic() - started < 5  # did not wait the 5s of Retry-After


async def test_the_endpoints_own_retry_after_wins_over_a_proxys_forwarded_one(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    headers = {"llm_provider-retry-after": "5", "llm_provider-retry-after-ms": "5000"}
    openai_server.enqueue(error(503, retry_after=0.2, headers=headers), text("done"))

    started = time.monotonic()
    await make_model().complete(ask())

    first, second = openai_server.requests
    assert second.at - first.at >= 0.2
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "answer",
    [
        Raw(200, content=b""),
        Raw(200, content=b"<html>502 Bad Gateway</html>", media_type="text/html"),
        Raw(200, content=b'{"id": "chatcmpl-1", "choi'),
        Raw(200, content=b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
    ],
    ids=["empty", "html", "cut-off", "nested-too-deep"],
)
async def test_a_200_whose_body_is_not_json_is_retried_like_a_5xx(
    openai_server: OpenAIServer, make_model: MakeModel, answer: Raw
) -> None:
    openai_server.enqueue(answer, text("done"))

    response = await make_model().complete(ask())

    assert response.message.content == "done"
    assert len(openai_server.requests) == 2


async def test_a_200_whose_body_is_not_json_raises_once_retries_are_spent(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = Raw(200, content=b"")

    with pytest.raises(ModelResponseError, match="not JSON") as caught:
        await make_model(retry=fast(attempts=2)).complete(ask())

    assert caught.value.retryable
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize("status", [408, 409, 500, 502, 503])
async def test_retryable_statuses_are_retried_up_to_attempts_then_raised(
    openai_server: OpenAIServer, make_model: MakeModel, status: int
) -> None:
    openai_server.default = error(status, "the engine is overloaded")

    with pytest.raises(ModelHTTPError) as caught:
        await make_model(retry=fast(attempts=3)).complete(ask())

    assert len(openai_server.requests) == 3
    assert caught.value.status == status
    assert caught.value.retryable
    assert caught.value.model == "gpt-test"
    assert caught.value.body["message"] == "the engine is overloaded"
    assert "the engine is overloaded" in str(caught.value)
    assert isinstance(caught.value.__cause__, openai.APIStatusError)


async def test_a_429_that_never_clears_raises_with_its_retry_after(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = error(429, retry_after=0.01)

    with pytest.raises(ModelHTTPError) as caught:
        await make_model(retry=fast(attempts=2)).complete(ask())

    assert len(openai_server.requests) == 2
    assert caught.value.status == 429
    assert caught.value.retry_after == pytest.approx(0.01)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
async def test_client_errors_are_not_retried(
    openai_server: OpenAIServer, make_model: MakeModel, status: int
) -> None:
    openai_server.default = error(status, f"no good ({status})")

    with pytest.raises(ModelHTTPError) as caught:
        await make_model(retry=fast(attempts=4)).complete(ask())

    assert len(openai_server.requests) == 1
    assert caught.value.status == status
    assert not caught.value.retryable
    assert caught.value.body["message"] == f"no good ({status})"


async def test_a_slow_answer_past_the_request_timeout_raises_model_timeout(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = text("too late", delay_s=1.0)
    model = make_model(timeout=30.0, retry=fast(attempts=2))
    events: list[Event] = []
    current_call.set(CallReport(Tracer(events.append, log=False), worker="w", run_id=None, turn=1))

    started = time.monotonic()
    with pytest.raises(ModelTimeout) as caught:
        await model.complete(ask(timeout=0.2))  # the request's timeout wins over the model's

    assert caught.value.timeout_s == 0.2
    # The HTTP client's wait for a byte, or the attempt's own limit: both end at 0.2 s.
    assert isinstance(caught.value.__cause__, openai.APITimeoutError | TimeoutError)
    # Retried once, per the policy: counted as the client sends them, since an attempt
    # cut off at 0.2 s may end before a busy server has read it.
    assert [e.status for e in events if isinstance(e, ModelCallRetrying)] == ["timeout"]
    assert len(openai_server.requests) <= 2
    assert time.monotonic() - started >= 2 * 0.2


async def test_a_slow_answer_is_retried_and_the_next_one_succeeds(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(text("too late", delay_s=1.5), text("in time"))

    # The limit bounds a whole attempt: room for one answered at once on a loaded machine.
    response = await make_model(timeout=0.5).complete(ask())

    assert response.message.content == "in time"
    assert len(openai_server.requests) == 2


async def test_an_answer_sent_slowly_past_the_timeout_raises_model_timeout(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    """The body comes in pieces 0.2 s apart (2 s in all): no wait for a byte passes
    the 0.6 s limit, the whole answer does."""
    openai_server.enqueue(Reply(content="slowly", chunk_delay_s=0.2))

    started = time.monotonic()
    with pytest.raises(ModelTimeout) as caught:
        await make_model(timeout=0.6, retry=fast(attempts=1)).complete(ask())

    assert caught.value.timeout_s == 0.6
    assert time.monotonic() - started < 1.8


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"message": "The server had an error.", "type": "server_error", "code": None}, 500),
        ({"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}, 429),
    ],
)
async def test_a_200_whose_body_is_an_error_of_a_retryable_kind_is_retried(
    openai_server: OpenAIServer, make_model: MakeModel, error: dict[str, Any], status: int
) -> None:
    openai_server.enqueue(Raw(200, body={"error": error}), text("ok"))
    model = make_model()

    assert (await model.complete(ask())).message.content == "ok"
    assert len(openai_server.requests) == 2
    assert model.limiter is not None
    assert model.limiter.throttled == (1 if status == 429 else 0)


async def test_a_refused_connection_raises_model_connection_error(make_model: MakeModel) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"

    with pytest.raises(ModelConnectionError) as caught:
        await make_model(base_url=base_url, retry=fast(attempts=2)).complete(ask())

    assert caught.value.base_url == base_url
    assert caught.value.retryable
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


async def test_a_connection_error_names_openais_endpoint_when_no_base_url_is_given() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("Connection refused", request=request)

    client = openai.AsyncOpenAI(
        api_key="sk-test", http_client=httpx.AsyncClient(transport=httpx.MockTransport(refuse))
    )
    model = OpenAIModel("gpt-4o-mini", client=client, retry=fast(attempts=1))

    with pytest.raises(ModelConnectionError) as caught:
        await model.complete(ask())
    assert "cannot reach the model endpoint (https://api.openai.com/v1)" in str(caught.value)


async def test_a_password_in_the_base_url_is_a_secret(make_model: MakeModel) -> None:
    """``http://user:PASSWORD@host/v1`` (a proxy's credentials): the error that names
    the endpoint, and anything else shown, masks the password as it masks a key."""
    base_url = f"http://proxy:Pr0xyPassw0rd@127.0.0.1:{closed_port()}/v1"

    with pytest.raises(ModelConnectionError) as caught:
        await make_model(base_url=base_url, retry=fast(attempts=1)).complete(ask())

    assert "Pr0xyPassw0rd" not in str(caught.value)
    assert "http://proxy:[password hidden]@127.0.0.1" in str(caught.value)


async def test_the_basic_credentials_a_base_url_makes_are_a_secret(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    """The HTTP client sends a URL's user and password as ``Authorization: Basic
    <base64>``: an endpoint that echoes the header showed them, encoded."""
    openai_server.default = lambda request: text(f"you sent {request.headers['authorization']}")
    base_url = openai_server.base_url.replace("http://", "http://proxy:Pr0xyPassw0rd@")
    answer = await make_model(base_url=base_url).complete(ask())
    sent = openai_server.requests[-1].headers["authorization"]
    assert sent == "Basic " + base64.b64encode(b"proxy:Pr0xyPassw0rd").decode()
    assert answer.message.content == "you sent Basic [password hidden]"


async def test_a_retry_after_past_the_deadline_stops_at_once(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.default = error(429, retry_after=5)
    policy = RetryPolicy(attempts=5, deadline_s=1.0, initial_wait_s=0.01, jitter_s=0)

    started = time.monotonic()
    with pytest.raises(ModelHTTPError) as caught:
        await make_model(retry=policy).complete(ask())

    assert caught.value.status == 429
    assert caught.value.retry_after == 5
    assert len(openai_server.requests) == 1
    assert time.monotonic() - started < 5  # it did not sit out the Retry-After
    assert isinstance(caught.value, RetryAfterPastDeadline)
    assert caught.value.deadline_left_s == pytest.approx(1.0, abs=0.5)
    assert re.search(r"asked to wait 5s, [01]\.\ds of the retry deadline left", str(caught.value))


async def test_a_retry_after_past_the_deadline_after_some_retries_says_what_was_left(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(error(503, retry_after=0.3), error(429, retry_after=300))
    policy = RetryPolicy(attempts=5, deadline_s=2.0, initial_wait_s=0.01, jitter_s=0)

    with pytest.raises(RetryAfterPastDeadline) as caught:
        await make_model(retry=policy).complete(ask())

    assert caught.value.status == 429
    assert caught.value.attempts == 2
    assert 1.0 < caught.value.deadline_left_s < 1.8
    assert "asked to wait 300s" in str(caught.value)
    assert isinstance(caught.value.__cause__, ModelHTTPError)


# --- the network guard -----------------------------------------------------------------


async def test_the_network_guard_stops_a_call_to_the_real_openai(
    no_real_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)  # so the host tried is OpenAI's own
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    model = OpenAIModel("gpt-4o-mini", retry=RetryPolicy(attempts=1))

    # The guard's error comes as it is, or (with some openai versions) as the connection error
    # the SDK makes of any exception its transport raises.
    with pytest.raises((RealNetworkUsed, ModelConnectionError)) as caught:
        await model.complete(ask())
    await model.client.close()

    chain: list[BaseException] = []
    error: BaseException | None = caught.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert any(isinstance(e, RealNetworkUsed) and "api.openai.com" in str(e) for e in chain)

    assert no_real_network
    assert all("api.openai.com" in host for host in no_real_network)
    # Recorded, the attempt would fail this test at teardown; it was expected here.
    no_real_network.clear()


# --- event loops: one model, used by several asyncio.run() in turn ----------------------


def test_one_model_serves_consecutive_event_loops(openai_server: OpenAIServer) -> None:
    # A client's connections belong to the loop they were made on: reused on the next
    # loop they failed every other run with "RuntimeError: Event loop is closed".
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=fast(attempts=1))
    openai_server.default = tool_calls(("get_weather", {"city": "Oslo"}))

    ended: list[asyncio.AbstractEventLoop] = []  # loops that have run, kept until the next
    loop_errors: list[dict[str, Any]] = []

    async def call() -> ModelResponse:
        asyncio.get_running_loop().set_exception_handler(lambda _, c: loop_errors.append(c))
        answer = await model.complete(ask(tools=(WEATHER,)))
        # The ended loop and its client go now, while this one runs: closing that
        # client must not be left to a task on this loop, which would fail.
        ended.clear()
        gc.collect()
        await asyncio.sleep(0.05)
        gc.collect()
        return answer

    answers = []
    for _ in range(4):
        loop = asyncio.new_event_loop()
        answers.append(loop.run_until_complete(call()))
        loop.close()
        ended.append(loop)

    assert [a.message.tool_calls[0].name for a in answers] == ["get_weather"] * 4
    assert len(openai_server.requests) == 4
    assert model.limiter is not None
    assert model.limiter.in_flight == 0
    assert loop_errors == []


def test_a_loops_connections_are_closed_as_it_ends(openai_server: OpenAIServer) -> None:
    # A loop's client was dropped unclosed: its keep-alive connection stayed open until
    # the garbage collector found it, with an 'unclosed transport' ResourceWarning (the
    # loop it could be closed on had ended). asyncio.run closes it as the loop ends.
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=fast(attempts=1))

    async def call() -> openai.AsyncOpenAI:
        await model.complete(ask())
        return model.client

    gc.collect()  # what earlier tests left
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        clients = [asyncio.run(call()), asyncio.run(call())]
        gc.collect()
    assert clients[0] is not clients[1]  # a client a loop
    assert all(client.is_closed() for client in clients)
    assert [str(w.message) for w in caught if w.category is ResourceWarning] == []


def test_a_given_client_is_kept_as_it_is(openai_server: OpenAIServer) -> None:
    client = openai.AsyncOpenAI(api_key="sk-x", base_url=openai_server.base_url)
    model = OpenAIModel("gpt-test", client=client, retry=fast(attempts=1))

    async def twice() -> list[ModelResponse]:
        answers = [await model.complete(ask()), await model.complete(ask())]
        assert model.client is model.client  # the same, retries off, on its loop
        await model.client.close()
        return answers

    assert [a.message.content for a in asyncio.run(twice())] == ["ok", "ok"]
    assert model.client.max_retries == 0
