"""The OpenAI adapters where their features meet, through the real ``openai`` client
over real HTTP against the local OpenAI-compatible server: streamed tool calls as
servers other than OpenAI's number them, run by a worker that shows its text as it
comes; streams broken off, their errors naming the model and the endpoint, never a
password in its URL; a worker whose calls outlast its role's time limit, beside one
whose calls do not; structured output asked the next way of the Responses API; and
endpoints that refuse a parameter the adapter chose (``stream_options``,
``max_tokens``), whose workers are answered all the same."""

from __future__ import annotations

import json
import socket
from typing import Any

import openai
import pytest

from honeycomb import Executor, Role
from runtime import (
    Event,
    ModelConnectionError,
    ModelRequest,
    OpenAIEmbeddings,
    OpenAIModel,
    OpenAIResponsesModel,
    OutputSchema,
    RetryPolicy,
    StreamInterrupted,
    UserMessage,
)
from runtime.events import TextDelta
from tests.support.openai_server import OpenAIServer, Raw, RecordedRequest, Reply, text

REQUEST = ModelRequest(messages=(UserMessage(content="hi"),))


def events(*deltas: dict[str, Any], finish: str = "tool_calls") -> bytes:
    """A streamed chat completion of ``deltas``, its finish and its usage, as sent."""
    chunks = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    chunks.append({"choices": [], "usage": {"prompt_tokens": 20, "completion_tokens": 12}})
    lines = [f"data: {json.dumps({'model': 'm', **c})}\n\n" for c in chunks]
    return "".join([*lines, "data: [DONE]\n\n"]).encode()


def refusal(message: str, param: str) -> Raw:
    """A 400 refusing the request's ``param``, as OpenAI words one."""
    refused = {"message": message, "param": param, "type": "invalid_request_error"}
    return Raw(400, body={"error": {**refused, "code": "unsupported_parameter"}})


def piece(index: int, arguments: str, **named: str) -> dict[str, Any]:
    """One piece of a tool call: ``id`` and ``name`` when given."""
    function = {"arguments": arguments, **({"name": named["name"]} if "name" in named else {})}
    call = {"index": index, "function": function}
    return {"tool_calls": [{**call, "id": named["id"]} if "id" in named else call]}


async def test_streamed_calls_that_share_an_index_are_each_run_once(
    openai_server: OpenAIServer,
) -> None:
    """Ollama numbers every tool call of a turn ``0``: a piece with another id is
    another call, never arguments appended to the one before."""
    stream = events(
        {"role": "assistant", "content": ""},
        piece(0, '{"path": ', id="call_a", name="read"),
        piece(0, '"a.txt"}'),
        piece(0, '{"path": "b.txt"}', id="call_b", name="read"),
    )
    openai_server.enqueue(
        Raw(200, content=stream, media_type="text/event-stream"), text("a and b are read")
    )
    paths: list[str] = []

    async def read(path: str) -> str:
        """Read a file."""
        paths.append(path)
        return f"{path}: ok"

    model = OpenAIModel(
        "m", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1), timeout=10
    )
    executor = Executor([Role(name="reader", tools=("read",))], model, tools=[read])
    shown: list[Event] = []
    result = await executor.run(
        "t", subtasks=[("reader", "read a and b")], on_event=[shown.append], text_deltas=True
    )
    assert sorted(paths) == ["a.txt", "b.txt"]
    assert result.subtasks["s1"].text == "a and b are read"
    first, then = (r.body for r in openai_server.requests)
    assert first["stream"] is True
    answered = then["messages"]
    assert [c["id"] for c in answered[-3]["tool_calls"]] == ["call_a", "call_b"]
    assert [m["tool_call_id"] for m in answered[-2:]] == ["call_a", "call_b"]


