"""An error a server sends in a stream as an error object, unwrapped (``"object":
"error"``, its ``message``, ``type`` and ``code`` at the top: the shape of vLLM's error
response) is that error, not a stream cut short: a 400 (a prompt past the context) fails
the call with the server's words, a 500 is retried. So is an answer that ends in an
error (``finish_reason: error``, and the error beside the choices or in the choice, as
OpenRouter ends one its provider broke off): never an answer. Through the real
``openai`` client, over real HTTP, against the local test server."""

from __future__ import annotations

import json

import pytest

from runtime import (
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    OpenAIModel,
    OpenAIResponsesModel,
    RetryPolicy,
    UserMessage,
)
from runtime.errors import StreamInterrupted
from tests.support.openai_server import OpenAIServer, Raw, Reply, text

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
TWICE = RetryPolicy(attempts=2, initial_wait_s=0, jitter_s=0)
TOO_LONG = "This model's maximum context length is 4096 tokens"


def stream_with(error: dict[str, object], *, said: str = "") -> Raw:
    """A stream of the role, ``said`` (if any), then ``error``."""
    role = {"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": None}]}
    words = {"choices": [{"index": 0, "delta": {"content": said}, "finish_reason": None}]}
    chunks = [role, words] if said else [role]
    events = [f"data: {json.dumps(c)}" for c in [*chunks, error]] + ["data: [DONE]"]
    return Raw(200, content="\n\n".join([*events, ""]).encode(), media_type="text/event-stream")


BROKEN_OFF = {
    "error": {"code": "server_error", "message": "Provider disconnected unexpectedly"},
    "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
}
"""How OpenRouter ends a stream its provider broke off: the error beside the choices."""


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


async def test_a_stream_that_ends_in_an_error_beside_its_choices_is_no_answer(
    openai_server: OpenAIServer,
) -> None:
    """Before any text it is retried; after some, the call is interrupted (and not
    retried: the text shown is not shown twice)."""
    openai_server.enqueue(stream_with(BROKEN_OFF), text("whole"))
    openai_server.enqueue(stream_with(BROKEN_OFF, said="The answer is"))
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    shown: list[str] = []
    try:
        answer = await model.stream(REQUEST, lambda piece: None)
        with pytest.raises(StreamInterrupted) as caught:
            await model.stream(REQUEST, shown.append)
    finally:
        await model.client.close()
    assert answer.message.content == "whole"
    assert shown == ["The answer is"]
    assert "Provider disconnected unexpectedly" in str(caught.value)
    assert len(openai_server.requests) == 3


@pytest.mark.parametrize(
    ("finish", "error"),
    [("error", {"code": 502, "message": "Provider returned error"}), ("error", None),
     ("abort", None)],
    ids=["named", "unnamed", "aborted"],
)  # fmt: skip
async def test_an_answer_whose_choice_ends_in_an_error_is_retried(
    openai_server: OpenAIServer, finish: str, error: dict[str, object] | None
) -> None:
    """OpenRouter's provider failed mid-answer; vLLM's engine aborted the request (a
    shutdown, a scale-down), saying ``abort`` as if the answer were whole."""
    message = {"role": "assistant", "content": "half an ans"}
    choice = {"index": 0, "message": message, "finish_reason": finish, "error": error}
    failed = Raw(200, body={"object": "chat.completion", "choices": [choice]})
    openai_server.enqueue(failed, text("whole"), failed, failed)
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    try:
        answer = await model.complete(REQUEST)
        with pytest.raises((ModelHTTPError, ModelResponseError)) as caught:
            await model.complete(REQUEST)
    finally:
        await model.client.close()
    assert answer.message.content == "whole"
    said = "ended its answer with an error" if error else f"unfinished (finish_reason {finish!r})"
    assert said in str(caught.value)
    assert len(openai_server.requests) == 4


async def test_a_stream_its_server_aborted_after_text_is_interrupted(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(Reply(content="The answer is", finish_reason="abort"))
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    shown: list[str] = []
    try:
        with pytest.raises(StreamInterrupted) as caught:
            await model.stream(REQUEST, shown.append)
    finally:
        await model.client.close()
    assert "".join(shown) == "The answer is"
    assert "finish_reason 'abort'" in str(caught.value)
    assert len(openai_server.requests) == 1


@pytest.mark.parametrize("empty", [{}, ""], ids=["object", "text"])
async def test_an_empty_error_beside_an_answer_leaves_it_the_answer(
    openai_server: OpenAIServer, empty: object
) -> None:
    message = {"role": "assistant", "content": "whole"}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "error": empty}
    openai_server.enqueue(Raw(200, body=body))
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=TWICE)
    try:
        answer = await model.complete(REQUEST)
    finally:
        await model.client.close()
    assert answer.message.content == "whole"


@pytest.mark.parametrize("streamed", [False, True], ids=["one-shot", "streamed"])
@pytest.mark.parametrize("api", ["chat", "responses"])
async def test_json_that_is_no_answer_says_what_came(
    openai_server: OpenAIServer, api: str, streamed: bool
) -> None:
    """A 200 whose JSON is neither an answer nor an error (a server still loading its
    model, a proxy's own shape): the error shows it, not only that no choices came."""
    openai_server.enqueue(Raw(200, body={"detail": "Model is loading"}))
    kind = OpenAIModel if api == "chat" else OpenAIResponsesModel
    model = kind("m", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1))
    call = model.stream(REQUEST, lambda piece: None) if streamed else model.complete(REQUEST)
    try:
        with pytest.raises(ModelResponseError) as caught:
            await call
    finally:
        await model.client.close()
    assert "'detail': 'Model is loading'" in str(caught.value)
