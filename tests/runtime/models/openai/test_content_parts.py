"""An answer whose content is a list of typed parts, as Mistral's reasoning models
(Magistral, Medium 3.5) send it: its ``text`` parts are the answer's text, its
``thinking`` parts its reasoning, answered whole or streamed (every call of such a
model failed as malformed before). Through the real ``openai`` client, over real HTTP,
against the local test server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import ModelRequest, OpenAIModel, RetryPolicy, UserMessage
from tests.support.openai_server import OpenAIServer, Raw

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
