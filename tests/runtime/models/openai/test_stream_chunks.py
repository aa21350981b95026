"""Assembling a streamed chat completion from its chunks, as servers send them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runtime import ModelResponseError
from runtime.models.openai.request import messages_out
from runtime.models.openai.stream import CompletionStream


def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}], **extra})


def piece(arguments: str, **call: Any) -> dict[str, Any]:
    return {"tool_calls": [{**call, "function": {"arguments": arguments, **call.pop("f", {})}}]}


def test_calls_without_an_index_are_told_apart_by_their_ids() -> None:
    stream = CompletionStream("m")
    stream.add(chunk(piece("", id="a", f={"name": "one"})))
    stream.add(chunk(piece('{"x"')))
    stream.add(chunk(piece(": 1}")))
    stream.add(chunk(piece("", id="b", f={"name": "two"})))
    stream.add(chunk(piece("{}")))
    stream.add(chunk({}, "tool_calls"))
    calls = stream.response().message.tool_calls
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("a", "one", '{"x": 1}'), ("b", "two", "{}"),
    ]  # fmt: skip


def test_a_name_repeated_in_every_piece_and_arguments_sent_whole_are_read() -> None:
    stream = CompletionStream("m")
    first = {"index": 0, "id": "c", "function": {"name": "look", "arguments": {"q": "x"}}}
    stream.add(chunk({"tool_calls": [first]}))
    stream.add(chunk({"tool_calls": [{"index": 0, "function": {"name": "look"}}]}))
    stream.add(chunk({}, "tool_calls", usage={"prompt_tokens": 3, "completion_tokens": 2}))
    response = stream.response()
    [only] = response.message.tool_calls
    assert (only.name, json.loads(only.arguments)) == ("look", {"q": "x"})
    assert (response.usage.input_tokens, response.usage.output_tokens) == (3, 2)


def test_done_ends_the_stream_and_a_stream_without_a_finish_is_cut_off() -> None:
    stream = CompletionStream("m")
    assert stream.add(chunk({"content": "hel"})) == "hel"
    assert stream.add(chunk({"content": "lo"})) == "lo"
    with pytest.raises(ModelResponseError) as caught:
        stream.response()
    assert caught.value.retryable
    assert "no finish_reason in 2 chunks" in str(caught.value)
    stream.add(chunk({}, "stop"))
    assert stream.add("[DONE]") == ""
    assert stream.done
    assert stream.response().message.content == "hello"


def test_an_error_in_the_stream_and_a_chunk_that_is_not_json_are_model_errors() -> None:
    with pytest.raises(ModelResponseError) as caught:
        CompletionStream("m").add(json.dumps({"error": {"message": "overloaded"}}))
    assert "overloaded" in str(caught.value)
    assert not caught.value.retryable
    with pytest.raises(ModelResponseError) as cut:
        CompletionStream("m").add('{"choices": [')
    assert cut.value.retryable
    with pytest.raises(ModelResponseError) as bad:
        CompletionStream("m").add(chunk(piece("", index=True)))
    assert "tool_calls[0].index" in str(bad.value)


def test_a_new_id_starts_a_call_only_where_a_call_can_start() -> None:
    """Ollama sends every call of a turn at index 0, each whole with its id and name: each
    is a call. A proxy that sends a new id with every piece of one call sends no name
    with them, or sends them while the arguments are not whole yet: one call."""
    stream = CompletionStream("m")
    stream.add(chunk(piece('{"q": 1}', index=0, id="a", f={"name": "one"})))
    stream.add(chunk(piece('{"q": 2}', index=0, id="b", f={"name": "two"})))
    stream.add(chunk(piece('{"q"', index=1, id="c", f={"name": "three"})))
    stream.add(chunk(piece(": 3", index=1, id="d")))
    stream.add(chunk(piece("}", index=1, id="e", f={"name": "three"})))
    stream.add(chunk({}, "tool_calls"))
    calls = stream.response().message.tool_calls
    assert [(c.id, c.name, json.loads(c.arguments)) for c in calls] == [
        ("a", "one", {"q": 1}), ("b", "two", {"q": 2}), ("e", "three", {"q": 3}),
    ]  # fmt: skip


def test_empty_reasoning_is_kept_to_be_sent_back_as_a_whole_answers_is() -> None:
    """DeepSeek's thinking mode refuses the next turn (a 400) when a call's message
    comes back without the ``reasoning_content`` its answer had, empty or not."""
    stream = CompletionStream("m")
    stream.add(chunk({"role": "assistant", "content": None, "reasoning_content": ""}))
    stream.add(chunk(piece("{}", index=0, id="c", f={"name": "look"})))
    stream.add(chunk({}, "tool_calls"))
    message = stream.response().message
    assert message.reasoning == ""
    [sent] = messages_out([message], None)
    assert sent["reasoning_content"] == ""


def test_arguments_sent_whole_again_at_the_end_are_not_added_twice() -> None:
    """LiteLLM's proxy sends a call's arguments whole again, in its last chunk, once
    they came in pieces: one call, its arguments once."""
    stream = CompletionStream("m")
    stream.add(chunk(piece('{"q":', index=0, id="a", f={"name": "look"})))
    stream.add(chunk(piece(' "x"}', index=0, id="a")))
    stream.add(chunk(piece('{"q": "x"}', index=0, id="a", f={"name": "look"})))
    stream.add(chunk({}, "tool_calls"))
    [only] = stream.response().message.tool_calls
    assert (only.id, only.name, only.arguments) == ("a", "look", '{"q": "x"}')


def test_an_empty_object_sent_before_the_arguments_is_not_added_to_them() -> None:
    """Gateways in front of Anthropic's API pass on the empty input its tool_use block
    starts with as the call's first arguments, '{}', then the arguments in pieces:
    '{}{"q": "x"}' is no JSON, and the call would be refused."""
    stream = CompletionStream("m")
    stream.add(chunk(piece("{}", index=0, id="a", f={"name": "look"})))
    stream.add(chunk(piece('{"q":', index=0)))
    stream.add(chunk(piece(' "x"}', index=0)))
    stream.add(chunk({}, "tool_calls"))
    [only] = stream.response().message.tool_calls
    assert (only.id, only.name, only.arguments) == ("a", "look", '{"q": "x"}')


def test_a_piece_naming_another_function_at_the_same_index_and_id_is_another_call() -> None:
    """Some of OpenRouter's providers send every call of a turn at one index, with one
    id: each call that names its function is one, none merged into another."""
    stream = CompletionStream("m")
    stream.add(chunk(piece('{"city": "Paris"}', index=0, id="x", f={"name": "weather"})))
    stream.add(chunk(piece('{"q": "museums"}', index=0, id="x", f={"name": "guide"})))
    stream.add(chunk({}, "tool_calls"))
    calls = stream.response().message.tool_calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [
        ("weather", {"city": "Paris"}), ("guide", {"q": "museums"}),
    ]  # fmt: skip
    assert len({c.id for c in calls}) == 2  # the second is given an id of its own
