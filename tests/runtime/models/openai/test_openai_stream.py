"""``OpenAIModel.stream`` through the real ``openai`` client, over real HTTP, against
the local server's server-sent events: text as it comes, tool calls assembled from
interleaved pieces, usage from the last chunk, and retries only before any text."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from dataclasses import replace
from typing import Any

import pytest

from runtime import (
    ModelHTTPError,
    ModelRequest,
    ModelResponseError,
    ModelTimeout,
    OpenAIModel,
    RetryPolicy,
    StreamInterrupted,
    Tracer,
    UserMessage,
)
from runtime.events import CallReport, Event, ModelCallRetrying, TextDelta, current_call
from tests.support.openai_server import OpenAIServer, Raw, Reply, error, tool_calls
from workers import AgentLoop
from workers.services import Services

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))
FAST = RetryPolicy(attempts=3, initial_wait_s=0.0, jitter_s=0.0)


def model(server: OpenAIServer, retry: RetryPolicy = FAST, timeout: float = 120) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.base_url, retry=retry, timeout=timeout)


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
        worker="w",
        services=Services(tracer=Tracer(seen.append, text=True, log=False)),
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
        worker="w",
        services=Services(tracer=Tracer(seen.append, text=True, log=False)),
    )
    result = await loop.run("answer")
    assert isinstance(result, Failed)
    assert isinstance(result.error, StreamInterrupted)
    assert [e.text for e in seen if isinstance(e, TextDelta)] == ["a "]
    assert len(openai_server.requests) == 1
    # Its endpoint read the prompt and wrote a piece of text: the worker counts them.
    assert (result.usage.model_calls, result.usage.output_tokens) == (1, 1)
    assert result.usage.input_tokens > 0


# --- time limits: the whole attempt, not the gap between two chunks -------------------


@pytest.mark.parametrize("limit_of", ["model", "request"])
async def test_a_stream_that_keeps_sending_past_its_time_limit_is_cut_at_it(
    openai_server: OpenAIServer, limit_of: str
) -> None:
    """Chunks 0.1 s apart, about 4 s in all: no gap trips the 0.6 s limit, the whole
    call does, whether the limit is the model's or the request's (a role's
    ``model_timeout``). Text was shown, so the stream ends interrupted."""
    words = " ".join(f"w{i}" for i in range(40))
    openai_server.enqueue(Reply(content=words, chunk_delay_s=0.1), Reply(content="again"))
    if limit_of == "model":
        streamed, request = model(openai_server, timeout=0.6), REQUEST
    else:
        streamed, request = (
            model(openai_server),
            ModelRequest(messages=REQUEST.messages, timeout=0.6),
        )
    shown: list[str] = []
    started = time.monotonic()
    with pytest.raises(StreamInterrupted) as caught:
        await streamed.stream(request, shown.append)
    assert time.monotonic() - started < 3.0
    cause = caught.value.__cause__
    assert isinstance(cause, ModelTimeout)
    assert cause.timeout_s == 0.6
    assert caught.value.shown_chars == len("".join(shown)) > 0
    assert len(openai_server.requests) == 1


async def test_a_stream_past_its_time_limit_before_any_text_is_retried_as_a_timeout(
    openai_server: OpenAIServer,
) -> None:
    """Reasoning is not shown: a stream that thinks past its limit has shown nothing,
    and is retried as a one-shot call that timed out is."""
    thinking = " ".join(f"t{i}" for i in range(40))
    openai_server.enqueue(
        Reply(reasoning=thinking, content="late", chunk_delay_s=0.1), Reply(content="in time")
    )
    events = reporting()
    shown: list[str] = []
    response = await model(openai_server, timeout=0.6).stream(REQUEST, shown.append)
    assert response.message.content == "in time"
    assert shown == ["in ", "time"]
    assert len(openai_server.requests) == 2
    assert [e.status for e in events if isinstance(e, ModelCallRetrying)] == ["timeout"]


# --- errors sent in the stream ---------------------------------------------------------

SERVER_ERROR = {"message": "The server had an error.", "type": "server_error", "param": None,
                "code": None}  # fmt: skip


def error_stream(error: dict[str, Any], *, text: str = "") -> Raw:
    """A stream that sends the role, then ``text`` if any, then ``error`` as an event."""
    deltas = [{"role": "assistant", "content": ""}] + ([{"content": text}] if text else [])
    chunks: list[dict[str, Any]] = [
        {"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas
    ]
    chunks.append({"error": error})
    body = "".join(f"data: {json.dumps(chunk)}\n\n" for chunk in chunks).encode()
    return Raw(200, content=body, media_type="text/event-stream")


def reporting() -> list[Event]:
    """The events the model call to come emits (its retries)."""
    events: list[Event] = []
    current_call.set(CallReport(Tracer(events.append, log=False), worker="w", run_id=None, turn=1))
    return events


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (SERVER_ERROR, 500),  # OpenAI's
        ({"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}, 429),
        ({"object": "error", "message": "engine died", "type": "InternalServerError",
          "param": None, "code": 500}, 500),  # vLLM's: the HTTP status as the code
    ],
)  # fmt: skip
async def test_an_error_event_of_a_retryable_kind_before_any_text_is_retried(
    openai_server: OpenAIServer, error: dict[str, Any], status: int
) -> None:
    openai_server.enqueue(error_stream(error), Reply(content="kept"))
    streamed = model(openai_server)
    events = reporting()
    shown: list[str] = []
    response = await streamed.stream(REQUEST, shown.append)
    assert response.message.content == "kept"
    assert shown == ["kept"]
    assert len(openai_server.requests) == 2
    # Retried as the HTTP error it stands for: a rate limit slows the limiter too.
    assert [e.status for e in events if isinstance(e, ModelCallRetrying)] == [str(status)]
    assert streamed.limiter is not None
    assert streamed.limiter.throttled == (1 if status == 429 else 0)


async def test_an_error_event_after_text_ends_the_stream_as_interrupted(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(error_stream(SERVER_ERROR, text="Half "), Reply(content="again"))
    shown: list[str] = []
    with pytest.raises(StreamInterrupted) as caught:
        await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["Half "]
    cause = caught.value.__cause__
    assert isinstance(cause, ModelHTTPError)
    assert cause.status == 500
    assert "The server had an error." in str(cause)
    assert len(openai_server.requests) == 1


async def test_an_error_event_of_another_kind_is_not_retried(openai_server: OpenAIServer) -> None:
    refused = {"message": "too long", "type": "invalid_request_error",
               "code": "context_length_exceeded"}  # fmt: skip
    openai_server.enqueue(error_stream(refused), Reply(content="again"))
    with pytest.raises(ModelResponseError) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "context_length_exceeded" in str(caught.value)
    assert "sent an error in its stream" in str(caught.value)
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1


async def test_a_stream_of_several_choices_is_the_first_choices_answer(
    openai_server: OpenAIServer,
) -> None:
    """A request for two choices (``n: 2``): the server interleaves them, each at its
    index. The answer and the text shown are the first's, as a whole answer's are,
    not the two choices' pieces run together."""

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {"choices": [{"index": index, "delta": delta, "finish_reason": finish}]}

    call = {"index": 0, "id": "b1", "function": {"name": "look", "arguments": "{}"}}
    chunks = [
        chunk(0, {"role": "assistant", "content": "Oslo "}),
        chunk(1, {"role": "assistant", "tool_calls": [call]}),
        chunk(0, {"content": "is cold."}, "stop"),
        chunk(1, {}, "tool_calls"),
        {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 9}},
    ]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    openai_server.enqueue(Raw(200, content=body.encode(), media_type="text/event-stream"))
    two = OpenAIModel("gpt-test", base_url=openai_server.base_url, settings={"n": 2})
    shown: list[str] = []
    response = await two.stream(REQUEST, shown.append)
    assert openai_server.requests[0].body["n"] == 2
    assert shown == ["Oslo ", "is cold."]
    assert (response.message.content, response.message.tool_calls) == ("Oslo is cold.", ())
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (5, 9)


