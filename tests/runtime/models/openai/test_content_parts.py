"""An answer whose content is a list of typed parts, as Mistral's reasoning models
(Magistral, Medium 3.5) send it: its ``text`` parts are the answer's text, its
``thinking`` parts its reasoning, answered whole or streamed (every call of such a
model failed as malformed before). Through the real ``openai`` client, over real HTTP,
against the local test server. And an endpoint that refuses an assistant message's
``reasoning_content`` (Mistral's API does) is sent none from then on."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import (
    AssistantMessage,
    ModelHTTPError,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    UserMessage,
)
from tests.support.openai_server import Behaviour, OpenAIServer, Raw, RecordedRequest, text

THINKING = {"type": "thinking", "thinking": [{"type": "text", "text": "Bees are insects."}]}


def mistral_reasoning(stream: bool) -> Raw:
    """A reasoning answer of Mistral's (Magistral, Medium 3.5): its content a list of
    typed parts, the thinking then the text, whole or in pieces."""
    said = {"type": "text", "text": "They are insects."}
    if not stream:
        message = {"role": "assistant", "content": [THINKING, said]}
        return Raw(
            200, body={"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
        )

    def chunk(content: Any, finish: str | None = None) -> str:
        delta = {"content": content} if content is not None else {}
        sent = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(sent)}\n\n"

    body = (
        chunk([THINKING])
        + chunk([{"type": "text", "text": "They are "}])
        + chunk("insects.")  # a plain string piece, as text parts may also come
        + chunk(None, "stop")
        + "data: [DONE]\n\n"
    )
    return Raw(200, content=body.encode(), media_type="text/event-stream")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_content_in_typed_parts_is_the_text_and_the_thinking(
    openai_server: OpenAIServer, stream: bool
) -> None:
    openai_server.enqueue(mistral_reasoning(stream))
    model = OpenAIModel("magistral-medium-latest", base_url=openai_server.base_url,
                        retry=RetryPolicy(attempts=1))  # fmt: skip
    asked = ModelRequest(messages=(UserMessage(content="What are bees?"),))
    shown: list[str] = []
    try:
        if stream:
            answer = await model.stream(asked, shown.append)
        else:
            answer = await model.complete(asked)
    finally:
        await model.client.close()
    assert answer.message.content == "They are insects."
    assert answer.message.reasoning == "Bees are insects."
    assert "".join(shown) == ("They are insects." if stream else "")


EXTRA_FORBIDDEN = {
    "object": "error",
    "message": {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "messages", 1, "assistant", "reasoning_content"],
                "msg": "Extra inputs are not permitted",
            }
        ]
    },
    "type": "invalid_request_error",
}
"""Mistral's 422 for an assistant message sent back with its reasoning."""


def strict(request: RecordedRequest) -> Behaviour:
    """Refuses any assistant message with reasoning_content, as Mistral's API does."""
    if any("reasoning_content" in m for m in request.body["messages"]):
        return Raw(422, body=EXTRA_FORBIDDEN)
    return text("ok")


async def test_an_endpoint_that_refuses_reasoning_content_is_sent_none(
    openai_server: OpenAIServer,
) -> None:
    """A tool loop on a Mistral reasoning model: its thinking is kept, and goes back
    with its message until the endpoint refuses the field; then never again."""
    openai_server.default = strict
    model = OpenAIModel("magistral-medium-latest", base_url=openai_server.base_url,
                        retry=RetryPolicy(attempts=1))  # fmt: skip
    thought = AssistantMessage(content="Let me think.", reasoning="Bees are insects.")
    asked = ModelRequest(messages=(UserMessage(content="Bees?"), thought,
                                   UserMessage(content="And?")))  # fmt: skip
    try:
        first = await model.complete(asked)
        later = await model.complete(asked)
    finally:
        await model.client.close()
    assert (first.message.content, later.message.content) == ("ok", "ok")
    sent = [
        any("reasoning_content" in m for m in r.body["messages"]) for r in openai_server.requests
    ]
    assert sent == [True, False, False]  # refused once, then sent without it
    assert not model.sends_reasoning


async def test_a_refusal_that_wants_reasoning_content_keeps_sending_it(
    openai_server: OpenAIServer,
) -> None:
    """DeepSeek's 400 when a message comes back without its reasoning says the field's
    name too: it is no refusal of the field."""
    missing = "Missing `reasoning_content` field in the assistant message at message index 1"
    openai_server.enqueue(Raw(400, message=missing))
    model = OpenAIModel("deepseek-reasoner", base_url=openai_server.base_url,
                        retry=RetryPolicy(attempts=1))  # fmt: skip
    try:
        with pytest.raises(ModelHTTPError):
            await model.complete(ModelRequest(messages=(UserMessage(content="Bees?"),)))
    finally:
        await model.client.close()
    assert model.sends_reasoning
    assert len(openai_server.requests) == 1
