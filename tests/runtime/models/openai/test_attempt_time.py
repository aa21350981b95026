"""What an attempt's time limit counts: the endpoint's time, from the request sent to
the answer's last byte, not the time this process takes to make its HTTP client (its
TLS context, which a busy machine takes a good part of a second over). Through the
real ``openai`` client, over real HTTP, against the local test server."""

from __future__ import annotations

import time

import openai

from runtime import ModelRequest, OpenAIEmbeddings, OpenAIModel, RetryPolicy, UserMessage
from tests.support.openai_server import OpenAIServer

MAKING_S = 0.3
"""How long making a client takes here: past the attempts' time limit."""
LIMIT_S = 0.2


class SlowToMake(OpenAIModel):
    """A model whose client takes :data:`MAKING_S` to make, as on a loaded machine."""

    def _new_client(self) -> openai.AsyncOpenAI:
        time.sleep(MAKING_S)
        return super()._new_client()


async def test_making_the_client_is_not_counted_in_the_first_attempts_time(
    openai_server: OpenAIServer,
) -> None:
    request = ModelRequest(messages=(UserMessage(content="hi"),), timeout=LIMIT_S)
    once = RetryPolicy(attempts=1)
    streaming = SlowToMake("gpt-test", base_url=openai_server.base_url, retry=once)
    oneshot = SlowToMake("gpt-test", base_url=openai_server.base_url, retry=once)
    try:
        answer = await oneshot.complete(request)
        streamed = await streaming.stream(request, lambda text: None)
    finally:
        await oneshot.client.close()
        await streaming.client.close()
    assert answer.message.content == "ok"
    assert streamed.message.content == "ok"


async def test_nor_in_an_embeddings_call(openai_server: OpenAIServer) -> None:
    embeddings = OpenAIEmbeddings(
        "embed-small",
        base_url=openai_server.base_url,
        timeout=LIMIT_S,
        retry=RetryPolicy(attempts=1),
    )
    embeddings.endpoint = SlowToMake(
        "embed-small",
        base_url=openai_server.base_url,
        timeout=LIMIT_S,
        retry=RetryPolicy(attempts=1),
    )
    try:
        [vector] = await embeddings.embed(["a car"])
    finally:
        await embeddings.endpoint.client.close()
    assert len(vector) > 0
