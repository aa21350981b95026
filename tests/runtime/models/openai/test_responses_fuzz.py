"""Malformed Responses API bodies, over real HTTP through the real ``openai`` client:
whatever the endpoint sends, ``OpenAIResponsesModel.complete`` answers or raises a
``ModelResponseError`` naming the field that is wrong."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime import (
    ModelResponse,
    ModelResponseError,
    OpenAIResponsesModel,
    YamlPath,
    format_path,
)
from runtime.models.checks import check_response as checked
from tests.support.data_paths import paths_in
from tests.support.fuzzing import Client, json_values
from tests.support.openai_server import OpenAIServer, Raw, Reply, _response

FUZZ = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

GOOD = _response(
    Reply(
        content="hello",
        reasoning="think",
        reasoning_encrypted="opaque",
        tool_calls=(("call_1", "lookup", '{"q": "x"}'), ("call_2", "f", "{}")),
        cached_tokens=3,
        reasoning_tokens=2,
    ),
    "gpt-test",
    1,
)


@pytest.fixture(scope="module")
def client(_running_openai_server: OpenAIServer) -> Iterator[Client]:
    made = Client(_running_openai_server, OpenAIResponsesModel)
    yield made
    made.close()


@st.composite
def mutated_responses(draw: st.DrawFn) -> tuple[dict[str, Any], YamlPath]:
    """The good response with one field deleted or replaced by a random JSON value."""
    data = copy.deepcopy(GOOD)
    path = draw(st.sampled_from(paths_in(data)))
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    if draw(st.booleans()):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return data, path


@FUZZ
@given(mutated=mutated_responses())
@example(mutated=({**GOOD, "status": ""}, ("status",)))  # a status of no known kind
def test_a_mutated_response_answers_or_says_which_field_is_wrong(
    client: Client, mutated: tuple[dict[str, Any], YamlPath]
) -> None:
    data, path = mutated
    result = client.outcome(Raw(200, body=data))
    if isinstance(result, ModelResponse):
        assert checked(result, "gpt-test") is result  # what the agent loop accepts as is
        assert all(c.id and c.name for c in result.message.tool_calls)
        return
    assert isinstance(result, ModelResponseError), repr(result)
    message = str(result)
    assert message.startswith("model 'gpt-test' "), message
    if path[0] == "error":  # an error put where the body had none
        assert "answered with an error" in message
        return
    if path == ("status",) and isinstance(data["status"], str):  # an unknown status
        assert f"status {data['status']!r}" in message
        return
    detail = message.partition("malformed response: ")[2]
    prefixes = [format_path(path[:n]) for n in range(1, len(path) + 1)]
    assert any(detail.startswith(p) for p in prefixes), (path, message)


@FUZZ
@given(cut=st.integers(min_value=0, max_value=len(json.dumps(GOOD)) - 1))
def test_a_truncated_body_is_a_retryable_model_response_error(client: Client, cut: int) -> None:
    result = client.outcome(Raw(200, content=json.dumps(GOOD).encode()[:cut]))
    assert isinstance(result, ModelResponseError), repr(result)
    assert "not JSON" in str(result)
    assert result.retryable


def test_the_good_response_is_read_whole(client: Client) -> None:
    result = client.outcome(Raw(200, body=GOOD))
    assert isinstance(result, ModelResponse)
    message = result.message
    assert (message.content, message.reasoning) == ("hello", "think")
    assert [c.id for c in message.tool_calls] == ["call_1", "call_2"]
    assert message.reasoning_items[0].encrypted_content == "opaque"
    assert (result.usage.reasoning_tokens, result.finish_reason) == (2, "tool_calls")
