"""A refusal is the answer's text in both adapters: OpenAI's chat completions send it
in ``message.refusal`` (streamed as ``delta.refusal``) with no content, the Responses
API as a ``refusal`` part of its message. Through the real ``openai`` client, over
real HTTP, against the local test server."""

from __future__ import annotations

import json
from typing import Any

from runtime import ModelRequest, OpenAIModel, RetryPolicy, UserMessage
from runtime.models.openai.responses import OpenAIResponsesModel
from tests.support.openai_server import OpenAIServer, Raw, Reply, _completion, _response

REFUSAL = "I'm sorry, I cannot help with that."
REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
ONCE = RetryPolicy(attempts=1)


def events(*deltas: dict[str, Any]) -> bytes:
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


async def test_a_chat_refusal_is_the_answers_text_whole_or_streamed(
    openai_server: OpenAIServer,
) -> None:
    body = _completion(Reply(content=None), "m", 1)
    body["choices"][0]["message"]["refusal"] = REFUSAL
    pieces = [{"role": "assistant", "content": None, "refusal": ""}]
    pieces += [{"refusal": word} for word in ("I'm sorry, ", "I cannot ", "help with that.")]
    openai_server.enqueue(
        Raw(200, body=body), Raw(200, content=events(*pieces), media_type="text/event-stream")
    )
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=ONCE)
    shown: list[str] = []
    try:
        whole = await model.complete(REQUEST)
        streamed = await model.stream(REQUEST, shown.append)
    finally:
        await model.client.close()
    assert whole.message.content == REFUSAL
    assert streamed.message.content == REFUSAL
    assert "".join(shown) == REFUSAL


async def test_a_responses_refusal_is_the_answers_text_too(openai_server: OpenAIServer) -> None:
    body = _response(Reply(content="x"), "m", 1)
    body["output"][0]["content"] = [{"type": "refusal", "refusal": REFUSAL}]
    openai_server.enqueue(Raw(200, body=body))
    model = OpenAIResponsesModel("m", base_url=openai_server.base_url, retry=ONCE)
    try:
        answer = await model.complete(REQUEST)
    finally:
        await model.client.close()
    assert answer.message.content == REFUSAL