# --- a server that ignores stream: true -------------------------------------------------


async def test_a_whole_answer_to_a_streamed_request_is_read_as_the_answer(
    openai_server: OpenAIServer,
) -> None:
    """The server answers the stream with one ``application/json`` completion: its text
    is shown once, whole, and the rest is read as a one-shot answer is, first time."""
    openai_server.enqueue(
        Reply(content="The whole answer, at once.", reasoning="think first", prompt_tokens=31,
              completion_tokens=9, reasoning_tokens=4, ignore_stream=True)
    )  # fmt: skip
    events = reporting()
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["The whole answer, at once."]
    assert response.message.content == "The whole answer, at once."
    assert response.message.reasoning == "think first"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (31, 9)
    assert response.usage.reasoning_tokens == 4
    assert response.finish_reason == "stop"
    [sent] = openai_server.requests
    assert sent.body["stream"] is True
    assert not [e for e in events if isinstance(e, ModelCallRetrying)]


async def test_tool_calls_of_a_whole_answer_to_a_streamed_request_are_read(
    openai_server: OpenAIServer,
) -> None:
    calls = tool_calls(("weather", {"city": "Lisbon"}), ("sum", "{}"), content="On it.")
    openai_server.enqueue(
        replace(calls, ignore_stream=True),
        Reply(content=None, finish_reason="length", ignore_stream=True),
    )
    streamed = model(openai_server)
    shown: list[str] = []
    response = await streamed.stream(REQUEST, shown.append)
    assert [(c.id, c.name, c.arguments) for c in response.message.tool_calls] == [
        ("call_0", "weather", '{"city": "Lisbon"}'), ("call_1", "sum", "{}"),
    ]  # fmt: skip
    assert response.finish_reason == "tool_calls"
    assert shown == ["On it."]
    cut = await streamed.stream(REQUEST, shown.append)
    assert (cut.message.content, cut.finish_reason) == (None, "length")
    assert shown == ["On it."]  # no text: nothing shown
    assert len(openai_server.requests) == 2