async def test_a_stream_broken_off_names_its_model_without_the_urls_password(
    openai_server: OpenAIServer,
) -> None:
    """The error names the model by its repr, which shows its endpoint: the password
    in that endpoint's URL is masked there, as in every answer and error."""
    password = "hunter2-of-the-proxy"
    url = openai_server.base_url.replace("http://", f"http://user:{password}@")
    model = OpenAIModel("m", base_url=url, retry=RetryPolicy(attempts=1))
    openai_server.enqueue(Reply(content="half of an answer", cut_after=3))
    with pytest.raises(StreamInterrupted) as caught:
        await model.stream(REQUEST, lambda _: None)
    assert "'m'" in str(caught.value)
    assert "[password hidden]" in str(caught.value)
    for shown in (
        str(caught.value),
        repr(caught.value),
        repr(model),
        repr(OpenAIEmbeddings("e", base_url=url)),
    ):
        assert password not in shown


@pytest.mark.parametrize("parameter", ["key", "api-key", "Token", "sig"])
async def test_a_key_in_the_query_of_a_base_url_is_a_secret(parameter: str) -> None:
    """An endpoint that takes its key in its URL (``?key=``, as Google's APIs do) is
    named with the key masked, as a password in the URL is: it was shown whole."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    key = "AIzaSy-query-key-0123456789"
    url = f"http://127.0.0.1:{port}/v1?{parameter}={key}"
    model = OpenAIModel("m", base_url=url, retry=RetryPolicy(attempts=1))
    with pytest.raises(ModelConnectionError) as caught:
        await model.complete(REQUEST)
    assert f"{parameter}=[" in str(caught.value)
    for shown in (str(caught.value), repr(caught.value), repr(model)):
        assert key not in shown


async def test_a_call_past_its_roles_time_limit_names_the_model_and_the_limit(
    openai_server: OpenAIServer,
) -> None:
    """Two workers on one model: the one whose role allows 0.3 s a call fails, its
    error saying which model and which limit; the other's answer is kept."""

    def answer(request: RecordedRequest) -> Reply:
        slow = "slowly" in json.dumps(request.body)
        return Reply(content="late" if slow else "in time", delay_s=2.0 if slow else 0.0)

    openai_server.default = answer
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1))
    roles = [Role(name="hasty", model_timeout=0.3), Role(name="patient")]
    result = await Executor(roles, model).run(
        "t", subtasks=[("hasty", "answer slowly"), ("patient", "answer now")]
    )
    failed, kept = result.subtasks["s1"], result.subtasks["s2"]
    assert kept.text == "in time"
    assert failed.status == "failed"
    assert str(failed.error) == (
        "ModelTimeout: the model call timed out after 0.3s "
        "(model 'm'; raise the role's model_timeout if it needs longer)"
    )


async def test_a_stream_that_breaks_off_on_every_attempt_names_the_model_and_endpoint(
    openai_server: OpenAIServer,
) -> None:
    """Cut before any text, each attempt is retried; the last one's error says which
    model's answer broke off, and at which endpoint."""
    openai_server.enqueue(*[Reply(content="lost", cut_after=1)] * 2)
    model = OpenAIModel(
        "m", base_url=openai_server.base_url, retry=RetryPolicy(attempts=2, initial_wait_s=0)
    )
    with pytest.raises(ModelConnectionError) as caught:
        await model.stream(REQUEST, lambda _: None)
    assert str(caught.value).startswith(
        f"cannot reach the model endpoint ({openai_server.base_url}) of model 'm': "
        "the stream broke off: "
    )
    assert (caught.value.model, caught.value.base_url) == ("m", openai_server.base_url)
    assert len(openai_server.requests) == 2


