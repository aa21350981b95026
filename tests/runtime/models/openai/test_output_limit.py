"""A request's output limit (``ModelRequest.max_output_tokens``) on the wire: the
chat adapter sends it as ``max_tokens`` to a compatible server and as
``max_completion_tokens`` to OpenAI's own API (or as the name the model's settings
use), the Responses adapter as ``max_output_tokens``; a lower limit in the settings
stays."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from runtime import ModelRequest, OpenAIModel, OpenAIResponsesModel, RetryPolicy, UserMessage
from runtime.models.layers.cost_cap import prompt_tokens
from tests.support.openai_server import OpenAIServer

ONCE = RetryPolicy(attempts=1)


def ask(limit: int | None) -> ModelRequest:
    return ModelRequest(messages=(UserMessage(content="hi"),), max_output_tokens=limit)


@pytest.mark.parametrize(
    ("settings", "limit", "sent"),
    [
        ({}, 300, {"max_tokens": 300}),
        ({}, None, {}),
        ({"max_tokens": 100}, 300, {"max_tokens": 100}),  # the settings' lower one stays
        ({"max_tokens": 900}, 300, {"max_tokens": 300}),
        ({"max_completion_tokens": 900}, 300, {"max_completion_tokens": 300}),
    ],
)
async def test_a_compatible_server_is_sent_max_tokens(
    openai_server: OpenAIServer, settings: dict[str, Any], limit: int | None, sent: dict[str, int]
) -> None:
    model = OpenAIModel("gpt-test", base_url=openai_server.base_url, retry=ONCE, settings=settings)
    await model.complete(ask(limit))
    await model.client.close()
    body = openai_server.requests[-1].body
    assert {k: v for k, v in body.items() if k.startswith("max_")} == sent


class ToTestServer(httpx.AsyncBaseTransport):
    """Sends what is asked of any host to the test server, over HTTP."""

    def __init__(self, server: OpenAIServer) -> None:
        self.port = server.port
        self.inner = httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_openais_own_api_is_sent_max_completion_tokens(openai_server: OpenAIServer) -> None:
    # A client of OpenAI's own API (whose requests the transport takes to the test server).
    transport = httpx.AsyncClient(transport=ToTestServer(openai_server))
    client = openai.AsyncOpenAI(api_key="sk-test", http_client=transport)
    model = OpenAIModel("gpt-test", client=client, retry=ONCE)
    assert model.base_url is None
    await model.complete(ask(300))
    await client.close()
    body = openai_server.requests[-1].body
    assert body["max_completion_tokens"] == 300
    assert "max_tokens" not in body


async def test_the_responses_api_is_sent_max_output_tokens(openai_server: OpenAIServer) -> None:
    model = OpenAIResponsesModel(
        "gpt-test", base_url=openai_server.base_url, retry=ONCE,
        settings={"max_output_tokens": 4000},
    )  # fmt: skip
    await model.complete(ask(300))
    await model.client.close()
    assert openai_server.requests[-1].body["max_output_tokens"] == 300


@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_a_model_that_says_its_context_asks_for_no_more_than_it_leaves_the_prompt(
    openai_server: OpenAIServer, api: str
) -> None:
    """A server refuses a request whose prompt and output limit together pass its
    context (vLLM's max_model_len): a planner's output limit (9,604 tokens for a few
    subtasks) on a model of 4,096 was refused whatever the prompt. A model that says
    its context asks for what the context leaves the prompt, by the token estimate; one
    that does not says nothing of it."""
    asked = (UserMessage(content="Plan it. " * 50),)
    request = ModelRequest(messages=asked, max_output_tokens=9604)
    key = "max_tokens" if api == "chat" else "max_output_tokens"
    for context in (4096, None):
        adapter = OpenAIModel if api == "chat" else OpenAIResponsesModel
        model = adapter("llama3.1", base_url=openai_server.base_url, context_tokens=context)
        await model.complete(request)
        await model.client.close()
    said, unsaid = (r.body[key] for r in openai_server.requests)
    assert said == 4096 - prompt_tokens(request)
    assert unsaid == 9604
