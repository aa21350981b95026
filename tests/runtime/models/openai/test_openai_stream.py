"""``OpenAIModel.stream`` through the real ``openai`` client, over real HTTP, against
the local server's server-sent events: text as it comes, tool calls assembled from
interleaved pieces, usage from the last chunk, and retries only before any text."""

from __future__ import annotations

import json
import threading

import pytest

from runtime import (
    ModelRequest,
    ModelResponseError,
    OpenAIModel,
    RetryPolicy,
    StreamInterrupted,
    Tracer,
    UserMessage,
)
from runtime.events import Event, TextDelta
from tests.support.openai_server import OpenAIServer, Raw, Reply, error, tool_calls
from workers import AgentLoop

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
FAST = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0)


def model(server: OpenAIServer, retry: RetryPolicy = FAST) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.base_url, retry=retry)


async def test_text_streams_in_pieces_with_usage_from_the_last_chunk(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(
        Reply(content="The answer, as it is written.", reasoning="think first",
              prompt_tokens=31, completion_tokens=9, reasoning_tokens=4)
    )  # fmt: skip
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["The ", "answer, ", "as ", "it ", "is ", "written."]
    assert response.message.content == "The answer, as it is written."
    assert response.message.reasoning == "think first"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (31, 9)
    assert response.usage.reasoning_tokens == 4
    assert response.finish_reason == "stop"
    [sent] = openai_server.requests
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}


async def test_interleaved_tool_calls_are_assembled_by_index(openai_server: OpenAIServer) -> None:
    long = {"city": "Lisbon", "days": 3, "note": "a long argument, sent in many pieces"}
    openai_server.enqueue(
        tool_calls(("weather", long), ("guide", {"q": "museums"}), ("sum", "{}"), content="On it.")
    )
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    calls = response.message.tool_calls
    assert [(c.id, c.name) for c in calls] == [
        ("call_0", "weather"), ("call_1", "guide"), ("call_2", "sum"),
    ]  # fmt: skip
    assert json.loads(calls[0].arguments) == long
    assert json.loads(calls[1].arguments) == {"q": "museums"}
    assert calls[2].arguments == "{}"
    assert response.finish_reason == "tool_calls"
    assert "".join(shown) == "On it."


async def test_text_is_shown_as_it_arrives_not_when_the_answer_ends(
    openai_server: OpenAIServer,
) -> None:
    """The server sends the role and the first word, then holds the rest of the answer
    back until the listener has been shown that word: a model that showed text only
    once the answer ended would never be sent its end."""
    shown_first = threading.Event()
    openai_server.enqueue(
        Reply(content="one two three four five six", hold_after=2, hold_until=shown_first)
    )
    shown: list[str] = []

    def show(text: str) -> None:
        shown.append(text)
        shown_first.set()

    await model(openai_server).stream(REQUEST, show)
    assert shown == ["one ", "two ", "three ", "four ", "five ", "six"]


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


async def test_a_stream_cut_after_text_fails_clearly_and_is_not_retried(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(Reply(content="half of an answer", cut_after=3), Reply(content="again"))
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["half ", "of "]
    assert caught.value.shown_chars == len("half of ")
    assert "the stream broke off" in caught.value.reason
    assert "gpt-test" in str(caught.value)
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1


async def test_a_stream_that_ends_early_after_text_is_interrupted(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(Reply(content="half of an answer", cut_after=3, cut="end"))
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "ended before its answer did" in caught.value.reason
    assert isinstance(caught.value.__cause__, ModelResponseError)


async def test_errors_before_the_stream_are_retried_as_ever(openai_server: OpenAIServer) -> None:
    openai_server.enqueue(error(429, retry_after=0.05), error(503), Reply(content="at last"))
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert response.message.content == "at last"
    assert len(openai_server.requests) == 3


async def test_a_malformed_chunk_names_the_chunk_and_field(openai_server: OpenAIServer) -> None:
    chunk = {"choices": [{"index": 0, "delta": {"content": 7}, "finish_reason": None}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    openai_server.enqueue(Raw(200, content=body, media_type="text/event-stream"))
    with pytest.raises(ModelResponseError) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "chunk 1.choices[0].delta.content" in str(caught.value)
    assert "gpt-test" in str(caught.value)


async def test_a_loop_on_the_endpoint_emits_its_deltas(openai_server: OpenAIServer) -> None:
    from runtime import Dispatcher, ToolRegistry, tool

    @tool
    def look(q: str) -> str:
        """Look up."""
        return f"seen {q}"

    openai_server.enqueue(tool_calls(("look", {"q": "x"})), Reply(content="Found: seen x."))
    seen: list[Event] = []
    loop = AgentLoop(
        model(openai_server),
        Dispatcher(ToolRegistry([look])),
        tracer=Tracer(seen.append, text=True, log=False),
        worker="w",
    )
    result = await loop.run("find x")
    assert result.text == "Found: seen x."
    deltas = [e for e in seen if isinstance(e, TextDelta)]
    assert "".join(d.text for d in deltas) == "Found: seen x."
    assert {(d.worker, d.turn) for d in deltas} == {("w", 2)}


async def test_a_worker_whose_stream_breaks_after_text_fails_with_it(
    openai_server: OpenAIServer,
) -> None:
    from runtime import Dispatcher, ToolRegistry
    from workers import Failed

    openai_server.enqueue(Reply(content="a partial answer", cut_after=2))
    seen: list[Event] = []
    loop = AgentLoop(
        model(openai_server),
        Dispatcher(ToolRegistry([])),
        tracer=Tracer(seen.append, text=True, log=False),
        worker="w",
    )
    result = await loop.run("answer")
    assert isinstance(result, Failed)
    assert isinstance(result.error, StreamInterrupted)
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["a "]
    assert len(openai_server.requests) == 1