async def test_the_responses_api_asked_for_json_object_is_told_the_schema(
    openai_server: OpenAIServer,
) -> None:
    """An endpoint that refuses ``json_schema`` is asked for ``json_object``: the input
    then says which JSON, as the chat adapter's does (OpenAI also refuses
    ``json_object`` to an input that does not speak of JSON)."""

    def answer(request: RecordedRequest) -> Raw | Reply:
        kind = request.body.get("text", {}).get("format", {}).get("type")
        if kind == "json_schema":
            return Raw(400, "text.format of type json_schema is not supported by this model")
        if kind == "json_object" and "json" not in json.dumps(request.body["input"]).lower():
            return Raw(400, "'input' must contain the word 'json' to use 'text.format' json_object")
        return Reply(content='{"city": "Rome"}')

    openai_server.default = answer
    model = OpenAIResponsesModel("m", base_url=openai_server.base_url)
    schema = OutputSchema(
        name="City",
        json_schema={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    response = await model.complete(ModelRequest(messages=REQUEST.messages, output=schema))
    assert response.message.content == '{"city": "Rome"}'
    assert model.output_mode == "json_object"
    _, asked = (r.body for r in openai_server.requests)
    assert '"city"' in asked["input"][0]["content"]


async def test_the_password_in_the_url_of_a_client_given_is_a_secret() -> None:
    """A model given a client of its own reaches the endpoint that client names: an
    error naming that endpoint masks the password in its URL."""
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    password = "hunter2-of-the-client"
    client = openai.AsyncOpenAI(
        api_key="unused", base_url=f"http://user:{password}@127.0.0.1:{port}/v1", max_retries=0
    )
    model = OpenAIModel("m", client=client, retry=RetryPolicy(attempts=1))
    async with client:
        with pytest.raises(ModelConnectionError) as caught:
            await model.complete(REQUEST)
    assert f"(http://user:[password hidden]@127.0.0.1:{port}/v1) of model 'm'" in str(caught.value)
    assert password not in repr(caught.value)


async def test_workers_stream_from_an_endpoint_that_refuses_stream_options(
    openai_server: OpenAIServer,
) -> None:
    """A gateway that does not know ``stream_options`` refuses every streamed call that
    asks for its usage: the model streams without it from then on, and the workers
    whose calls were refused are answered, their text shown as it comes."""

    def answer(request: RecordedRequest) -> Raw | Reply:
        if "stream_options" in request.body:
            return refusal("Unknown parameter: 'stream_options'.", "stream_options")
        return Reply(content=f"done {request.body['messages'][-1]['content']}")

    openai_server.default = answer
    model = OpenAIModel("m", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1))
    shown: list[Event] = []
    result = await Executor([Role(name="w")], model).run(
        "t", subtasks=[("w", "a"), ("w", "b")], on_event=[shown.append], text_deltas=True
    )
    assert [s.text for s in result.subtasks.values()] == ["done a", "done b"]
    assert {e.text for e in shown if isinstance(e, TextDelta)} >= {"done ", "a", "b"}
    asked = ["stream_options" in r.body for r in openai_server.requests]
    assert asked.count(False) == 2
    assert 1 <= asked.count(True) <= 2
    assert model.stream_usage is False


async def test_an_endpoint_that_refuses_max_tokens_is_sent_max_completion_tokens(
    openai_server: OpenAIServer,
) -> None:
    """OpenAI's reasoning models behind another URL (Azure's) refuse the ``max_tokens``
    every compatible server takes: the output limit goes as ``max_completion_tokens``
    in that call and every later one, and the workers are answered."""

    def answer(request: RecordedRequest) -> Raw | Reply:
        if "max_tokens" in request.body:
            return refusal(
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                "max_tokens",
            )
        return Reply(content="done")

    openai_server.default = answer
    model = OpenAIModel("o3-mini", base_url=openai_server.base_url, retry=RetryPolicy(attempts=1))
    roles = [Role(name="w", max_output_tokens=500)]
    result = await Executor(roles, model).run("t", subtasks=[("w", "a"), ("w", "b")])
    assert [s.text for s in result.subtasks.values()] == ["done", "done"]
    limits = [
        (r.body.get("max_tokens"), r.body.get("max_completion_tokens"))
        for r in openai_server.requests
    ]
    assert limits.count((None, 500)) == 2
    assert 1 <= limits.count((500, None)) <= 2
    assert model.limit_name == "max_completion_tokens"
