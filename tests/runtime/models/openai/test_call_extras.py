"""What an endpoint sends with a tool call to have back with it: Gemini's thought
signature (``extra_content.google.thought_signature`` in its OpenAI-compatible API,
which refuses the next turn of a tool loop without it: HTTP 400 "Function call is
missing a thought_signature"). Through the real ``openai`` client, over real HTTP,
against the local test server, answered whole and streamed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import (
    AssistantMessage,
    ModelRequest,
    OpenAIModel,
    RetryPolicy,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from runtime.messages import with_distinct_ids
from runtime.models.cassette_keys import canonical
from runtime.models.openai.request import messages_out
from tests.support.openai_server import OpenAIServer, Raw

SIGNED = {"google": {"thought_signature": "Cs8BAdHtim9Q=="}}
CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "look", "arguments": '{"q": "bees"}'},
    "extra_content": SIGNED,
}


def whole() -> Raw:
    message = {"role": "assistant", "content": None, "tool_calls": [CALL]}
    return Raw(
        200, body={"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )


def streamed() -> Raw:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        sent = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return f"data: {json.dumps(sent)}\n\n"

    first = {**CALL, "index": 0, "function": {"name": "look", "arguments": '{"q": '}}
    rest = {"index": 0, "function": {"arguments": '"bees"}'}}
    body = (
        chunk({"role": "assistant", "tool_calls": [first]})
        + chunk({"tool_calls": [rest]})
        + chunk({}, "tool_calls")
        + "data: [DONE]\n\n"
    )
    return Raw(200, content=body.encode(), media_type="text/event-stream")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_calls_thought_signature_goes_back_with_it(
    openai_server: OpenAIServer, stream: bool
) -> None:
    openai_server.enqueue(streamed() if stream else whole())
    model = OpenAIModel("gemini-3-flash", base_url=openai_server.base_url,
                        retry=RetryPolicy(attempts=1))  # fmt: skip
    asked = ModelRequest(messages=(UserMessage(content="Find bees."),))
    try:
        if stream:
            answer = await model.stream(asked, lambda piece: None)
        else:
            answer = await model.complete(asked)
        (call,) = answer.message.tool_calls
        assert (call.id, call.name, json.loads(call.arguments)) == ("call_1", "look", {"q": "bees"})
        told = ToolMessage(tool_call_id=call.id, name="look", content="bees are insects")
        messages = (*asked.messages, answer.message, told)
        await model.complete(ModelRequest(messages=messages))
    finally:
        await model.client.close()
    sent = openai_server.requests[1].body["messages"][1]
    assert sent["tool_calls"][0]["extra_content"] == SIGNED


def test_a_call_without_one_sends_none() -> None:
    plain = AssistantMessage(tool_calls=(ToolCall(id="c", name="look", arguments="{}"),))
    (out,) = messages_out([plain], None)
    assert "extra_content" not in out["tool_calls"][0]


def test_a_call_without_one_is_keyed_in_cassettes_as_before() -> None:
    """A recorded cassette matches a request by a key of its messages: a call that has
    no extra_content keeps the key it had before calls could have one."""
    call = ToolCall(id="c", name="look", arguments="{}")
    signed = ToolCall(id="d", name="look", extra_content=json.dumps(SIGNED))
    messages = (UserMessage(content="Find bees."), AssistantMessage(tool_calls=(call, signed)))
    keyed = canonical(ModelRequest(messages=messages))["messages"][1]["tool_calls"]
    assert keyed == [
        {"id": "call_1", "name": "look", "arguments": "{}"},
        {"id": "call_2", "name": "look", "arguments": "{}", "extra_content": json.dumps(SIGNED)},
    ]


def test_a_call_whose_id_is_made_distinct_keeps_it() -> None:
    """Servers that number each turn's calls from call_0: the repeated id becomes
    another, the signature stays with its call."""
    earlier = (AssistantMessage(tool_calls=(ToolCall(id="call_0", name="look"),)),)
    again = ToolCall(id="call_0", name="look", extra_content=json.dumps(SIGNED))
    (renamed,) = with_distinct_ids(AssistantMessage(tool_calls=(again,)), earlier, 2).tool_calls
    assert (renamed.id, renamed.extra_content) == ("call_0_t2", json.dumps(SIGNED))
