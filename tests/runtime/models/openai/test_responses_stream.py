"""``OpenAIResponsesModel.stream`` through the real ``openai`` client, over real HTTP,
against the local server's typed events: text as it comes, the whole response (calls,
reasoning, usage) from the last event, and retries only before any text, as a
streamed chat completion is."""

from __future__ import annotations

import json
from typing import Any

import pytest

from honeycomb import Executor, Role
from honeycomb.events import TextDelta
from runtime import (
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    RetryPolicy,
    StreamInterrupted,
    UserMessage,
)
from runtime.models.openai.responses import OpenAIResponsesModel
from tests.support.openai_server import OpenAIServer, Raw, Reply

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
FAST = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0)
SERVER_ERROR = {"type": "error", "code": "server_error", "message": "The server had an error."}


def model(server: OpenAIServer) -> OpenAIResponsesModel:
    return OpenAIResponsesModel("gpt-test", base_url=server.base_url, retry=FAST)


def events(*sent: dict[str, Any]) -> Raw:
    """A stream of these events, as the Responses API names them."""
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in sent)
    return Raw(200, content=body.encode(), media_type="text/event-stream")


def delta(text: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "item_id": "msg_1", "delta": text}


async def test_text_streams_in_pieces_and_the_last_event_is_the_answer(
    openai_server: OpenAIServer,
) -> None:
    call = ("call_1", "look", '{"q": "bees"}')
    openai_server.enqueue(
        Reply(content="Let me look that up.", tool_calls=(call,), reasoning="think first",
              prompt_tokens=31, completion_tokens=9, reasoning_tokens=4, cached_tokens=8)
    )  # fmt: skip
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["Let ", "me ", "look ", "that ", "up."]
    assert response.message.content == "Let me look that up."
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [call]
    assert response.message.reasoning == "think first"
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (31, 9, 4)
    assert usage.cached_input_tokens == 8
    assert response.finish_reason == "tool_calls"
    [sent] = openai_server.requests
    assert sent.path.endswith("/responses")
    assert sent.body["stream"] is True
    assert "stream_options" not in sent.body  # a chat completions parameter


async def test_an_answer_cut_at_its_output_limit_says_so(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(Reply(content="A long answer", finish_reason="length"))
    response = await model(openai_server).stream(REQUEST, lambda text: None)
    assert response.finish_reason == "length"
    assert response.message.content == "A long answer"


@pytest.mark.parametrize(("cut_after", "cut"), [(0, "reset"), (1, "reset"), (1, "end")])
async def test_a_stream_cut_before_any_text_is_retried(
    openai_server: OpenAIServer, cut_after: int, cut: str
) -> None:
    openai_server.enqueue(
        Reply(content="lost", cut_after=cut_after, cut=cut), Reply(content="kept")
    )
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert response.message.content == "kept"
    assert shown == ["kept"]
    assert len(openai_server.requests) == 2


@pytest.mark.parametrize("cut", ["reset", "end"])
async def test_a_stream_cut_after_text_is_interrupted_and_not_retried(
    openai_server: OpenAIServer, cut: str
) -> None:
    # Events: created, then "half ", "of ": cut before the third piece of text.
    openai_server.enqueue(Reply(content="half of an answer", cut_after=3, cut=cut))
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["half ", "of "]
    assert caught.value.shown_chars == len("half of ")
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1
    if cut == "end":
        assert "ended before its answer did" in caught.value.reason


async def test_an_error_event_of_a_retryable_kind_before_any_text_is_retried(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(events(SERVER_ERROR), Reply(content="kept"))
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert response.message.content == "kept"
    assert shown == ["kept"]
    assert len(openai_server.requests) == 2


async def test_an_error_event_after_text_ends_the_stream_as_interrupted(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(events(delta("Half "), SERVER_ERROR), Reply(content="again"))
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["Half "]
    cause = caught.value.__cause__
    assert isinstance(cause, ModelHTTPError)
    assert cause.status == 500
    assert len(openai_server.requests) == 1


async def test_a_failed_response_is_its_error(openai_server: OpenAIServer) -> None:
    failed = {"id": "resp_1", "status": "failed", "output": [],
              "error": {"code": "invalid_prompt", "message": "the prompt was refused"}}  # fmt: skip
    openai_server.enqueue(events({"type": "response.failed", "response": failed}))
    with pytest.raises(ModelResponseError) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "the prompt was refused" in str(caught.value)
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1


async def test_a_malformed_event_names_the_event_and_field(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(events(delta("fine "), {**delta("x"), "delta": 7}))
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "event 2.delta" in str(caught.value.__cause__)
    assert "gpt-test" in str(caught.value.__cause__)


async def test_a_whole_answer_to_a_streamed_request_is_shown_in_one_piece(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(Reply(content="all at once", ignore_stream=True))
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["all at once"]
    assert response.message.content == "all at once"


async def test_a_run_on_the_responses_api_streams_its_workers_text(
    openai_server: OpenAIServer,
) -> None:
    openai_server.default = Reply(content="bees dance to say where")
    executor = Executor([Role(name="w")], model(openai_server), aggregator="concat")
    async with executor.stream("t", subtasks=[("w", "bees")]) as run:
        deltas = [e.text async for e in run if isinstance(e, TextDelta) and e.worker == "s1"]
    assert run.result is not None
    assert run.result.status == "ok"
    assert deltas == ["bees ", "dance ", "to ", "say ", "where"]


def ended(**response: Any) -> dict[str, Any]:
    """The last event, its response as a proxy that leaves its output out sends it."""
    return {"type": "response.completed", "response": {"status": "completed", **response}}


async def test_a_last_event_without_output_is_given_the_items_the_stream_sent(
    openai_server: OpenAIServer,
) -> None:
    """Gateways that put another API behind the Responses API (and ChatGPT's own, to
    some clients) end the stream with ``output: []``, its items sent whole in
    ``response.output_item.done`` events: the answer is those, not an empty one."""
    said = {"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "Let me look."}]}  # fmt: skip
    call = {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": "{}"}
    openai_server.enqueue(
        events(
            delta("Let me look."),
            {"type": "response.output_item.done", "output_index": 1, "item": call},
            {"type": "response.output_item.done", "output_index": 0, "item": said},
            ended(output=[], usage={"input_tokens": 12, "output_tokens": 5}),
        )
    )
    response = await model(openai_server).stream(REQUEST, lambda piece: None)
    assert response.message.content == "Let me look."
    assert [(c.id, c.name) for c in response.message.tool_calls] == [("call_1", "look")]
    assert (response.finish_reason, response.usage.input_tokens) == ("tool_calls", 12)


async def test_a_last_event_without_output_or_items_is_the_text_streamed(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(events(delta("Hello "), delta("there."), ended()))
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert response.message.content == "".join(shown) == "Hello there."
    assert response.usage.output_tokens > 0  # none reported: the estimate
