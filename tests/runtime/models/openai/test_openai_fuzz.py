"""Malformed completions, over real HTTP through the real ``openai`` client: whatever
the endpoint sends, ``OpenAIModel.complete`` answers or raises a ``ModelError`` that
says what was wrong, never a ``KeyError``, ``TypeError``, ``AttributeError`` or
``pydantic.ValidationError``."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runtime import (
    ModelHTTPError,
    ModelResponse,
    ModelResponseError,
    OpenAIModel,
    YamlPath,
    format_path,
)
from runtime.models.checks import check_response as checked
from tests.support.data_paths import paths_in
from tests.support.fuzzing import Client, json_values
from tests.support.openai_server import OpenAIServer, Raw, Reply, _completion

EXAMPLES = 100
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

GOOD = _completion(
    Reply(content="hello", tool_calls=(("call_1", "lookup", '{"q": "x"}'), ("call_2", "f", "{}"))),
    "gpt-test",
    1,
)


@pytest.fixture(scope="module")
def client(_running_openai_server: OpenAIServer) -> Iterator[Client]:
    made = Client(_running_openai_server, OpenAIModel)
    yield made
    made.close()


def check_response(response: ModelResponse) -> None:
    assert checked(response, "gpt-test") is response  # what the agent loop accepts as is
    assert response.message.role == "assistant"
    for call in response.message.tool_calls:
        assert call.id
        assert call.name
    assert response.usage.input_tokens >= 0
    assert response.usage.output_tokens >= 0


@st.composite
def mutated_completions(draw: st.DrawFn) -> tuple[dict[str, Any], str, YamlPath]:
    """The good completion with one field deleted or replaced by a random JSON value."""
    data = copy.deepcopy(GOOD)
    path = draw(st.sampled_from(paths_in(data)))
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    kind = draw(st.sampled_from(["delete", "replace"]))
    if kind == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return data, kind, path


@FUZZ
@given(mutated=mutated_completions())
def test_a_mutated_completion_answers_or_says_which_field_is_wrong(
    client: Client, mutated: tuple[dict[str, Any], str, YamlPath]
) -> None:
    data, _, path = mutated
    result = client.outcome(Raw(200, body=data))
    if isinstance(result, ModelResponse):
        check_response(result)
        return
    assert isinstance(result, ModelResponseError), repr(result)
    message = str(result)
    assert message.startswith("model 'gpt-test' "), message
    # it names the field it changed, or a field within the value put there
    detail = message.partition("malformed completion: ")[2]
    prefixes = [format_path(path[:n]) for n in range(1, len(path) + 1)]
    named = any(detail.startswith(p) for p in prefixes) or "no choices" in message
    assert named or (detail.startswith("the body") and path == ()), (path, message)


@FUZZ
@given(
    cut=st.integers(min_value=0, max_value=len(json.dumps(GOOD)) - 1),
    media_type=st.sampled_from(["application/json", "text/html", "text/plain"]),
)
def test_a_truncated_body_is_a_model_response_error(
    client: Client, cut: int, media_type: str
) -> None:
    body = json.dumps(GOOD).encode()[:cut]
    result = client.outcome(Raw(200, content=body, media_type=media_type))
    assert isinstance(result, ModelResponseError), repr(result)
    assert "not JSON" in str(result), str(result)


@FUZZ
@given(
    status=st.sampled_from([200, 400, 401, 404, 422, 429, 500, 502, 503]),
    content=st.binary(max_size=60) | json_values.map(lambda v: json.dumps(v).encode()),
    media_type=st.sampled_from(["application/json", "text/html", "application/octet-stream"]),
)
def test_any_body_with_any_status_is_a_response_or_a_model_error(
    client: Client, status: int, content: bytes, media_type: str
) -> None:
    result = client.outcome(Raw(status, content=content, media_type=media_type))
    if status != 200:
        assert isinstance(result, ModelHTTPError), repr(result)
        assert result.status == status
    elif isinstance(result, ModelResponse):
        check_response(result)
    else:
        assert isinstance(result, ModelResponseError), repr(result)
        assert str(result).startswith("model 'gpt-test' ")


def at(*path: str | int, value: Any = "DELETE") -> dict[str, Any]:
    """The good completion with the field at ``path`` deleted, or set to ``value``."""
    data = copy.deepcopy(GOOD)
    parent: Any = data
    for part in path[:-1]:
        parent = parent[part]
    if value == "DELETE":
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return data


MESSAGE = ("choices", 0, "message")
CALL = (*MESSAGE, "tool_calls", 0)


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [
        (Raw(200, content=b'{"id": "x", "choi'), "a body that is not JSON"),
        (Raw(200, content=b"<html>502 Bad Gateway</html>", media_type="text/html"), "not JSON"),
        (Raw(200, content=b""), "not JSON"),
        (Raw(200, content=b"\xff\xfe"), "not JSON"),
        (Raw(200, body=[GOOD]), "the body is a list"),
        (Raw(200, body={"error": {"message": "overloaded"}}), "answered with an error"),
        (Raw(200, body=at("choices")), "returned no choices"),
        (Raw(200, body=at("choices", value=[])), "returned no choices"),
        (Raw(200, body=at("choices", value={"0": {}})), "choices is a dict"),
        (Raw(200, body=at("choices", value=[None])), "choices[0] is missing"),
        (Raw(200, body=at(*MESSAGE)), "choices[0].message is missing"),
        (Raw(200, body=at(*MESSAGE, value="hi")), "choices[0].message is a str"),
        (Raw(200, body=at(*MESSAGE, "content", value=5)), "message.content is an int"),
        (Raw(200, body=at(*MESSAGE, "content", value=[5])), "message.content[0] is an int"),
        (Raw(200, body=at(*MESSAGE, "tool_calls", value="x")), "message.tool_calls is a str"),
        (Raw(200, body=at(*MESSAGE, "tool_calls", value=[None])), "tool_calls[0] is missing"),
        (Raw(200, body=at(*CALL, "function")), "tool_calls[0].function is missing"),
        (Raw(200, body=at(*CALL, "id", value=7)), "tool_calls[0].id is an int"),
        (Raw(200, body=at(*CALL, "function", "name", value=7)), "function.name is an int"),
        (Raw(200, body=at(*CALL, "function", "arguments", value=[1])), "arguments is a list"),
        (Raw(200, body=at("choices", 0, "finish_reason", value=1)), "finish_reason is an int"),
        (Raw(200, body=at("usage", value="many")), "usage is a str"),
        (Raw(200, body=at("usage", "prompt_tokens", value="3")), "usage.prompt_tokens is a str"),
        (Raw(200, body=at("usage", "prompt_tokens", value=-1)), "prompt_tokens is an int (-1)"),
        (Raw(200, body=at("model", value=["gpt"])), "model is a list"),
        (Raw(200, body=at(*MESSAGE, "reasoning_content", value=3)), "reasoning_content is an int"),
        (
            Raw(
                200, body=at("usage", "completion_tokens_details", value={"reasoning_tokens": "9"})
            ),
            "completion_tokens_details.reasoning_tokens is a str",
        ),
    ],
)
def test_each_malformation_is_named(client: Client, behaviour: Raw, expected: str) -> None:
    result = client.outcome(behaviour)
    assert isinstance(result, ModelResponseError), repr(result)
    assert expected in str(result)
    # A body that is not JSON is a proxy's fault, tried again; a malformed one is not.
    assert result.retryable == ("not JSON" in expected)


@pytest.mark.parametrize(
    ("body", "check"),
    [
        # missing optional fields take their defaults
        # no usage: the token estimate's, so that the call still counts
        (at("usage"), lambda r: r.usage.input_tokens > 0 and r.usage.output_tokens > 0),
        (at("model"), lambda r: r.model == "gpt-test"),
        (at("choices", 0, "finish_reason"), lambda r: r.finish_reason == "stop"),
        (at(*CALL, "function", "arguments"), lambda r: r.message.tool_calls[0].arguments == ""),
        # some servers send the arguments as an object: they are kept, as JSON text
        (
            at(*CALL, "function", "arguments", value={"q": "x"}),
            lambda r: json.loads(r.message.tool_calls[0].arguments) == {"q": "x"},
        ),
        # a call without an id gets one (Gemini's endpoint and LM Studio send "")
        (at(*CALL, "id"), lambda r: r.message.tool_calls[0].id.startswith("call_")),
        (at(*CALL, "id", value=""), lambda r: r.message.tool_calls[0].id.startswith("call_")),
        # a reasoning model's thinking, under either name; another shape is not text
        (at(*MESSAGE, "reasoning_content", value="hm"), lambda r: r.message.reasoning == "hm"),
        (at(*MESSAGE, "reasoning", value="hm"), lambda r: r.message.reasoning == "hm"),
        (at(*MESSAGE, "reasoning", value={"effort": "low"}), lambda r: r.message.reasoning is None),
        # calls of another type than "function" are left out
        (at(*CALL, "type", value="retrieval"), lambda r: len(r.message.tool_calls) == 1),
    ],
)
def test_what_can_be_understood_is(client: Client, body: Any, check: Any) -> None:
    result = client.outcome(Raw(200, body=body))
    assert isinstance(result, ModelResponse), repr(result)
    assert check(result)
