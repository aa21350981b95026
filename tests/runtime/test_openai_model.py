"""``OpenAIModel`` through the real ``openai`` client, over real HTTP, against the local
OpenAI-compatible server in :mod:`tests.support.openai_server`."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import openai
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
    OutputSchema,
    RetryPolicy,
    SystemMessage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    Usage,
    UserMessage,
)
from tests.conftest import RealNetworkUsed
from tests.support.openai_server import OpenAIServer, Raw, Reply, error, text, tool_calls

MakeModel = Callable[..., OpenAIModel]

WEATHER = ToolSchema.of(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
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
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "temperature": 0.2,
        "seed": 7,
    }


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
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
    ],
)
async def test_tool_choice_forms(
    openai_server: OpenAIServer, make_model: MakeModel, choice: str, sent: Any
) -> None:
    await make_model().complete(ask(tools=(WEATHER,), tool_choice=choice))

    body = openai_server.requests[0].body
    assert body["tool_choice"] == sent
    assert body["parallel_tool_calls"] is True


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

    await make_model().complete(ask(output=OutputSchema.of("count", schema)))

    sent = openai_server.requests[0].body["response_format"]["json_schema"]
    assert sent == {"name": "count", "schema": schema, "strict": True}


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


@pytest.mark.parametrize(
    "answer",
    [error(429, retry_after=0.3), error(429, retry_after_ms=300)],
    ids=["retry-after", "retry-after-ms"],
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

    started = time.monotonic()
    with pytest.raises(ModelTimeout) as caught:
        await model.complete(ask(timeout=0.2))  # the request's timeout wins over the model's

    assert caught.value.timeout_s == 0.2
    assert isinstance(caught.value.__cause__, openai.APITimeoutError)
    assert len(openai_server.requests) == 2  # retried once, per the policy
    assert time.monotonic() - started >= 2 * 0.2


async def test_a_slow_answer_is_retried_and_the_next_one_succeeds(
    openai_server: OpenAIServer, make_model: MakeModel
) -> None:
    openai_server.enqueue(text("too late", delay_s=1.0), text("in time"))

    response = await make_model(timeout=0.2).complete(ask())

    assert response.message.content == "in time"
    assert len(openai_server.requests) == 2


async def test_a_refused_connection_raises_model_connection_error(make_model: MakeModel) -> None:
    base_url = f"http://127.0.0.1:{closed_port()}/v1"

    with pytest.raises(ModelConnectionError) as caught:
        await make_model(base_url=base_url, retry=fast(attempts=2)).complete(ask())

    assert caught.value.base_url == base_url
    assert caught.value.retryable
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


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


# --- the network guard -----------------------------------------------------------------


async def test_the_network_guard_stops_a_call_to_the_real_openai(
    no_real_network: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)  # so the host tried is OpenAI's own
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    model = OpenAIModel("gpt-4o-mini", retry=RetryPolicy(attempts=1))

    with pytest.raises(RealNetworkUsed, match=r"api\.openai\.com"):
        await model.complete(ask())
    await model.client.close()

    assert no_real_network
    assert all("api.openai.com" in host for host in no_real_network)
    # Recorded, the attempt would fail this test at teardown; it was expected here.
    no_real_network.clear()
