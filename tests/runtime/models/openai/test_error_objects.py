"""An error a server sends in a stream as an error object, unwrapped (``"object":
"error"``, its ``message``, ``type`` and ``code`` at the top: the shape of vLLM's error
response) is that error, not a stream cut short: a 400 (a prompt past the context) fails
the call with the server's words, a 500 is retried. Through the real ``openai``
client, over real HTTP, against the local test server."""

from __future__ import annotations

import json

import pytest

from runtime import (
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    OpenAIModel,
    RetryPolicy,
    UserMessage,
)
from tests.support.openai_server import OpenAIServer, Raw, text

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
TWICE = RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0)
TOO_LONG = "This model's maximum context length is 4096 tokens"


def stream_with(error: dict[str, object]) -> Raw:
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    events = [f"data: {json.dumps(role)}", f"data: {json.dumps(error)}", "data: [DONE]"]
    return Raw(200, content="\n\n".join([*events, ""]).encode(), media_type="text/event-stream")


def error_object(message: str, code: int) -> dict[str, object]:
    kind = "BadRequestError" if code == 400 else "InternalServerError"
    return {"object": "error", "message": message, "type": kind, "param": None, "code": code}


async def test_a_streamed_error_object_is_the_servers_error(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(stream_with(error_object(TOO_LONG, 400)))
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    try:
        with pytest.raises(ModelResponseError) as caught:
            await model.stream(REQUEST, lambda piece: None)
    finally:
        await model.client.close()
    assert TOO_LONG in str(caught.value)
    assert len(openai_server.requests) == 1  # the request's own fault: not tried again


async def test_a_streamed_server_error_object_is_retried(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(stream_with(error_object("engine dead", 500)), text("ok"))
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    try:
        answer = await model.stream(REQUEST, lambda piece: None)
        dead = stream_with(error_object("engine dead", 500))
        openai_server.enqueue(dead, dead)
        with pytest.raises(ModelHTTPError) as caught:
            await model.stream(REQUEST, lambda piece: None)
    finally:
        await model.client.close()
    assert answer.message.content == "ok"
    assert caught.value.status == 500
    assert "engine dead" in str(caught.value)