async def test_a_one_shot_call_sent_as_a_stream_reads_a_whole_answer(
    openai_server: OpenAIServer,
) -> None:
    """As :class:`~runtime.models.llama.LlamaModel` sends its one-shot calls."""
    openai_server.enqueue(Reply(content="whole", ignore_stream=True))
    streamed = model(openai_server)
    streamed.stream_calls = True
    response = await streamed.complete(REQUEST)
    assert response.message.content == "whole"
    assert len(openai_server.requests) == 1
    assert openai_server.requests[0].body["stream"] is True


async def test_an_error_body_answering_a_stream_is_retried_as_the_error_it_stands_for(
    openai_server: OpenAIServer,
) -> None:
    openai_server.enqueue(Raw(200, body={"error": SERVER_ERROR}), Reply(content="kept"))
    events = reporting()
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert response.message.content == "kept"
    assert shown == ["kept"]
    assert [e.status for e in events if isinstance(e, ModelCallRetrying)] == ["500"]
    assert len(openai_server.requests) == 2


async def test_an_error_body_of_another_kind_answering_a_stream_is_not_retried(
    openai_server: OpenAIServer,
) -> None:
    refused = {"message": "too long", "type": "invalid_request_error",
               "code": "context_length_exceeded"}  # fmt: skip
    openai_server.enqueue(Raw(200, body={"error": refused}), Reply(content="again"))
    with pytest.raises(ModelResponseError) as caught:
        await model(openai_server).stream(REQUEST, lambda text: None)
    assert "context_length_exceeded" in str(caught.value)
    assert "answered with an error" in str(caught.value)
    assert not caught.value.retryable
    assert len(openai_server.requests) == 1


async def test_an_html_page_answering_a_stream_says_what_came_and_is_retried(
    openai_server: OpenAIServer,
) -> None:
    """A proxy's error page, or a web server where no API answers: not a stream that
    ended early, with nothing to say what came."""
    page = Raw(200, content=b"<!doctype html><p>Sign in to continue</p>", media_type="text/html")
    openai_server.enqueue(page, Reply(content="kept"), page, page, page)
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert shown == ["kept"]
    with pytest.raises(ModelResponseError) as caught:
        await model(openai_server).stream(REQUEST, shown.append)
    assert "answered with a body that is not JSON" in str(caught.value)
    assert "Sign in to continue" in str(caught.value)
    assert response.message.content == "kept"
    assert len(openai_server.requests) == 5


async def test_a_call_cancelled_mid_stream_closes_its_stream(openai_server: OpenAIServer) -> None:
    """A run cancelled while its model writes: the server sees its reader go (vLLM and
    llama.cpp's server stop generating then), the held rest of the answer unsent."""
    held = threading.Event()
    openai_server.enqueue(Reply(content="one two three", hold_after=2, hold_until=held))
    shown = asyncio.Event()
    call = asyncio.ensure_future(model(openai_server).stream(REQUEST, lambda text: shown.set()))
    try:
        await shown.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(openai_server.left.wait, 10)
    finally:
        held.set()


@pytest.mark.parametrize("calls", [False, True], ids=["text", "calls"])
async def test_a_stream_that_ends_with_done_and_no_finish_reason_is_whole(
    openai_server: OpenAIServer, calls: bool
) -> None:
    """Some proxies in front of Gemini (and vLLM at times) send no finish_reason, then
    ``[DONE]``: the server said the answer is over, and it is the call's (not cut off:
    its text was shown, which would fail every streamed call of such a server)."""
    piece = {"index": 0, "id": "c1", "function": {"name": "look", "arguments": "{}"}}
    delta = {"tool_calls": [piece]} if calls else {"content": "Oslo."}
    chunks = [{"choices": [{"index": 0, "delta": delta, "finish_reason": None}]}]
    body = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    openai_server.enqueue(Raw(200, content=body.encode(), media_type="text/event-stream"))
    shown: list[str] = []
    response = await model(openai_server).stream(REQUEST, shown.append)
    assert len(openai_server.requests) == 1
    if calls:
        assert [c.name for c in response.message.tool_calls] == ["look"]
        assert response.finish_reason == "tool_calls"
    else:
        assert shown == ["Oslo."]
        assert (response.message.content, response.finish_reason) == ("Oslo.", "stop")
